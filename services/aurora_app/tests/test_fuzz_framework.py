"""A bounded libFuzzer run of the router and the response builder (fuzz/framework_fuzz.d): matches must be
repeatable and name their route's parameters with values inside the path or the Params' room; whatever
sequence of builder calls a handler makes, the buffer holds one well-formed response (no header injection,
the body framed exactly). Any failed assertion, crash or ASan report fails this test.
`AURORA_FUZZ_SECONDS` sets the time (default 15)."""
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SECONDS = int(os.environ.get("AURORA_FUZZ_SECONDS", "15"))


@pytest.fixture(scope="module")
def fuzzer():
    path = os.environ.get("AURORA_FRAMEWORK_FUZZER")
    if not path:
        pytest.skip("AURORA_FRAMEWORK_FUZZER is not set (the Bazel target sets it)")
    return os.path.abspath(path)


def test_framework_fuzz_bounded_run(fuzzer, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(ROOT / "fuzz" / "framework_corpus", corpus)
    r = subprocess.run([fuzzer, f"-max_total_time={SECONDS}", "-rss_limit_mb=1024", "-timeout=5",
                        f"-artifact_prefix={tmp_path}/", str(corpus)],
                       capture_output=True, text=True, timeout=SECONDS + 60, cwd=tmp_path)
    tail = r.stderr[-3000:]
    assert r.returncode == 0 and "Done" in r.stderr, tail
    assert int(r.stderr.rsplit("Done ", 1)[1].split()[0]) > 10_000, tail
    assert not list(tmp_path.glob("crash-*")), tail


def test_framework_seeds_run_clean(fuzzer, tmp_path):
    seeds = sorted(str(p) for p in (ROOT / "fuzz" / "framework_corpus").iterdir())
    r = subprocess.run([fuzzer, *seeds], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.count("Executed ") == len(seeds)
