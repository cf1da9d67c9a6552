"""WebSockets on the real servers - granian RSGI, granian ASGI and uvicorn (with the ``websockets``
package) - serving ws_app.py, driven by the ``websockets`` sync client over real sockets.

These tests start the servers themselves (not through ``python -m aquilia_app``) to serve ws_app.py
with the servers' own WebSocket settings named here.

granian's RSGI sends no close code after the handshake (see aquilia_app.websockets): where an ASGI
client sees 1009, 1011, 1000..., an RSGI client sees 1005 - ``_code`` says which to expect."""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

import httpx
import orjson
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from server_util import _stop, child_env
from aquilia_app import ValidationFailed
from ws_app import SMALL_LIMIT

SERVERS = {
    "granian-rsgi": ["-m", "granian", "--interface", "rsgi", "--loop", "uvloop", "--ws", "ws_app:app"],
    "granian-asgi": ["-m", "granian", "--interface", "asgi", "--loop", "uvloop", "--ws", "ws_app:asgi"],
    "uvicorn": ["-m", "uvicorn", "--loop", "uvloop", "--http", "httptools", "--ws", "websockets-sansio",
                "--lifespan", "on", "--interface", "asgi3", "ws_app:asgi"],
}
HERE = os.path.dirname(os.path.abspath(__file__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(proc, port: int, log_path: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    _stop(proc)
    with open(log_path, "rb") as f:
        raise RuntimeError(f"server not ready: {f.read()[-4000:]!r}")


@pytest.fixture(scope="module", params=list(SERVERS))
def server(request):
    """(name, port) of ws_app served by one of the servers, WebSockets on."""
    port = _free_port()
    args = SERVERS[request.param]
    cmd = [sys.executable, *args[:-1], "--host", "127.0.0.1", "--port", str(port), args[-1]]
    env = child_env()
    env["PYTHONPATH"] = HERE + os.pathsep + env["PYTHONPATH"]  # ws_app
    with tempfile.TemporaryDirectory() as neutral:  # granian resolves module:attr from its cwd
        log_path = os.path.join(neutral, "server.log")  # a file: a pipe nobody reads could fill and block it
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env, cwd=neutral, start_new_session=True)
        try:
            _wait_ready(proc, port, log_path)
            yield request.param, port
        finally:
            _stop(proc)


def _url(server, path: str) -> str:
    return f"ws://127.0.0.1:{server[1]}{path}"


def _code(server, code: int) -> int:
    """The close code the client sees for a server-side close with ``code``."""
    return 1005 if server[0] == "granian-rsgi" else code


def _close(server, code: int, reason: str) -> tuple:
    """The (code, reason) the client sees for a server-side close with them."""
    return (1005, "") if server[0] == "granian-rsgi" else (code, reason)


def _closed_by_server(ws, timeout: float = 5.0):
    """Read until the server closes; its Close frame's (code, reason)."""
    with pytest.raises(ConnectionClosed) as info:
        while True:
            ws.recv(timeout=timeout)
    rcvd = info.value.rcvd
    return (rcvd.code, rcvd.reason) if rcvd is not None else (None, "")


def _events(server, tag: str, until: str, timeout: float = 5.0) -> list:
    """The server's events for ``tag`` once ``until`` is among them (the handler's end runs after
    the client saw the socket close)."""
    deadline = time.monotonic() + timeout
    while True:
        got = httpx.get(f"http://127.0.0.1:{server[1]}/events/{tag}").json()
        if until in got or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def _rejected_status(server, path: str, **kw) -> int:
    with pytest.raises(InvalidStatus) as info:
        with connect(_url(server, path), open_timeout=5, **kw):
            pass
    return info.value.response.status_code


# -- echo ---------------------------------------------------------------------------------------

def test_echo_text_bytes_and_json(server):
    with connect(_url(server, "/ws/text")) as ws:
        for text in ("hello", "", "ünïcödé ✓", "x" * 70000):
            ws.send(text)
            assert ws.recv(timeout=5) == text
    with connect(_url(server, "/ws/bytes")) as ws:
        for data in (b"\x00\x01\xff", bytes(range(256)) * 300):
            ws.send(data)
            assert ws.recv(timeout=5) == data
    with connect(_url(server, "/ws/json")) as ws:
        ws.send('{"a": [1, 2, {"b": null}]}')
        assert orjson.loads(ws.recv(timeout=5)) == {"got": {"a": [1, 2, {"b": None}]}}
        ws.send(b"[1, 2]")  # JSON in a binary message is read too
        assert orjson.loads(ws.recv(timeout=5)) == {"got": [1, 2]}


def test_subprotocol_and_accept_headers(server):
    with connect(_url(server, "/ws/text"), subprotocols=["chat.v2", "chat.v1"]) as ws:
        ws.send("hi")
        assert ws.recv(timeout=5) == "hi"
        # RSGI's accept() takes neither a subprotocol nor headers; granian's ASGI drops the headers
        assert ws.subprotocol == (None if server[0] == "granian-rsgi" else "chat.v2")
        assert ws.response.headers.get("x-ws") == ("yes" if server[0] == "uvicorn" else None)


def test_many_messages_arrive_in_order(server):
    n = 2000
    with connect(_url(server, "/ws/text")) as ws:
        sender = threading.Thread(target=lambda: [ws.send(f"message {i}") for i in range(n)])
        sender.start()
        got = [ws.recv(timeout=10) for _ in range(n)]
        sender.join()
    assert got == [f"message {i}" for i in range(n)]


# -- parameters and the request's DI scope --------------------------------------------------------

def test_path_query_header_cookie_and_di_then_teardown(server):
    tag = f"room-{server[0]}"
    headers = {"x-token": "t0k", "cookie": "flavor=mint; other=1"}
    with connect(_url(server, f"/ws/rooms/42?tag={tag}&name=ada"), additional_headers=headers) as ws:
        hello = orjson.loads(ws.recv(timeout=5))
        ws.send("hi")
        assert ws.recv(timeout=5) == "ada@42: hi"
    assert hello["room"] == 42 and hello["name"] == "ada" and isinstance(hello["session"], int)
    assert hello["token"] == "t0k" and hello["flavor"] == "mint"
    # the request-scoped Session is torn down after the socket closed, after the handler's finally
    assert _events(server, tag, "session closed") == ["handler start", "handler end", "session closed"]


def test_rejected_handshakes(server):
    assert _rejected_status(server, "/ws/nowhere") == 404
    assert _rejected_status(server, "/ws/rooms/abc?tag=x") == 404  # {room:int} does not match
    # the required query parameter tag is missing: the status an HTTP handler would answer
    assert _rejected_status(server, "/ws/small") == ValidationFailed("x").status
    assert _rejected_status(server, "/ws/private") == 401  # an HTTPException before accept()
    assert _rejected_status(server, "/ws/refuse") == 403  # close() before accept()
    assert _rejected_status(server, "/ws/boom-early") == 500
    with connect(_url(server, "/ws/private"), additional_headers={"x-token": "secret"}) as ws:
        assert ws.recv(timeout=5) == "welcome"
    # and the server still works
    with connect(_url(server, "/ws/text")) as ws:
        ws.send("still here")
        assert ws.recv(timeout=5) == "still here"


# -- limits and failures --------------------------------------------------------------------------

def test_message_over_the_routes_limit_closes_1009(server):
    tag = f"small-{server[0]}"
    with connect(_url(server, f"/ws/small?tag={tag}")) as ws:
        ws.send(b"y" * SMALL_LIMIT)  # exactly the limit passes
        assert ws.recv(timeout=5) == b"y" * SMALL_LIMIT
        ws.send(b"y" * (SMALL_LIMIT + 1))
        assert _closed_by_server(ws)[0] == _code(server, 1009)
    assert "small end" in _events(server, tag, "small end")


def test_message_over_the_default_limit_closes_1009(server):
    with connect(_url(server, "/ws/bytes"), max_size=None) as ws:
        ws.send(b"z" * (1 << 20))
        assert len(ws.recv(timeout=10)) == 1 << 20
        ws.send(b"z" * ((1 << 20) + 1))
        assert _closed_by_server(ws)[0] == _code(server, 1009)
    with connect(_url(server, "/ws/text"), max_size=None) as ws:  # text is measured in UTF-8 bytes
        ws.send("é" * (1 << 19))
        assert len(ws.recv(timeout=10)) == 1 << 19
        ws.send("é" * ((1 << 19) + 1))
        assert _closed_by_server(ws)[0] == _code(server, 1009)


def test_wrong_message_type_and_bad_json_close_the_socket(server):
    with connect(_url(server, "/ws/text")) as ws:
        ws.send(b"binary")
        assert _closed_by_server(ws) == _close(server, 1003, "expected a text message, got a binary one")
    with connect(_url(server, "/ws/json")) as ws:
        ws.send("{not json")
        assert _closed_by_server(ws)[0] == _code(server, 1007)


def test_handler_exception_closes_1011(server):
    tag = f"boom-{server[0]}"
    with connect(_url(server, f"/ws/boom?tag={tag}")) as ws:
        ws.send("go")
        assert _closed_by_server(ws) == _close(server, 1011, "internal error")
    assert _events(server, tag, "raising") == ["raising"]
    with connect(_url(server, "/ws/text")) as ws:  # the server is fine
        ws.send("ok")
        assert ws.recv(timeout=5) == "ok"


def test_http_exception_after_accept_closes_1008(server):
    with connect(_url(server, "/ws/policy")) as ws:
        ws.send("go")
        assert _closed_by_server(ws) == _close(server, 1008, "not allowed in this room")


def test_handler_returning_closes_1000(server):
    with connect(_url(server, "/ws/leave")) as ws:
        assert ws.recv(timeout=5) == "bye"
        assert _closed_by_server(ws)[0] == _code(server, 1000)


def test_client_leaving_ends_a_pushing_handler(server):
    tag = f"push-{server[0]}"
    with connect(_url(server, f"/ws/push?tag={tag}")) as ws:
        assert [ws.recv(timeout=5) for _ in range(3)] == ["0", "1", "2"]
    assert _events(server, tag, "push end") == ["push end"]


def test_a_receiving_and_a_pushing_task_share_a_socket_and_both_end(server):
    tag = f"chat-{server[0]}"
    with connect(_url(server, f"/ws/chat?tag={tag}")) as ws:
        echoes = []
        for text in ("a", "b", "c"):
            ws.send(text)
            while (msg := ws.recv(timeout=5)) == "tick":
                pass
            echoes.append(msg)
        assert echoes == ["echo a", "echo b", "echo c"]
    assert _events(server, tag, "pusher end") == ["receiver end", "pusher end"]


def test_messages_keep_their_order_after_a_burst_of_sends(server):
    with connect(_url(server, "/ws/burst")) as ws:
        assert [ws.recv(timeout=5) for _ in range(3)] == ["hello 0", "hello 1", "hello 2"]
        for i in range(50):
            ws.send(str(i))
        assert [ws.recv(timeout=5) for _ in range(50)] == [str(i) for i in range(50)]


def test_client_leaving_ends_a_receiving_handler(server):
    tag = f"gone-{server[0]}"
    with connect(_url(server, f"/ws/rooms/1?tag={tag}")) as ws:
        ws.recv(timeout=5)
        ws.socket.shutdown(socket.SHUT_RDWR)  # no Close frame: the TCP connection just ends
    assert _events(server, tag, "session closed") == ["handler start", "handler end", "session closed"]


def test_text_frame_with_bad_utf8_is_refused_by_the_server(server):
    tag = f"utf8-{server[0]}"
    with connect(_url(server, f"/ws/rooms/7?tag={tag}")) as ws:
        ws.recv(timeout=5)
        mask = b"\x01\x02\x03\x04"
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(b"\xff\xfe"))
        ws.socket.sendall(bytes([0x81, 0x80 | 2]) + mask + payload)  # a masked text frame, not UTF-8
        code = _closed_by_server(ws)[0]
    # uvicorn (websockets) says 1007; granian closes without a code, or drops the connection
    assert code == (1007 if server[0] == "uvicorn" else 1005)
    assert _events(server, tag, "session closed")[-2:] == ["handler end", "session closed"]
