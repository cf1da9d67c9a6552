"""The Django Channels adapter: WebsocketCommunicator, then daphne over a real socket."""

import asyncio
import os
import subprocess
import sys
import time

import orjson
import pytest
import websockets
from channels.testing import WebsocketCommunicator

import channels_app
from channels_app import ChildConsumer, DemoConsumer
from helpers import child_env, free_port, req

pytestmark = pytest.mark.asyncio


class WithUser:
    """ASGI middleware putting a user in the scope, like AuthMiddlewareStack would."""

    def __init__(self, app, user):
        self.app, self.user = app, user

    async def __call__(self, scope, receive, send):
        return await self.app(dict(scope, user=self.user), receive, send)


async def connect(app=None, path="/ws/rpc/"):
    c = WebsocketCommunicator(app or DemoConsumer.as_asgi(), path)
    ok, _ = await c.connect()
    assert ok
    return c


async def rpc(c, method, params=None, rid=1):
    await c.send_to(text_data=req(method, params, rid))
    return orjson.loads(await c.receive_from(5))


async def test_calls_batch_notification_and_errors():
    c = await connect()
    try:
        assert await rpc(c, "add", [1, 2]) == {"jsonrpc": "2.0", "result": 3, "id": 1}
        assert (await rpc(c, "echo", {"value": [1, {"a": None}]}, "x"))["result"] == [1, {"a": None}]
        await c.send_to(text_data='{"jsonrpc":"2.0","method":"add","params":[1,2]}')  # notification
        assert await c.receive_nothing(0.1)
        await c.send_to(text_data='[{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1},'
                                  '{"jsonrpc":"2.0","method":"sleep","params":[0.01],"id":2}, 5]')
        r = orjson.loads(await c.receive_from(5))
        assert r[0]["result"] == 3 and r[1]["result"] == 2 and r[2]["error"]["code"] == -32600
        for raw, code in [("{bad json", -32700), ("[]", -32600), ('{"jsonrpc":"2.0","method":"nope","id":1}', -32601),
                          ('{"jsonrpc":"2.0","method":"add","params":["a",1],"id":1}', -32602),
                          ('{"jsonrpc":"2.0","method":"fail","id":1}', -32603),
                          ("[" * 100_000 + "]" * 100_000, -32001),
                          ('{"jsonrpc":"2.0","method":"echo","params":["' + "x" * 100_001 + '"],"id":1}', -32001)]:
            await c.send_to(text_data=raw)
            r = orjson.loads(await c.receive_from(5))
            assert r["error"]["code"] == code, (raw[:40], r)
            assert "hidden" not in str(r)
        await c.send_to(bytes_data=b'{"jsonrpc":"2.0","method":"echo","params":["\xff"],"id":1}')
        assert orjson.loads(await c.receive_from(5))["error"]["code"] == -32700
        assert (await rpc(c, "fail_rpc"))["error"] == {"code": -32042, "message": "nope"}
        assert (await rpc(c, "blocking", [7]))["result"] == 7
        assert (await rpc(c, "add", [2, 2]))["result"] == 4  # still healthy
    finally:
        await c.disconnect()


async def test_context_scope_user_and_consumer():
    c = await connect(WithUser(DemoConsumer.as_asgi(), "alice"))
    try:
        r = await rpc(c, "whoami")
        assert r["result"] == {"user": "alice", "path": "/ws/rpc/", "same_consumer": True}
    finally:
        await c.disconnect()


async def test_subclass_overrides_and_inherits():
    c = await connect(ChildConsumer.as_asgi(), "/ws/child/")
    try:
        assert (await rpc(c, "add", [1, 2]))["result"] == 1003
        assert (await rpc(c, "echo", ["x"]))["result"] == "x"
    finally:
        await c.disconnect()


async def test_many_in_flight_out_of_order():
    c = await connect()
    try:
        await c.send_to(text_data=req("sleep", [0.3], "slow"))
        await c.send_to(text_data=req("sleep", [0.05], "mid"))
        await c.send_to(text_data=req("add", [1, 1], "fast"))
        ids = [orjson.loads(await c.receive_from(5))["id"] for _ in range(3)]
        assert ids == ["fast", "mid", "slow"]
        # more than the bound (16): all answered, none dropped
        for i in range(40):
            await c.send_to(text_data=req("sleep", [0.05], i))
        got = sorted([orjson.loads(await c.receive_from(5))["result"] for _ in range(40)])
        assert got == list(range(40))
    finally:
        await c.disconnect()


