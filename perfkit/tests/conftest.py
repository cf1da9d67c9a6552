"""Shared helpers of the perfkit tests: where the kit is, how to run its CLI, a tiny scenario folder."""

import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PERFKIT_DIR = os.path.dirname(HERE)
PEERS = os.path.join(PERFKIT_DIR, "peers")


def load_bin() -> str | None:
    p = os.environ.get("PERFKIT_BIN_PERFKIT_LOAD") or shutil.which("perfkit-load")
    return os.path.abspath(p) if p else None


@pytest.fixture(scope="session")
def perfkit_load():
    p = load_bin()
    assert p and os.access(p, os.X_OK), \
        "the perfkit-load binary is needed: set PERFKIT_BIN_PERFKIT_LOAD (Bazel passes it via env)"
    return p


def cli_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PERFKIT_DIR] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
                                        + [p for p in sys.path if p])
    return env


def run_cli(args, timeout=120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfkit"] + list(args), capture_output=True, text=True,
                          timeout=timeout, env=cli_env(), **kw)


UVICORN_RAW = '''["${python}", "-m", "uvicorn", "raw_asgi:app", "--app-dir", "${peers}", "--host", "127.0.0.1",
           "--port", "${port}", "--loop", "asyncio", "--http", "h11", "--no-access-log", "--log-level", "warning"]'''

TINY_SERVER = f'''
name = "tiny"
kind = "server"
description = "a raw ASGI app against itself, and a system that cannot start"

[[systems]]
name = "asgi-a"
role = "service"
command = {UVICORN_RAW}
ready = "http://127.0.0.1:${{port}}/ping"
version = {{ dist = "uvicorn" }}

[[systems]]
name = "asgi-b"
role = "floor"
command = {UVICORN_RAW}
ready = "http://127.0.0.1:${{port}}/ping"
version = {{ dist = "uvicorn" }}

[[systems]]
name = "broken"
role = "peer"
command = ["${{python}}", "-c", "import sys; print('boom: cannot bind anything'); sys.exit(3)"]
ready = "http://127.0.0.1:${{port}}/"

[[workloads]]
name = "ping"
path = "/ping"
connections = 4
'''

TINY_CLIENT = f'''
name = "tinyclient"
kind = "client"
description = "two clients against a raw ASGI app"

[server]
name = "asgi"
command = {UVICORN_RAW}
ready = "http://127.0.0.1:${{port}}/ping"

[[clients]]
name = "urllib3"
role = "service"
client = "urllib3"
version = {{ dist = "urllib3" }}

[[clients]]
name = "requests"
client = "requests"
version = {{ dist = "requests" }}

[[clients]]
name = "niquests"
client = "niquests"
environment = "pypi_niquests"

[[clients]]
name = "requestx"
client = "requestx"
environment = "requestx_original"
build = "build_it.sh ${{python}} (~20 min)"

[[workloads]]
name = "ping"
path = "/ping"
'''


@pytest.fixture
def tiny_dir(tmp_path):
    d = tmp_path / "scenarios"
    d.mkdir()
    (d / "tiny.toml").write_text(TINY_SERVER)
    (d / "tinyclient.toml").write_text(TINY_CLIENT)
    return d
