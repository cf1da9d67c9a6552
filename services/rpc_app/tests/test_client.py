"""rpc_app.client against the real servers (picows and websockets, in-process on port 0) and against
a scripted raw WebSocket server that misbehaves on purpose."""

import asyncio
import logging
import time

import orjson
import pytest
import pytest_asyncio
from websockets.asyncio.server import serve

from helpers import run_server
from rpc_app.client import RpcClient, RpcConnectionClosed, connect
from rpc_app.context import RpcContext
from rpc_app.engine import Engine
from rpc_app.errors import RpcError
from rpc_app.methods import build_registry
from rpc_app.server import RpcServer, ServerConfig
from rpc_app.server_picows import PicowsRpcServer

pytestmark = pytest.mark.asyncio

STACKS = ["picows", "websockets"]
TEST_BUDGET = 10  # seconds: no single wait in these tests may take longer


def build_engine() -> Engine:
    reg = build_registry()

    @reg.method()
    async def ticker(count: int, ctx: RpcContext):
        for i in range(count):
            await ctx.notify("tick", {"n": i})
        return count

    return Engine(reg)


async def start_stack(stack: str):
    cfg = ServerConfig(host="127.0.0.1", port=0, ping_interval=None, ping_timeout=None)
    cls = PicowsRpcServer if stack == "picows" else RpcServer
    srv = cls(build_engine(), cfg)
    port = await srv.start()
    return srv, f"ws://127.0.0.1:{port}/"


@pytest_asyncio.fixture(params=STACKS)
async def url(request):
    srv, uri = await start_stack(request.param)
    yield uri
    # bounded: a stop that hangs must fail the test, not the suite
    await asyncio.wait_for(srv.stop(), TEST_BUDGET)


# -- against the real servers -----------------------------------------------------------

async def test_positional_and_named_params(url):
    async with connect(url) as client:
        assert await client.call("add", 1, 2) == 3
        assert await client.call("add", a=1.5, b=2) == 3.5
        assert await client.call("echo", value={"a": [1, "x"]}) == {"a": [1, "x"]}
        assert await client.call("echo") is None  # no params member at all
        assert await client.call_with("add", (2, 3)) == 5
        assert await client.call_with("add", {"a": 2, "b": 5}) == 7
        with pytest.raises(TypeError):
            await client.call("add", 1, b=2)
        with pytest.raises(TypeError):
            await client.call_with("add", "12")
        await client.notify("add", 1, 2)  # no answer: the next response is the next call's
        assert await client.call("add_async", 20, 22) == 42


async def test_error_responses_raise_rpc_error(url):
    async with connect(url) as client:
        with pytest.raises(RpcError) as e:
            await client.call("nope", 1)
        assert (e.value.code, e.value.message, e.value.data) == (-32601, "Method not found", {"method": "nope"})
        with pytest.raises(RpcError) as e:
            await client.call("add", 1)
        assert (e.value.code, e.value.message) == (-32602, "Invalid params")
        assert "add()" in e.value.data
        with pytest.raises(RpcError) as e:
            await client.call("fail_rpc", code=-32050, message="out of stock")
        assert (e.value.code, e.value.message, e.value.data) == (-32050, "out of stock", {"why": "asked to"})
        with pytest.raises(RpcError) as e:
            await client.call("fail")
        assert (e.value.code, e.value.data) == (-32603, None)
        assert await client.call("add", 1, 1) == 2  # errors leave the connection usable


async def test_fifty_concurrent_calls_answered_out_of_order(url):
    n = 50
    delays = [round(0.3 - i * 0.005, 3) for i in range(n)]  # the last one sent is the quickest
    finished = []

    async def one(client, i):
        result = await client.call("sleep", delays[i])
        finished.append(i)
        return result

    async with connect(url) as client:
        t0 = time.monotonic()
        results = await asyncio.wait_for(asyncio.gather(*(one(client, i) for i in range(n))), TEST_BUDGET)
        elapsed = time.monotonic() - t0
    # each call got its own answer: the delay it asked for, and a request id of its own
    assert [r["slept"] for r in results] == delays
    assert len({r["id"] for r in results}) == n
    assert finished != sorted(finished) and finished.index(n - 1) < finished.index(0)
    assert elapsed < 2.0, elapsed  # in flight together, not one after another (~9 s)


async def test_batch_mixed_results_and_notifications(url):
    async with connect(url) as client:
        results = await client.batch(
            [("add", [1, 2]), ("nope", None), ("echo", {"value": 3}), ("add", [1]), ("sleep", [0.05])],
            notifications=[("echo", [1]), ("add", [1])])  # a failing notification is not answered either
        assert results[0] == 3 and results[2] == 3
        assert isinstance(results[1], RpcError) and results[1].code == -32601
        assert isinstance(results[3], RpcError) and results[3].code == -32602
        assert results[4]["slept"] == 0.05
        assert len(results) == 5
        assert await client.batch([], notifications=[("echo", [1])]) == []
        with pytest.raises(ValueError):
            await client.batch([])
        assert await client.call("add", 2, 2) == 4


