"""The standalone server over real sockets: calls, bad input, concurrency, compression, misbehaving clients."""

import asyncio
import urllib.request
import base64
import os
import random
import socket
import struct
import time

import orjson
import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from helpers import http_get, metric, req, run_server, wait_until

pytestmark = pytest.mark.asyncio

MAX_BYTES = 300_000


@pytest.fixture(scope="module", params=["picows", "websockets"])
def server(request):
    with run_server("--server", request.param, "--max-message-bytes", str(MAX_BYTES), "--max-in-flight", "8",
                    "--ping-interval", "0.5", "--ping-timeout", "1", "--send-timeout", "1",
                    "--sample-every", "1") as (proc, port):
        yield proc, port


def url(port):
    return f"ws://127.0.0.1:{port}/"


async def call(ws, method, params=None, rid=1):
    await ws.send(req(method, params, rid))
    return orjson.loads(await asyncio.wait_for(ws.recv(), 10))


async def test_basic_calls_and_batch(server):
    _, port = server
    async with websockets.connect(url(port)) as ws:
        assert await call(ws, "add", [1, 2]) == {"jsonrpc": "2.0", "result": 3, "id": 1}
        assert (await call(ws, "echo", {"value": {"a": [1, "x"]}}, "e"))["result"] == {"a": [1, "x"]}
        await ws.send('[{"jsonrpc":"2.0","method":"add","params":[1,1],"id":1},'
                      '{"jsonrpc":"2.0","method":"sleep","params":[0.01],"id":2},'
                      '{"jsonrpc":"2.0","method":"echo","params":[1]}]')
        r = orjson.loads(await ws.recv())
        assert sorted(x["id"] for x in r) == [1, 2]
        # a notification gets nothing: the next answer is for the next request
        await ws.send('{"jsonrpc":"2.0","method":"add","params":[1,1]}')
        assert (await call(ws, "add", [2, 2], 9)) == {"jsonrpc": "2.0", "result": 4, "id": 9}


async def test_bad_input_keeps_connection_healthy(server):
    _, port = server
    async with websockets.connect(url(port)) as ws:
        cases = [
            ('{"jsonrpc":"2.0","method":', -32700),
            (b'{"jsonrpc":"2.0","method":"echo","params":["\xff"],"id":1}', -32700),  # binary frame, bad UTF-8
            ('"just a string"', -32600),
            ('{"jsonrpc":"1.0","method":"add","params":[1,2],"id":1}', -32600),
            ('{"jsonrpc":"2.0","method":"nope","id":1}', -32601),
            ('{"jsonrpc":"2.0","method":"add","params":[1],"id":1}', -32602),
            ('{"jsonrpc":"2.0","method":"fail","id":1}', -32603),
            ("[" * 100_000 + "]" * 100_000, -32001),
            ('{"jsonrpc":"2.0","method":"echo","params":[' + ",".join(["1"] * 20_000) + '],"id":1}', -32001),
        ]
        for raw, code in cases:
            await ws.send(raw)
            r = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            assert r["error"]["code"] == code, (raw[:60], r)
            if code == -32603:
                assert "data" not in r["error"] and "Traceback" not in str(r)
        assert (await call(ws, "add", [20, 22]))["result"] == 42


async def test_invalid_utf8_text_frame_closes_1007(server):
    _, port = server
    ws = await websockets.connect(url(port))
    await ws.send(b'{"jsonrpc":"2.0","method":"echo","params":["\xff"],"id":1}', text=True)
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(ws.recv(), 5)
    assert ws.close_code == 1007
    async with websockets.connect(url(port)) as ws2:  # server fine
        assert (await call(ws2, "add", [1, 2]))["result"] == 3