async def test_disconnect_cancels_in_flight_calls():
    channels_app.cancelled.clear()
    c = await connect()
    for i in range(3):
        await c.send_to(text_data=req("sleep", [30], f"c{i}"))
    await asyncio.sleep(0.1)
    await c.disconnect()
    for _ in range(50):
        if len(channels_app.cancelled) == 3:
            break
        await asyncio.sleep(0.02)
    assert sorted(channels_app.cancelled) == ["c0", "c1", "c2"]


async def test_engine_built_once_per_class():
    a = DemoConsumer._rpc_engine
    c = await connect()
    await rpc(c, "add", [1, 2])
    await c.disconnect()
    assert DemoConsumer._rpc_engine is a
    assert set(a.registry.names()) >= {"add", "echo", "sleep", "whoami", "fail", "blocking"}
    assert ChildConsumer._rpc_engine is not a


@pytest.fixture(scope="module")
def daphne_server():
    port = free_port()
    env = child_env()
    env["PYTHONPATH"] = os.path.dirname(os.path.abspath(__file__)) + os.pathsep + env["PYTHONPATH"]
    proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                             "channels_app:application"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        import socket
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("daphne exited: " + proc.stderr.read().decode())
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


async def test_daphne_real_socket(daphne_server):
    port = daphne_server
    async with websockets.connect(f"ws://127.0.0.1:{port}/ws/rpc/") as ws, \
            websockets.connect(f"ws://127.0.0.1:{port}/ws/rpc/") as other:
        await ws.send(req("sleep", [0.3], "slow"))
        await ws.send(req("add", [1, 2], "fast"))
        first = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
        assert first == {"jsonrpc": "2.0", "result": 3, "id": "fast"}
        await ws.send("{not json")
        assert orjson.loads(await asyncio.wait_for(ws.recv(), 10))["error"]["code"] == -32700
        await other.send(req("add", [5, 5], 1))  # another client is unaffected
        assert orjson.loads(await asyncio.wait_for(other.recv(), 10))["result"] == 10
        assert orjson.loads(await asyncio.wait_for(ws.recv(), 10))["id"] == "slow"
        # a client vanishing mid-call does not hurt the server
        gone = await websockets.connect(f"ws://127.0.0.1:{port}/ws/rpc/")
        await gone.send(req("sleep", [30], "gone"))
        gone.transport.abort()
        await asyncio.sleep(0.2)
        assert (orjson.loads(await (await _roundtrip(ws, req("add", [2, 2], 3)))))["result"] == 4


async def _roundtrip(ws, text):
    await ws.send(text)
    return asyncio.wait_for(ws.recv(), 10)


async def test_db_hop_forced_still_serves():
    """With Channels' per-message close_old_connections hop kept (as when a database is configured)."""
    from rpc_app.django_channels import AsyncJsonRpcConsumer, rpc_method

    class WithHop(AsyncJsonRpcConsumer):
        rpc_close_old_db_connections = True

        @rpc_method()
        def add(self, a: int, b: int):
            return a + b

    assert WithHop._rpc_db_hop() is True and DemoConsumer._rpc_db_hop() is False
    c = await connect(WithHop.as_asgi())
    try:
        assert (await rpc(c, "add", [2, 3]))["result"] == 5
    finally:
        await c.disconnect()


@pytest.mark.parametrize("interval, expected", [(3600.0, 1), (0.0, 20)])
async def test_db_hop_runs_at_most_once_per_interval(monkeypatch, interval, expected):
    """The kept close_old_connections hop is throttled per connection, not paid per message."""
    from rpc_app import django_channels
    from rpc_app.django_channels import AsyncJsonRpcConsumer, rpc_method

    real = django_channels.aclose_old_connections
    hops = []

    async def counting():  # a spy around Channels' real hop, which still runs
        hops.append(1)
        await real()

    monkeypatch.setattr(django_channels, "aclose_old_connections", counting)

    class Throttled(AsyncJsonRpcConsumer):
        rpc_close_old_db_connections = True
        rpc_db_check_interval = interval

        @rpc_method()
        def add(self, a: int, b: int):
            return a + b

    c = await connect(Throttled.as_asgi())
    try:
        for i in range(20):
            assert (await rpc(c, "add", [i, 1], i))["result"] == i + 1
    finally:
        await c.disconnect()
    assert len(hops) == expected