async def test_call_timeout_drops_the_pending_call(url, caplog):
    async with connect(url, call_timeout=0.2) as client:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            await client.call("sleep", 5)
        assert 0.15 < time.monotonic() - t0 < 1.5
        assert not client._pending
        with pytest.raises(asyncio.TimeoutError):
            await client.call_with("sleep", [0.3], timeout=0.05)
        with pytest.raises(TimeoutError):
            await client.batch([("add", [1, 1]), ("sleep", [0.5])], timeout=0.05)
        assert not client._pending
        assert await client.call_with("sleep", [0.3], timeout=None) == {"slept": 0.3, "id": 5}
        await asyncio.sleep(0.4)  # the late answers arrive and are dropped quietly
        assert await client.call("add", 1, 2) == 3
    assert not [r for r in caplog.records if r.name == "rpc_app.client" and r.levelno >= logging.WARNING]


async def test_close_fails_pending_and_later_calls(url):
    client = await connect(url)
    slow = asyncio.ensure_future(client.call("sleep", 5))
    await asyncio.sleep(0.1)
    await client.close()
    with pytest.raises(RpcConnectionClosed) as e:
        await asyncio.wait_for(slow, 1)
    assert e.value.code == 1000 and isinstance(e.value, ConnectionError)
    with pytest.raises(ConnectionError):
        await client.call("add", 1, 2)
    with pytest.raises(ConnectionError):
        await client.notify("add", 1, 2)
    await client.close()  # idempotent
    assert client.closed and client.close_code == 1000


@pytest.mark.parametrize("stack", STACKS)
async def test_server_process_killed_fails_pending_calls_at_once(stack):
    # a real server process that dies: no close frame, no drain, just a dropped TCP connection
    with run_server("--server", stack, "--ping-interval", "0") as (proc, port):
        async with connect(f"ws://127.0.0.1:{port}/", call_timeout=30) as client:
            assert await client.call("add", 1, 2) == 3
            calls = [asyncio.ensure_future(client.call("sleep", 20)) for _ in range(5)]
            await asyncio.sleep(0.2)
            t0 = time.monotonic()
            proc.kill()
            done = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), TEST_BUDGET)
            assert time.monotonic() - t0 < 2.0
            assert all(isinstance(d, RpcConnectionClosed) and d.code == 1006 for d in done), done
            t0 = time.monotonic()
            with pytest.raises(ConnectionError):
                await client.call("add", 1, 2)
            assert time.monotonic() - t0 < 0.1


@pytest.mark.parametrize("stack", STACKS)
async def test_server_stop_fails_calls_left_after_grace(stack):
    srv, uri = await start_stack(stack)
    async with connect(uri, call_timeout=30) as client:
        short = asyncio.ensure_future(client.call("sleep", 0.1))
        long = [asyncio.ensure_future(client.call("sleep", 20)) for _ in range(3)]
        await asyncio.sleep(0.05)
        t0 = time.monotonic()
        stopping = asyncio.ensure_future(srv.stop(grace=0.5))
        assert (await asyncio.wait_for(short, 2))["slept"] == 0.1  # finished within the grace period
        done = await asyncio.wait_for(asyncio.gather(*long, return_exceptions=True), TEST_BUDGET)
        assert all(isinstance(d, RpcConnectionClosed) and d.code == 1001 for d in done), done  # going away
        assert time.monotonic() - t0 < 2.0
        await asyncio.wait_for(stopping, TEST_BUDGET)
        assert client.closed and client.close_code == 1001


@pytest.mark.skipif(not hasattr(RpcContext, "notify"), reason="server push (RpcContext.notify) not merged yet")
async def test_server_push_goes_to_handlers(url):
    ticks = []
    async with connect(url) as client:
        client.on("tick", ticks.append)
        assert await client.call("ticker", 3) == 3
        assert ticks == [{"n": 0}, {"n": 1}, {"n": 2}]  # pushed before the response, read in order


# -- against a scripted raw server ------------------------------------------------------

GARBAGE = [
    "this is not JSON",
    b"\xff\xfe binary, not UTF-8",
    '{"jsonrpc":"2.0","result":1,"id":999999}',  # unknown id
    '{"jsonrpc":"2.0","result":1,"id":"abc"}',
    '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}',
    '{"jsonrpc":"2.0","method":"ask","params":[],"id":7}',  # a request: the client is no server
    '{"jsonrpc":"2.0","id":1}',  # neither result nor error
    '[1, "x", null]',
    "[]",
    '"just a string"',
    "42",
]


async def raw_handler(ws):
    """Answers {"method": m, "params": p, "id": i} according to m; see the tests below."""
    async for raw in ws:
        msg = orjson.loads(raw)
        method, params, rid = msg.get("method"), msg.get("params"), msg.get("id")
        if method == "garbage":
            for g in GARBAGE:
                await ws.send(g)
        elif method == "push":
            for note in params:
                await ws.send(orjson.dumps({"jsonrpc": "2.0", **note}).decode())
        elif method == "drop":
            await asyncio.sleep(params[0])
            ws.transport.abort()  # vanish without a close frame
            return
        elif method == "close":
            await ws.close(4000, "bye")
            return
        elif method == "bad_error":
            await ws.send(orjson.dumps({"jsonrpc": "2.0", "error": "oops", "id": rid}).decode())
            continue
        elif method == "headers":
            await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": {
                "origin": ws.request.headers.get("Origin"), "x": ws.request.headers.get("X-Test"),
                "deflate": bool(ws.protocol.extensions)}}).decode())
            continue
        elif method == "slow":
            continue  # never answered
        await ws.send(orjson.dumps({"jsonrpc": "2.0", "result": [method, params], "id": rid}).decode())


