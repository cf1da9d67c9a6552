"""The newer server features against real servers on real sockets, on both WebSocket stacks."""

import asyncio
import base64
import decimal
import json
import os
import re
import signal
import ssl
import struct
import subprocess
import sys
import time

import orjson
import pytest
import trustme
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from helpers import child_env, http_get, metric, req, run_server
from rpc_app.engine import Engine
from rpc_app.registry import Registry, collect_marked, rpc_method

pytestmark = pytest.mark.asyncio

STACKS = ["picows", "websockets"]
T = 10  # seconds: the bound on any single wait


def url(port, scheme="ws"):
    return f"{scheme}://127.0.0.1:{port}/"


async def recv(ws, timeout=T):
    return orjson.loads(await asyncio.wait_for(ws.recv(), timeout))


async def call(ws, method, params=None, rid=1):
    await ws.send(req(method, params, rid))
    return await recv(ws)


async def closed_code(ws, timeout=T):
    """Read until the connection closes (failing on any data message); the close code received."""
    with pytest.raises(ConnectionClosed):
        msg = await asyncio.wait_for(ws.recv(), timeout)
        pytest.fail(f"unexpected message before the close: {msg[:200]!r}")
    return ws.close_code


async def in_flight(port):
    return metric((await asyncio.to_thread(http_get, port, "/metrics"))[1], "rpc_in_flight")


async def eventually(get, expected, timeout=3.0):
    """Poll the coroutine function ``get`` until it returns ``expected``; its last value."""
    deadline = time.monotonic() + timeout
    while (value := await get()) != expected and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return value


# -- servers shared per stack ------------------------------------------------------------

@pytest.fixture(scope="module", params=STACKS)
def main_server(request):
    """Limits, push, discovery, ids, origin: one server per stack."""
    with run_server("--server", request.param, "--max-in-flight", "4", "--max-response-bytes", "50000",
                    "--allowed-origin", "http://good.example") as (_, port):
        yield request.param, port


@pytest.fixture(scope="module", params=STACKS)
def deadline_server(request):
    """Call deadline, batch length."""
    with run_server("--server", request.param, "--call-timeout", "0.3", "--max-batch-length", "10") as (_, port):
        yield request.param, port


# -- 1. batches hold in-flight slots ------------------------------------------------------

async def test_batch_members_count_against_in_flight_bound(main_server):
    _, port = main_server
    async with connect(url(port)) as ws, connect(url(port)) as other:
        t0 = time.monotonic()
        await ws.send(json.dumps([{"jsonrpc": "2.0", "method": "sleep", "params": [0.2], "id": i}
                                  for i in range(12)]))
        # the other connection has its own bound: 4 calls of 0.2 s answered in one round, meanwhile
        for i in range(4):
            await other.send(req("sleep", [0.2], i))
        got = sorted([(await recv(other))["id"] for _ in range(4)])
        other_elapsed = time.monotonic() - t0
        answer = await recv(ws)
        elapsed = time.monotonic() - t0
    assert got == [0, 1, 2, 3]
    assert other_elapsed < 0.5, other_elapsed
    assert sorted(r["id"] for r in answer) == list(range(12))
    assert all(r["result"] == {"slept": 0.2, "id": r["id"]} for r in answer)
    assert 0.55 <= elapsed < 3, elapsed  # 12 calls, 4 at a time: 3 rounds


# -- 2. batch length ----------------------------------------------------------------------

async def test_max_batch_length(deadline_server):
    _, port = deadline_server
    batch = [{"jsonrpc": "2.0", "method": "add", "params": [i, 1], "id": i} for i in range(11)]
    async with connect(url(port)) as ws:
        await ws.send(json.dumps(batch))
        r = await recv(ws)
        assert isinstance(r, dict) and r["id"] is None, r
        assert r["error"]["code"] == -32001 and r["error"]["data"]["limit"] == "batch_length"
        await ws.send(json.dumps(batch[:10]))
        r = await recv(ws)
        assert sorted((x["id"], x["result"]) for x in r) == [(i, i + 1) for i in range(10)]


# -- 3. response size ---------------------------------------------------------------------

async def test_max_response_bytes(main_server):
    _, port = main_server
    async with connect(url(port)) as ws:
        r = await call(ws, "big", [100], "b")
        assert r["id"] == "b" and r["error"]["code"] == -32001, str(r)[:300]
        assert r["error"]["data"]["limit"] == "response_bytes"
        # a batch: 30 KB fits once, the second 30 KB would push the answer over 50,000 bytes
        await ws.send(json.dumps([{"jsonrpc": "2.0", "method": "add", "params": [1, 2], "id": 1},
                                  {"jsonrpc": "2.0", "method": "big", "params": [30], "id": 2},
                                  {"jsonrpc": "2.0", "method": "big", "params": [30], "id": 3},
                                  {"jsonrpc": "2.0", "method": "echo", "params": ["x"], "id": 4}]))
        raw = await asyncio.wait_for(ws.recv(), T)
        assert len(raw) <= 50000
        by_id = {x["id"]: x for x in orjson.loads(raw)}
        assert by_id[1]["result"] == 3 and by_id[4]["result"] == "x"
        assert len(by_id[2]["result"]) == 30 * 1024
        assert by_id[3]["error"]["code"] == -32001 and by_id[3]["error"]["data"]["limit"] == "response_bytes"
        assert (await call(ws, "add", [20, 22], 5))["result"] == 42  # still usable


