"""The command line: bad arguments give a message and a non-zero exit."""

import subprocess
import sys

from helpers import child_env


def test_cli_rejects_bad_arguments():
    r = subprocess.run([sys.executable, "-m", "rpc_app", "--port", "70000"], capture_output=True, text=True,
                       env=child_env(), timeout=20)
    assert r.returncode != 0 and "--port" in r.stderr
    r = subprocess.run([sys.executable, "-m", "rpc_app", "--port", "0", "--max-depth", "0"], capture_output=True,
                       text=True, env=child_env(), timeout=20)
    assert r.returncode != 0 and "max_depth" in r.stderr


def test_both_event_loops_serve_calls():
    """--loop uvloop (the default) and --loop asyncio: the banner names the loop and a real call is answered."""
    import asyncio

    import orjson
    import websockets
    from helpers import run_server

    for loop in ("uvloop", "asyncio"):
        with run_server("--loop", loop) as (proc, port):
            async def call():
                async with websockets.connect(f"ws://127.0.0.1:{port}/") as ws:
                    await ws.send('{"jsonrpc":"2.0","method":"add","params":[2,3],"id":7}')
                    return orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            assert asyncio.run(call()) == {"jsonrpc": "2.0", "result": 5, "id": 7}
    r = subprocess.run([sys.executable, "-m", "rpc_app", "--loop", "trio"], capture_output=True, text=True,
                       env=child_env(), timeout=20)
    assert r.returncode != 0 and "--loop" in r.stderr


def test_cli_rejects_bad_new_options():
    cases = [
        (["--keyfile", "k.pem"], "--keyfile needs --certfile"),
        (["--certfile", "/nonexistent/cert.pem"], "cannot load --certfile"),
        (["--call-timeout", "-1"], "--call-timeout"),
        (["--max-batch-length", "0"], "max_batch_length"),
        (["--max-connections", "0"], "max_connections"),
    ]
    for args, message in cases:
        r = subprocess.run([sys.executable, "-m", "rpc_app", "--port", "0", *args], capture_output=True, text=True,
                           env=child_env(), timeout=20)
        assert r.returncode == 2 and message in r.stderr, (args, r.returncode, r.stderr[-500:])


def test_no_metrics_serves_calls_without_a_metrics_endpoint():
    import asyncio

    import orjson
    import websockets
    from helpers import http_get, run_server

    for backend in ("picows", "websockets"):
        with run_server("--no-metrics", "--server", backend) as (proc, port):
            async def call():
                async with websockets.connect(f"ws://127.0.0.1:{port}/") as ws:
                    await ws.send('{"jsonrpc":"2.0","method":"add","params":[2,3],"id":1}')
                    return orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            assert asyncio.run(call())["result"] == 5
            status, _ = http_get(port, "/metrics")
            assert status != 200, backend
            assert http_get(port, "/healthz")[0] == 200