async def test_frame_over_limit_refused_before_buffering(server):
    """Announce a 100 MB frame and send only its header: the server closes with 1009 at once."""
    _, port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 101")
    writer.write(bytes([0x81, 0x80 | 127]) + struct.pack("!Q", 100 * 1024 * 1024) + os.urandom(4) + b"{" * 10)
    await writer.drain()
    t0 = time.monotonic()
    frame = await asyncio.wait_for(reader.read(2 + 2 + 200), 5)
    assert frame[0] == 0x88  # close frame
    code = struct.unpack("!H", frame[2:4])[0]
    assert code == 1009
    assert time.monotonic() - t0 < 2
    writer.close()
    # messages just over the limit in several fragments are refused too
    async with websockets.connect(url(port), max_size=None) as ws:
        chunk = "x" * 100_000
        with pytest.raises(ConnectionClosed):
            await ws.send([chunk, chunk, chunk, chunk])
            await asyncio.wait_for(ws.recv(), 5)
        assert ws.close_code == 1009
    async with websockets.connect(url(port)) as ws:
        assert (await call(ws, "add", [1, 2]))["result"] == 3


async def test_many_in_flight_out_of_order(server):
    _, port = server
    async with websockets.connect(url(port)) as ws:
        await ws.send(req("sleep", [0.4], "slow"))
        await ws.send(req("sleep", [0.1], "mid"))
        await ws.send(req("add", [1, 2], "fast"))
        order = [orjson.loads(await ws.recv())["id"] for _ in range(3)]
        assert order == ["fast", "mid", "slow"]
        # 100 calls with random durations: every id answered once, with its own result
        n = 100
        delays = {i: random.random() * 0.05 for i in range(n)}
        for i in range(n):
            await ws.send(req("sleep", [delays[i]], i))
        got = {}
        for _ in range(n):
            r = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            assert r["id"] not in got
            got[r["id"]] = r["result"]
        assert got == {i: {"slept": delays[i], "id": i} for i in range(n)}


async def test_bound_applies_backpressure_without_dropping(server):
    """max-in-flight is 8: 32 calls of 0.2 s take >= 4 rounds and all are answered."""
    _, port = server
    async with websockets.connect(url(port)) as ws:
        t0 = time.monotonic()
        for i in range(32):
            await ws.send(req("sleep", [0.2], i))
        ids = sorted([orjson.loads(await asyncio.wait_for(ws.recv(), 10))["id"] for _ in range(32)])
        elapsed = time.monotonic() - t0
        assert ids == list(range(32))
        assert elapsed >= 0.75, elapsed


async def test_duplicate_id_in_flight_rejected(server):
    _, port = server
    async with websockets.connect(url(port)) as ws:
        await ws.send(req("sleep", [0.2], "dup"))
        await ws.send(req("sleep", [0.01], "dup"))
        first = orjson.loads(await ws.recv())
        assert first["error"]["code"] == -32600 and first["id"] == "dup"
        second = orjson.loads(await ws.recv())
        assert second["result"]["slept"] == 0.2


def _record_frames(ws):
    """Wrap the client's permessage-deflate decoder to record (rsv1, size) of every data frame received."""
    exts = ws.protocol.extensions
    assert exts, "permessage-deflate was not negotiated"
    ext = exts[0]
    seen = []
    orig = ext.decode

    def decode(frame, *, max_size=None):
        seen.append((frame.rsv1, len(frame.data), frame.opcode.name))
        return orig(frame, max_size=max_size)
    ext.decode = decode
    return seen


async def test_compression_negotiated_for_large_results_only(server):
    _, port = server
    async with websockets.connect(url(port), max_size=None) as ws:
        assert "permessage-deflate" in ws.response.headers["Sec-WebSocket-Extensions"]
        seen = _record_frames(ws)
        assert (await call(ws, "add", [1, 2]))["result"] == 3
        assert seen[-1][0] is False  # small: not compressed
        seen.clear()
        r = await call(ws, "big", [1024], 2)  # 1 MB result
        assert len(r["result"]) == 1024 * 1024
        assert seen[0][0] is True  # first frame compressed
        assert sum(s for _, s, _ in seen) < 200_000  # compressed on the wire
    async with websockets.connect(url(port), compression=None, max_size=None) as ws:
        assert ws.response.headers.get("Sec-WebSocket-Extensions") is None
        frames = []
        orig = ws.protocol.recv_frame

        def recv_frame(frame):
            frames.append((frame.opcode.name, frame.fin, len(frame.data)))
            return orig(frame)
        ws.protocol.recv_frame = recv_frame
        r = await call(ws, "big", [300], 3)
        assert len(r["result"]) == 300 * 1024
        # a large result is sent as several frames (fragmented), not one 300 KB frame
        assert len(frames) > 1 and frames[0][:2] == ("TEXT", False) and frames[-1][:2] == ("CONT", True)
        assert max(n for _, _, n in frames) <= 64 * 1024