# -- 4. deadlines -------------------------------------------------------------------------

async def test_call_timeout(deadline_server):
    _, port = deadline_server
    async with connect(url(port)) as ws:
        for method, seconds in (("sleep", 2), ("blocking_sleep", 1)):
            t0 = time.monotonic()
            r = await call(ws, method, [seconds], method)
            elapsed = time.monotonic() - t0
            assert r["id"] == method and r["error"] == {"code": -32003, "message": "Call timed out",
                                                       "data": {"timeout": 0.3}}, r
            assert 0.25 <= elapsed < 1.5, (method, elapsed)
        assert (await call(ws, "sleep", [0.05], 3))["result"] == {"slept": 0.05, "id": 3}
        assert (await call(ws, "add", [1, 2], 4))["result"] == 3


# -- 5. close cancels at the bound --------------------------------------------------------

@pytest.mark.parametrize("how", ["close", "abort"])
@pytest.mark.parametrize("stack", ["picows", "websockets"])
async def test_close_at_bound_cancels_calls(stack, how):
    with run_server("--server", stack, "--max-in-flight", "2", "--shutdown-grace", "0.5") as (_, port):
        ws = await connect(url(port), close_timeout=1)
        for i in range(6):
            await ws.send(req("sleep", [30], i))
        assert await eventually(lambda: in_flight(port), 2) == 2
        t0 = time.monotonic()
        if how == "close":
            await ws.close()  # a close frame the server must read
        else:
            ws.transport.abort()  # the socket goes, without a close frame
        assert await eventually(lambda: in_flight(port), 0) == 0
        assert time.monotonic() - t0 < 3.5
        async with connect(url(port)) as ws2:
            assert (await call(ws2, "add", [1, 2]))["result"] == 3


# -- 6. push ------------------------------------------------------------------------------

async def test_countdown_notifications_before_answer(main_server):
    _, port = main_server
    async with connect(url(port)) as ws:
        await ws.send(req("countdown", [5], "c"))
        got = [await recv(ws) for _ in range(6)]
    assert got == [{"jsonrpc": "2.0", "method": "tick", "params": {"n": k}} for k in range(5, 0, -1)] \
        + [{"jsonrpc": "2.0", "result": 5, "id": "c"}]


async def test_groups(main_server):
    _, port = main_server
    hi = {"jsonrpc": "2.0", "method": "message", "params": {"group": "room", "message": "hi"}}
    async with connect(url(port)) as a, connect(url(port)) as c:
        b = await connect(url(port))
        assert (await call(a, "subscribe", ["room"]))["result"] is True
        assert (await call(b, "subscribe", ["room"]))["result"] is True
        assert (await call(c, "publish", ["room", "hi"]))["result"] == 2
        assert await recv(a) == hi and await recv(b) == hi
        assert (await call(a, "unsubscribe", ["room"]))["result"] is True
        assert (await call(c, "publish", ["room", "hi"]))["result"] == 1
        assert await recv(b) == hi
        # nothing was pushed to a: its next message is the answer to its next call
        assert await call(a, "add", [1, 1], "a") == {"jsonrpc": "2.0", "result": 2, "id": "a"}
        await b.close()

        async def published():
            return (await call(c, "publish", ["room", "hi"]))["result"]
        assert await eventually(published, 0) == 0  # the closed subscriber was forgotten


# -- 7. discovery -------------------------------------------------------------------------

async def test_rpc_discover(main_server):
    _, port = main_server
    async with connect(url(port)) as ws:
        doc = (await call(ws, "rpc.discover"))["result"]
    assert doc["openrpc"] == "1.3.2"
    methods = {m["name"]: m for m in doc["methods"]}
    params = {name: [p["name"] for p in methods[name]["params"]] for name in ("add", "sleep", "countdown")}
    assert params == {"add": ["a", "b"], "sleep": ["seconds"], "countdown": ["n"]}


# -- 8. ids come back byte for byte --------------------------------------------------------

RAW_IDS = [str(2 ** 70), str(-(2 ** 70)), "18446744073709551615", "1.5", '"x"', "null", "0"]


def raw_id(text: str) -> str:
    assert text.endswith("}"), text
    return text.rsplit('"id":', 1)[1][:-1]