@pytest_asyncio.fixture
async def raw_url():
    async with serve(raw_handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}/"


async def test_garbage_from_server_is_logged_and_ignored(raw_url, caplog):
    caplog.set_level(logging.WARNING, logger="rpc_app.client")
    async with connect(raw_url, call_timeout=5) as client:
        assert await client.call("garbage") == ["garbage", None]
        assert await client.call("echo", 1) == ["echo", [1]]
        with pytest.raises(RpcError) as e:
            await client.call("bad_error")
        assert e.value.code == -32603 and e.value.data == "oops"
        assert not client.closed
    warned = [r.getMessage() for r in caplog.records if r.name == "rpc_app.client"]
    assert len(warned) >= len(GARBAGE), warned
    assert any("not JSON" in w for w in warned) and any("unknown id" in w for w in warned)


async def test_push_notifications_routed_to_handlers(raw_url, caplog):
    ticks, others, seen_async = [], [], asyncio.Event()

    def broken(params):
        raise RuntimeError("handler bug")

    async def async_handler(params):
        await asyncio.sleep(0)
        assert await client.call_with("echo", params) == ["echo", params]  # a handler may call the server
        seen_async.set()

    async def async_broken(params):
        raise RuntimeError("async handler bug")

    client = await connect(raw_url, on_notification=lambda m, p: others.append((m, p)), call_timeout=5)
    async with client:
        client.on("tick", ticks.append)
        client.on("broken", broken)
        client.on("later", async_handler)
        client.on("abroken", async_broken)
        notes = [{"method": "tick", "params": {"n": 0}}, {"method": "broken", "params": []},
                 {"method": "abroken"}, {"method": "tick", "params": {"n": 1}},
                 {"method": "unrouted", "params": [1]}, {"method": "later", "params": [2]}]
        assert await client.call_with("push", notes) == ["push", notes]
        await asyncio.wait_for(seen_async.wait(), TEST_BUDGET)
        client.on("tick", None)  # unrouted again: falls back to on_notification
        await client.call_with("push", [{"method": "tick", "params": {"n": 2}}])
    assert ticks == [{"n": 0}, {"n": 1}]
    assert others == [("unrouted", [1]), ("tick", {"n": 2})]
    errors = [r for r in caplog.records if r.name == "rpc_app.client" and r.levelno >= logging.ERROR]
    assert {"'broken'", "'abroken'"} <= {r.getMessage().split()[-2] for r in errors}


async def test_abrupt_drop_fails_pending_calls_at_once(raw_url):
    async with connect(raw_url, call_timeout=30) as client:
        pending = [asyncio.ensure_future(client.call("slow")) for _ in range(5)]
        t0 = time.monotonic()
        with pytest.raises(RpcConnectionClosed) as e:
            await asyncio.wait_for(client.call("drop", 0.1), TEST_BUDGET)
        assert e.value.code == 1006
        done = await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 1)
        assert all(isinstance(d, RpcConnectionClosed) and d.code == 1006 for d in done)
        assert time.monotonic() - t0 < 2.0
        with pytest.raises(RpcConnectionClosed):
            await client.batch([("echo", [1])])


async def test_close_code_and_reason_from_server(raw_url):
    async with connect(raw_url) as client:
        pending = asyncio.ensure_future(client.call("slow"))
        with pytest.raises(RpcConnectionClosed) as e:
            await asyncio.wait_for(client.call("close"), TEST_BUDGET)
        assert (e.value.code, e.value.reason) == (4000, "bye") and "4000" in str(e.value)
        with pytest.raises(RpcConnectionClosed):
            await pending
        assert client.close_code == 4000


async def test_connect_options_are_passed_to_websockets(raw_url):
    async with connect(raw_url, origin="https://example.test", additional_headers={"X-Test": "1"},
                       compression=None, open_timeout=5) as client:
        assert await client.call("headers") == {"origin": "https://example.test", "x": "1", "deflate": False}
    async with connect(raw_url) as client:
        assert (await client.call("headers"))["deflate"] is True
    async with connect(raw_url, max_size=1000) as client:  # a bigger answer closes with 1009
        with pytest.raises(RpcConnectionClosed) as e:
            await asyncio.wait_for(client.call("echo", "x" * 2000), TEST_BUDGET)
        assert e.value.code == 1009


async def test_wraps_an_open_connection(raw_url):
    from websockets.asyncio.client import connect as ws_connect
    async with RpcClient(await ws_connect(raw_url)) as client:
        assert await client.call("echo", x=1) == ["echo", {"x": 1}]