async def test_disconnect_mid_call_cancels(server):
    _, port = server
    ws = await websockets.connect(url(port))
    for i in range(5):
        await ws.send(req("sleep", [30], i))
    await asyncio.sleep(0.3)
    status, text = await asyncio.to_thread(http_get, port, "/metrics")
    assert (metric(text, "rpc_in_flight") or 0) >= 5, text[-1500:]
    ws.transport.abort()  # vanish without a close frame
    assert await asyncio.to_thread(wait_until, lambda: metric(http_get(port, "/metrics")[1], "rpc_in_flight") == 0)
    async with websockets.connect(url(port)) as ws2:
        assert (await call(ws2, "add", [1, 2]))["result"] == 3


async def test_client_never_reading_is_closed_and_others_unaffected(server):
    _, port = server
    # a raw client: handshake, then only writes, never reads (nor answers pings)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    assert sock.recv(4096).startswith(b"HTTP/1.1 101")

    def frame(payload: bytes) -> bytes:
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return bytes([0x81, 0x80 | len(payload)]) + mask + masked

    sock.setblocking(False)
    sent = 0
    for i in range(200):
        try:
            sock.send(frame(req("big", [256], i).encode()))
            sent += 1
        except BlockingIOError:
            break
    assert sent > 10
    try:
        async with websockets.connect(url(port)) as ws:
            t0 = time.monotonic()
            for i in range(20):
                assert (await call(ws, "add", [i, 1], i))["result"] == i + 1
            assert time.monotonic() - t0 < 2.0  # others unaffected
            # the stuck client is dropped (keepalive timeout), its memory freed
            def closed():
                text = http_get(port, "/metrics")[1]
                return (metric(text, "rpc_closed_connections_total", reason="send_timeout") or 0) >= 1
            assert await asyncio.to_thread(wait_until, closed, 10.0)
            assert (await call(ws, "add", [1, 1]))["result"] == 2
    finally:
        sock.close()


async def test_metrics_and_http_endpoints(server):
    _, port = server
    async with websockets.connect(url(port)) as ws:
        await call(ws, "add", [1, 2])
        status, text = await asyncio.to_thread(http_get, port, "/metrics")
        assert status == 200
        assert metric(text, "rpc_open_connections") >= 1
    assert metric(text, "rpc_calls_total", method="add", outcome="ok") >= 1
    for stage in ("parse", "validate", "dispatch", "encode"):
        assert metric(text, "perfkit_hotpath_duration_seconds_count", hotpath=stage, service="rpc_app") >= 1
    assert metric(text, "rpc_call_duration_seconds_count", method="add", service="rpc_app") >= 1
    # Prometheus asks for OpenMetrics first
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": accept})
    with await asyncio.to_thread(urllib.request.urlopen, req, timeout=5) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        assert r.read().endswith(b"# EOF\n")
    assert (await asyncio.to_thread(http_get, port, "/healthz"))[0] == 200
    assert (await asyncio.to_thread(http_get, port, "/"))[0] == 426


async def test_compressed_requests_and_deflate_bomb(server):
    _, port = server
    async with websockets.connect(url(port), max_size=None) as ws:
        assert ws.protocol.extensions  # the client compresses what it sends
        value = "abc" * 60_000  # 180 KB, a few hundred bytes compressed
        r = await call(ws, "echo", [value], 1)
        assert r["result"] == value
    async with websockets.connect(url(port), max_size=None) as ws:
        bomb = req("echo", ["x" * 2_000_000], 2)  # ~2 KB on the wire, 2 MB inflated
        await ws.send(bomb)
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 5)
        assert ws.close_code == 1009
    async with websockets.connect(url(port)) as ws:
        assert (await call(ws, "add", [1, 2]))["result"] == 3