@pytest.mark.parametrize("rid", RAW_IDS)
async def test_exact_ids(main_server, rid):
    _, port = main_server
    async with connect(url(port)) as ws:
        await ws.send('{"jsonrpc":"2.0","method":"echo","params":[7],"id":%s}' % rid)  # sync path
        text = await asyncio.wait_for(ws.recv(), T)
        assert raw_id(text) == rid and json.loads(text)["result"] == 7, text
        await ws.send('{"jsonrpc":"2.0","method":"sleep","params":[0],"id":%s}' % rid)  # async path
        text = await asyncio.wait_for(ws.recv(), T)
        assert raw_id(text) == rid and json.loads(text)["result"] == {"slept": 0, "id": json.loads(rid)}, text
        await ws.send("[%s]" % ",".join('{"jsonrpc":"2.0","method":"%s","params":[1,1],"id":%s}' % (m, rid)
                                        for m in ("add", "add_async")))
        answer = json.loads(await asyncio.wait_for(ws.recv(), T))  # stdlib json: big ints stay exact
        assert [(r["id"], r["result"]) for r in answer] == [(json.loads(rid), 2)] * 2


@pytest.mark.parametrize("rid", ["7", "1.5", str(2 ** 70)])
async def test_duplicate_id_in_flight_any_size(main_server, rid):
    _, port = main_server
    async with connect(url(port)) as ws:
        for _ in range(2):
            await ws.send('{"jsonrpc":"2.0","method":"sleep","params":[0.2],"id":%s}' % rid)
        first, second = await recv(ws), await recv(ws)
    assert first["error"]["code"] == -32600 and "result" in second, (first, second)


# -- 9. params null ------------------------------------------------------------------------

async def test_params_null_is_invalid_request(main_server):
    _, port = main_server
    async with connect(url(port)) as ws:
        await ws.send('{"jsonrpc":"2.0","method":"add","params":null,"id":9}')
        r = await recv(ws)
    assert r["id"] == 9 and r["error"]["code"] == -32600 and r["error"]["message"] == "Invalid Request", r


# -- 10. graceful shutdown -----------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
async def test_graceful_shutdown(stack):
    with run_server("--server", stack, "--shutdown-grace", "3") as (proc, port):
        async with connect(url(port)) as ws:
            await ws.send(req("sleep", [1.0], 1))
            await asyncio.sleep(0.1)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.2)
            await ws.send(req("add", [1, 2], 2))
            first, second = await recv(ws), await recv(ws)
            assert first == {"jsonrpc": "2.0", "error": {"code": -32004, "message": "Server shutting down"}, "id": 2}
            assert second == {"jsonrpc": "2.0", "result": {"slept": 1.0, "id": 1}, "id": 1}
            assert await closed_code(ws) == 1001
        assert await asyncio.to_thread(proc.wait, 5) == 0
        assert time.monotonic() - t0 < 3.0


@pytest.mark.parametrize("stack", STACKS)
async def test_shutdown_grace_cuts_long_calls(stack):
    with run_server("--server", stack, "--shutdown-grace", "1") as (proc, port):
        async with connect(url(port)) as ws:
            await ws.send(req("sleep", [10], 1))
            await asyncio.sleep(0.1)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert await closed_code(ws) == 1001
            elapsed = time.monotonic() - t0
        assert 0.8 <= elapsed < 4, elapsed  # after the grace, long before the call would end
        assert await asyncio.to_thread(proc.wait, 5) == 0


# -- 11. origin ----------------------------------------------------------------------------

async def test_allowed_origin(main_server):
    _, port = main_server
    with pytest.raises(InvalidStatus) as info:
        async with connect(url(port), origin="http://evil.example", open_timeout=T):
            pass
    assert info.value.response.status_code == 403
    for origin in ("http://good.example", None):
        async with connect(url(port), origin=origin) as ws:
            assert (await call(ws, "add", [1, 2]))["result"] == 3


@pytest.mark.parametrize("stack", STACKS)
async def test_default_origin_rule_is_same_host(stack):
    """Without --allowed-origin: a page of another site is refused, a page of this host and a client that
    sends no Origin are accepted; '*' accepts any."""
    with run_server("--server", stack) as (_, port):
        with pytest.raises(InvalidStatus) as info:
            async with connect(url(port), origin="http://evil.example", open_timeout=T):
                pass
        assert info.value.response.status_code == 403
        for origin in (f"http://127.0.0.1:{port}", None):
            async with connect(url(port), origin=origin) as ws:
                assert (await call(ws, "add", [1, 2]))["result"] == 3
    with run_server("--server", stack, "--allowed-origin", "*") as (_, port):
        async with connect(url(port), origin="http://anywhere.example") as ws:
            assert (await call(ws, "add", [2, 2]))["result"] == 4


