"""Start ``python -m rpc_app`` on an ephemeral port and stop it, always."""

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import orjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@contextlib.contextmanager
def run_server(*args, module="rpc_app", timeout=15.0):
    proc = subprocess.Popen([sys.executable, "-m", module, "--host", "127.0.0.1", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), text=True)
    try:
        deadline = time.monotonic() + timeout
        port = None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            proc.kill()
            raise RuntimeError("server did not start: " + proc.stderr.read())
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for f in (proc.stdout, proc.stderr):
            if f:
                f.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(text: str, name: str, **labels) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    return None


def wait_until(pred, timeout=5.0, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def req(method, params=None, rid=1) -> str:
    """A JSON-RPC request's text (params left out when None)."""
    d = {"jsonrpc": "2.0", "method": method, "id": rid}
    if params is not None:
        d["params"] = params
    return orjson.dumps(d).decode()
