"""Slow, hostile and unusual clients against the real server (a subprocess on port 0, raw sockets):
each hole of aquilia_app's robustness issue with the answer it must get.  The huge integer path
segment is in test_e2e.py (every front end); the in-process halves are in test_app_inprocess.py."""
import os
import select
import socket
import time

import httpx
import orjson
import pytest

from edge_app import GREETING_LINES
from server_util import read_response, running_server

GRANIAN = {"granian-rsgi": ("--interface", "rsgi"), "granian-asgi": ("--interface", "asgi")}
EVERY_SERVER = dict(GRANIAN, uvicorn=("--server", "uvicorn"))


def _connect(port, timeout=5.0):
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def _send_quietly(sock, data: bytes) -> None:
    """Send, ignoring a server that already closed the socket (what some of these tests check)."""
    try:
        sock.sendall(data)
    except OSError:
        pass


def _trickle_until_answered(sock, byte: bytes, seconds: float) -> float:
    """Send ``byte`` every 0.2 s until the server answers or closes; returns the seconds it took."""
    t0 = time.monotonic()
    while not select.select([sock], [], [], 0.2)[0]:
        if time.monotonic() - t0 > seconds:
            break
        _send_quietly(sock, byte)
    return time.monotonic() - t0


@pytest.fixture(scope="module", params=list(GRANIAN))
def edge(request):
    """edge_app.py (no middleware: RSGI requests take the direct path) on granian."""
    with running_server("--app", "edge_app:app", *GRANIAN[request.param]) as (port, _):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            yield port, client


@pytest.mark.parametrize("server", list(GRANIAN))
def test_a_raw_non_ascii_query_reads_the_same_on_every_front_end(server):
    """granian passes raw UTF-8 bytes in a query (uvicorn refuses them with 400).  Through RSGI they arrive
    as text; through ASGI as bytes, which were read as latin-1 ("\u00e9" became "\u00c3\u00a9" in ``url`` and in
    the trailing-slash redirect's Location).  Both front ends must give the same URL and redirect."""
    with running_server("--app", "edge_app:app", *GRANIAN[server]) as (port, _):
        with _connect(port) as s:
            s.sendall(b"GET /whoami?a=\xc3\xa9&b=\xe2\x82\xac HTTP/1.1\r\nHost: t\r\n\r\n")
            status, _, body = read_response(s)
        assert status == 200, body
        assert orjson.loads(body)["url"] == "http://t/whoami?a=\u00e9&b=\u20ac"
        with _connect(port) as s:
            s.sendall(b"GET /whoami/?a=\xc3\xa9 HTTP/1.1\r\nHost: t\r\n\r\n")
            status, headers, _ = read_response(s)
        assert (status, headers["location"]) == (307, "/whoami?a=%C3%A9")


# -- a request-scoped DB connection is taken only once the body is in ------------------------------

def test_trickled_uploads_do_not_starve_the_pool():
    body = b'{"name":"slow","price":1}'
    head = b"POST /items HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    with running_server() as (port, _):  # the reference app: 4 SQLite connections per worker
        uploads = [_connect(port) for _ in range(8)]
        try:
            for s in uploads:
                s.sendall(head % len(body) + body[:5])
            time.sleep(0.3)  # all eight are in the app, waiting for the rest of their bodies
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=3) as c:
                assert c.get("/items").status_code == 200
            for s in uploads:
                s.sendall(body[5:])
            assert [read_response(s)[0] for s in uploads] == [201] * 8
        finally:
            for s in uploads:
                s.close()


@pytest.mark.parametrize("server", list(EVERY_SERVER))
def test_an_unread_body_is_drained_after_the_pooled_connection_went_back(server):
    # GET /items never reads its body: the app drains it (up to 1 s) so the connection can be reused,
    # and the request's SQLite connection must be back in the pool while it waits for a slow client
    args = (*EVERY_SERVER[server], "--pool-timeout", "0.5")
    with running_server(*args, env={"AQUILIA_APP_POOL": "1"}) as (port, _):
        with _connect(port) as slow, httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as c:
            slow.sendall(b"GET /items HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nx")
            time.sleep(0.2)  # its handler has run: the body (1 byte of 100) is being drained
            assert c.get("/items").status_code == 200  # the only connection of the pool is free
            status, headers, _ = read_response(slow)
            assert status == 200 and headers["connection"] == "close"  # too slow to drain: not reused


# -- a Response subclass on the direct RSGI path --------------------------------------------------

