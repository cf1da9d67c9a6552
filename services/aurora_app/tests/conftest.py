"""Fixtures: start the aurora_app binary on an ephemeral port and talk raw HTTP to it.

The binary comes from the AURORA_BIN environment variable (set by the Bazel test
rule). Without it, the sources are compiled once per session with ldc2.
"""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

# the helpers live next to this file (importable under any pytest import mode)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from rawhttp import start_server  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


def _build(tmp_dir: pathlib.Path) -> str:
    ldc2 = shutil.which("ldc2")
    if ldc2 is None:
        pytest.fail("AURORA_BIN is not set and ldc2 is not installed to build the server")
    out = tmp_dir / "aurora_app"
    lib = ROOT.parent.parent / "perfkit" / "metrics" / "d" / "source"  # the perfkit metrics library
    srcs = [str(ROOT / "source" / "app.d")] + sorted(str(p) for p in (ROOT / "source" / "aurora").glob("*.d"))
    srcs += sorted(str(p) for p in (lib / "perfkit_metrics").glob("*.d"))
    subprocess.run([ldc2, "-O3", "-release", "-boundscheck=on", "-I", str(ROOT / "source"), "-I", str(lib), *srcs,
                    "-L-lssl", "-L-lcrypto", f"-of={out}"], check=True, cwd=tmp_dir)
    return str(out)


@pytest.fixture(scope="session")
def aurora_bin(tmp_path_factory):
    path = os.environ.get("AURORA_BIN")
    if path:
        path = os.path.abspath(path)
        assert os.access(path, os.X_OK), f"AURORA_BIN={path} is not executable"
        return path
    return _build(tmp_path_factory.mktemp("aurora_build"))


@pytest.fixture
def make_server(aurora_bin):
    """Factory: make_server('--header-timeout-ms', '500') -> Server (stopped at teardown)."""
    servers = []

    def make(*flags, workers: int = 1):
        s = start_server(aurora_bin, "--workers", str(workers), *flags)
        servers.append(s)
        return s

    try:
        yield make
    finally:
        for s in servers:
            s.stop()


@pytest.fixture
def server(make_server):
    return make_server()