# -- 12. connections per address -----------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
async def test_max_connections_per_ip(stack):
    with run_server("--server", stack, "--max-connections-per-ip", "2") as (_, port):
        first, second = await connect(url(port)), await connect(url(port))
        if stack == "websockets":  # refused at the handshake
            with pytest.raises(InvalidStatus) as info:
                await connect(url(port), open_timeout=T)
            assert info.value.response.status_code == 503
        else:  # picows: accepted, then closed "try again later"
            third = await connect(url(port), open_timeout=T)
            assert await closed_code(third) == 1013
        await first.close()

        async def add():
            try:
                async with connect(url(port)) as ws:
                    return (await call(ws, "add", [1, 2]))["result"]
            except (InvalidStatus, ConnectionClosed) as exc:
                return exc
        assert await eventually(add, 3) == 3  # a free place again
        assert (await call(second, "add", [2, 2]))["result"] == 4
        await second.close()


# -- 13. TLS -------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
async def test_tls(stack, tmp_path):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    pem = tmp_path / "server.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(pem))
    proc = subprocess.Popen([sys.executable, "-m", "rpc_app", "--server", stack, "--host", "127.0.0.1",
                             "--port", "0", "--certfile", str(pem)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=child_env(), text=True)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), T)
        m = re.search(r"(\w+)://127\.0\.0\.1:(\d+)/", line)
        assert m and m.group(1) == "wss", line
        ctx = ssl.create_default_context()
        ca.configure_trust(ctx)
        async with connect(url(int(m.group(2)), "wss"), ssl=ctx) as ws:
            assert (await call(ws, "add", [1, 2]))["result"] == 3
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


# -- 14. assembly deadline (picows) --------------------------------------------------------

async def test_unfinished_fragmented_message_closed_1008():
    """The first fragment of a message (FIN=0), then nothing: the picows server gives up after 0.5 s."""
    with run_server("--server", "picows", "--assembly-timeout", "0.5") as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            key = base64.b64encode(os.urandom(16)).decode()
            writer.write((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                          "Sec-WebSocket-Version: 13\r\n\r\n").encode())
            assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), T)).startswith(b"HTTP/1.1 101")
            payload, mask = b'{"jsonrpc":"2.0",', os.urandom(4)
            masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            writer.write(bytes([0x01, 0x80 | len(payload)]) + mask + masked)  # text, FIN=0
            await writer.drain()
            t0 = time.monotonic()
            head = await asyncio.wait_for(reader.readexactly(4), 3)
            assert head[0] == 0x88 and struct.unpack("!H", head[2:4])[0] == 1008, head  # close, policy
            assert 0.4 <= time.monotonic() - t0 < 2
        finally:
            writer.close()


# -- 15. in-process: encoder hook, overriding without the decorator -------------------------

async def test_encoder_default_hook():
    reg = Registry()

    @reg.method()
    def price():
        return decimal.Decimal("1.10")
    request = b'{"jsonrpc":"2.0","method":"price","id":1}'
    answer = await Engine(reg, default=str).handle_async(request)
    assert orjson.loads(answer) == {"jsonrpc": "2.0", "result": "1.10", "id": 1}
    r = orjson.loads(await Engine(reg).handle_async(request))
    assert r["id"] == 1 and r["error"]["code"] == -32603


async def test_override_without_decorator_withdraws_method():
    class Base:
        @rpc_method
        def hello(self):
            return "base"

        @rpc_method
        def kept(self):
            return "kept"

    class Child(Base):
        def hello(self):  # no decorator: no longer an rpc method
            return "child"

    assert set(collect_marked(Base).names()) == {"hello", "kept"}
    assert collect_marked(Child).names() == ["kept"]


# -- a client that asks for large results and does not read ---------------------------------

def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.parametrize("stack", STACKS)
async def test_unread_large_results_do_not_pile_up_in_the_server(stack):
    """40 requests for 1 MB results, none read: the server stops producing once its write buffer is full
    (requests wait unprocessed), so its memory grows by far less than the 40 MB asked for; every answer
    still arrives, in full, once the client reads."""
    with run_server("--server", stack, "--no-compression") as (proc, port):
        async with connect(url(port), max_size=None, compression=None) as ws:
            assert (await call(ws, "add", [1, 1], 0))["result"] == 2
            before = _rss_kib(proc.pid)
            for i in range(1, 41):
                await ws.send(req("big", [1024], i))
            await asyncio.sleep(1.5)
            grown_mib = (_rss_kib(proc.pid) - before) / 1024
            assert grown_mib < 20, f"server grew {grown_mib:.1f} MiB with 40 MB of results unread"
            ids = set()
            for _ in range(40):
                r = await recv(ws)
                assert len(r["result"]) == 1024 * 1024
                ids.add(r["id"])
            assert ids == set(range(1, 41))