def test_response_subclass_is_sent_whole(edge):
    _, c = edge
    r = c.get("/subclass")
    assert r.status_code == 200 and r.text == "hello world\n" * GREETING_LINES
    assert r.headers["content-length"] == str(len(r.content)) and r.headers["x-greeting"] == "world"
    assert "transfer-encoding" not in r.headers
    assert c.get("/healthz").status_code == 200  # and the connection is still usable


# -- a success answered before the request body was read ------------------------------------------

IGNORED = {"/ignore": b'{"ignored":true}', "/ignore-stream": b"streamed"}


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.parametrize("path", list(IGNORED))
def test_unread_small_body_is_drained_and_the_connection_reused(edge, path, framing):
    port, _ = edge
    if framing == "chunked":
        head, body = b"Transfer-Encoding: chunked\r\n", b"7d0\r\n" + b"x" * 2000 + b"\r\n0\r\n\r\n"
    else:
        head, body = b"Content-Length: 2000\r\n", b"x" * 2000
    with _connect(port) as s:
        s.sendall(b"POST %s HTTP/1.1\r\nHost: t\r\n" % path.encode() + head + b"\r\n")
        time.sleep(0.2)  # the body comes after the headers, as it may over a real network
        _send_quietly(s, body)
        status, headers, answer = read_response(s)
        assert status == 200 and answer == IGNORED[path]
        assert headers.get("connection") != "close"
        _send_quietly(s, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        assert read_response(s)[0] == 200  # the next request on the same connection is answered


@pytest.mark.parametrize("path", list(IGNORED))
def test_unread_body_too_big_to_drain_says_connection_close(edge, path):
    port, _ = edge
    with _connect(port) as s:
        s.sendall(b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Length: 300000\r\n\r\n" % path.encode() + b"x" * 1000)
        status, headers, _ = read_response(s)
    assert status == 200 and headers.get("connection") == "close"


def test_a_stream_that_reads_the_body_itself_gets_all_of_it(edge):
    port, _ = edge
    body = bytes(range(256)) * 400  # 100 KB, chunked: more than a drain would take
    framed = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 4096]), body[i:i + 4096]) for i in range(0, len(body), 4096))
    with _connect(port) as s:
        s.sendall(b"POST /echo-stream HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        time.sleep(0.1)
        s.sendall(framed + b"0\r\n\r\n")
        status, headers, answer = read_response(s)
    assert status == 200 and answer == body


# -- a client that leaves in the middle of a streamed answer ------------------------------------------

@pytest.mark.parametrize("app,path", [(None, "/stream?delay=100"), ("mw_app:app", "/chunks?delay=0.2")])
def test_a_client_leaving_mid_stream_logs_no_error(app, path):
    # the direct RSGI path (the reference app) and the ASGI adapter (an app with pure-ASGI middleware)
    with running_server(*(("--app", app) if app else ())) as (port, proc):
        os.set_blocking(proc.stderr.fileno(), False)
        proc.stderr.read()  # what start-up printed
        for _ in range(3):
            with _connect(port) as s:
                s.sendall(b"GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path.encode())
                assert s.recv(65536).startswith(b"HTTP/1.1 200")  # the stream has started: leave
        time.sleep(1.0)  # each generator's next send finds the client gone
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as c:
            assert c.get("/healthz").status_code == 200
        logged = proc.stderr.read() or b""
    assert b"Traceback" not in logged and b"error while sending" not in logged, logged[-2000:]


# -- a header sent several times ---------------------------------------------------------------------

def test_a_repeated_header_reads_the_same_before_and_after_the_index(edge):
    _, c = edge
    r = c.get("/header/x-tag", headers=[("X-Tag", "a"), ("x-tag", "b, c")])
    assert r.json() == {"scan": "a, b, c", "indexed": "a, b, c", "all": ["a", "b, c"]}
    assert c.get("/header/x-none").json() == {"scan": None, "indexed": None, "all": []}


# -- read timeouts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("server", list(EVERY_SERVER))
def test_trickled_body_gets_408_after_the_body_timeout(server):
    head = b"POST /items HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    with running_server(*EVERY_SERVER[server], env={"AQUILIA_APP_BODY_TIMEOUT": "1"}) as (port, _):
        with _connect(port) as s:
            s.sendall(head + b'{"name"')
            waited = _trickle_until_answered(s, b" ", 6)  # 5 bytes/s: never done, never idle
            status, headers, body = read_response(s)
    assert status == 408 and headers["content-type"] == "application/problem+json"
    assert orjson.loads(body)["status"] == 408 and headers["connection"] == "close"
    assert 0.8 <= waited < 4, waited


def test_trickled_headers_are_cut_off_after_the_header_timeout():
    with running_server("--header-timeout", "1") as (port, _):  # granian reads the headers
        with _connect(port) as s:
            s.sendall(b"GET /ping HTTP/1.1\r\nHost: t\r\nX-Slow: ")
            waited = _trickle_until_answered(s, b"a", 6)
            try:
                answer = s.recv(65536)
            except ConnectionResetError:
                answer = b""
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer[:80]
    assert 0.8 <= waited < 4, waited


# -- what a request knows of itself, and a body read as a stream -----------------------------------

def test_a_request_knows_its_url_and_its_peer(edge):
    _, client = edge
    got = client.get("/whoami?a=1%202&b", headers={"host": "shop.example:8443"}).json()
    assert got["url"] == "http://shop.example:8443/whoami?a=1%202&b"
    assert got["base_url"] == "http://shop.example:8443/"
    assert got["header_x"] == "http://shop.example:8443/header/x%20y"
    assert got["state"] is True
    host, port = got["client"]
    assert host == "127.0.0.1" and isinstance(port, int) and port > 0


def test_a_trusted_proxy_forwards_the_client_and_the_scheme(edge):
    _, client = edge
    got = client.get("/forwarded", headers={"host": "shop.example", "x-forwarded-for": "6.6.6.6, 203.0.113.7",
                                            "x-forwarded-proto": "https"}).json()
    assert got == {"client": "203.0.113.7", "url": "https://shop.example/forwarded"}
    assert client.get("/forwarded", headers={"host": "shop.example"}).json() == \
        {"client": "127.0.0.1", "url": "http://shop.example/forwarded"}


def test_a_streamed_body_comes_in_pieces_and_within_the_limit(edge):
    _, client = edge

    def pieces(n, size):
        for _ in range(n):
            yield b"x" * size

    r = client.post("/count-stream", content=pieces(8, 64 << 10))  # chunked: 512 KiB
    assert r.status_code == 200 and r.json()["bytes"] == 512 << 10 and r.json()["chunks"] >= 2
    r = client.post("/count-stream", content=b"y" * 1000)  # with a Content-Length
    assert r.json() == {"bytes": 1000, "chunks": 1}
    assert client.post("/count-stream", content=pieces(40, 64 << 10)).status_code == 413  # 2.5 MiB > 1 MiB

    port, _ = edge
    with _connect(port) as s:  # a declared length over the limit is refused before any of it is read
        s.sendall(b"POST /count-stream HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\nzz" % (2 << 20))
        assert read_response(s)[0] == 413


def _leave_while_waiting(port, client) -> None:
    before = client.get("/watched").json()["gone"]
    with _connect(port) as s:
        s.sendall(b"GET /until-gone HTTP/1.1\r\nHost: t\r\n\r\n")
        time.sleep(0.3)  # the handler is polling is_disconnected(): the client goes
    deadline = time.monotonic() + 5
    while client.get("/watched").json()["gone"] == before:
        assert time.monotonic() < deadline, "the handler never saw the client leave"
        time.sleep(0.05)


def test_a_handler_sees_the_client_leave(edge):
    _leave_while_waiting(*edge)
    assert edge[1].get("/until-gone?seconds=0.5").json() == {"gone": False}  # a client that stays


def test_a_handler_sees_the_client_leave_on_uvicorn():
    with running_server("--app", "edge_app:app", "--server", "uvicorn") as (port, _):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            _leave_while_waiting(port, client)
            assert client.get("/until-gone?seconds=0.5").json() == {"gone": False}


@pytest.mark.parametrize("server", list(EVERY_SERVER) + ["testclient"])
def test_a_header_name_outside_latin1_is_absent_on_every_front_end(server):
    """``request.header(name)`` with a name no header can have ("\u20ac"): the default, as through RSGI -
    not a UnicodeEncodeError (500) from the ASGI request's scan."""
    if server == "testclient":
        import edge_app
        from aquilia_app.testclient import TestClient

        with TestClient(edge_app.app) as c:
            r = c.get("/header/%E2%82%AC")
            assert (r.status_code, r.json()) == (200, {"scan": None, "indexed": None, "all": []})
        return
    with running_server("--app", "edge_app:app", *EVERY_SERVER[server]) as (port, _):
        r = httpx.get(f"http://127.0.0.1:{port}/header/%E2%82%AC", timeout=10)
        assert (r.status_code, r.json()) == (200, {"scan": None, "indexed": None, "all": []})
