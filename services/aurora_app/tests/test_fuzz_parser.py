"""A bounded libFuzzer run of the request parser (fuzz/parser_fuzz.d).

The fuzzer binary comes from AURORA_FUZZER (set by the Bazel rule); without it
it is built here with `ldc2 -fsanitize=fuzzer,address`. The target asserts that
parsing a stream whole and split into pieces gives identical outcomes and that
every slice stays inside the buffer; any failed assertion, crash, leak or
ASan report fails this test.
"""
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SECONDS = int(os.environ.get("AURORA_FUZZ_SECONDS", "20"))


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory):
    path = os.environ.get("AURORA_FUZZER")
    if path:
        return os.path.abspath(path)
    ldc2 = shutil.which("ldc2")
    if ldc2 is None:
        pytest.skip("ldc2 not installed and AURORA_FUZZER not set")
    out = tmp_path_factory.mktemp("fuzz") / "parser_fuzz"
    cmd = [ldc2, "-g", "-O1", "-fsanitize=fuzzer,address", "-I", str(ROOT / "source"),
           str(ROOT / "fuzz" / "parser_fuzz.d"), str(ROOT / "source" / "aurora" / "parser.d"),
           f"-of={out}"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=out.parent)
    if r.returncode != 0 and "undefined reference to `__sanitizer_cov" in r.stderr:
        pytest.skip("libFuzzer runtime missing (Debian package libclang-rt-14-dev)")
    assert r.returncode == 0, r.stderr
    return str(out)


def test_parser_fuzz_bounded_run(fuzzer, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(ROOT / "fuzz" / "corpus", corpus)
    r = subprocess.run([fuzzer, f"-max_total_time={SECONDS}", "-rss_limit_mb=1024", "-timeout=5",
                        f"-artifact_prefix={tmp_path}/", str(corpus)],
                       capture_output=True, text=True, timeout=SECONDS + 60, cwd=tmp_path)
    tail = r.stderr[-3000:]
    assert r.returncode == 0, tail
    assert "Done" in r.stderr, tail
    runs = int(r.stderr.rsplit("Done ", 1)[1].split()[0])
    assert runs > 1000, tail
    assert not list(tmp_path.glob("crash-*")), tail


def test_seed_inputs_run_clean(fuzzer, tmp_path):
    # the seed corpus replays one input at a time
    seeds = sorted(str(p) for p in (ROOT / "fuzz" / "corpus").iterdir())
    r = subprocess.run([fuzzer, *seeds], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.count("Executed ") == len(seeds)
