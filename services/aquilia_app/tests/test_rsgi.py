"""The RSGI front end on the real granian: requests through RSGIRequest (no middleware: the reference
app, see test_e2e.py) and through the ASGI adapter (an app with pure-ASGI middleware, mw_app.py)."""
import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from server_util import raw_request, running_server, status_of


@pytest.fixture(scope="module")
def mw_server():
    with running_server("--app", "mw_app:app", "--interface", "rsgi") as (port, proc):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            yield port, client


def test_middleware_runs_under_rsgi(mw_server):
    _, c = mw_server
    r = c.get("/hello")
    assert r.status_code == 200 and r.json() == {"hello": "world"}
    assert r.headers["x-stamp"] == "outer"
    assert r.headers["content-length"] == str(len(r.content))


def test_adapter_delivers_the_body_and_an_asgi_scope(mw_server):
    _, c = mw_server
    payload = bytes(range(256)) * 3
    r = c.post("/echo", content=payload)
    assert r.status_code == 200 and r.content == payload
    assert r.headers["x-client-is-tuple"] == "True" and r.headers["x-stamp"] == "outer"


def test_adapter_takes_a_raw_non_ascii_query(mw_server):
    """granian passes raw UTF-8 query bytes (a non-browser client's); the adapter's ASGI scope holds them as
    sent, as granian's ASGI does: no 500 for "€", no "é" turned into a byte that is not UTF-8."""
    port, _ = mw_server
    for query in (b"a=\xe2\x82\xac", b"a=\xc3\xa9"):
        raw = raw_request(port, b"GET /hello?" + query + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        assert status_of(raw) == 200 and b"x-stamp: outer" in raw.lower(), raw[:300]


def test_adapter_streams_and_keeps_the_connection(mw_server):
    _, c = mw_server
    for _ in range(3):  # the same keep-alive connection
        r = c.get("/chunks")
        assert r.status_code == 200 and r.text == "part 0\npart 1\npart 2\n"
        assert r.headers.get("transfer-encoding") == "chunked" and r.headers["x-stamp"] == "outer"


def test_adapter_errors_are_problems(mw_server):
    port, c = mw_server
    r = c.post("/echo", content=b"x" * 5000)  # over the app's 1000-byte limit
    assert r.status_code == 413 and r.headers["content-type"] == "application/problem+json"
    assert r.headers["connection"] == "close" and r.headers["x-stamp"] == "outer"
    r = c.get("/nope")
    assert r.status_code == 404 and r.headers["x-stamp"] == "outer"
    r = c.delete("/hello")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
    # a chunked upload over the limit is refused, not buffered
    data = b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + (b"400\r\n" + b"y" * 1024 + b"\r\n") * 3 + b"0\r\n\r\n"
    assert status_of(raw_request(port, data)) == 413


def test_rsgi_request_fields():
    with running_server("--app", "mw_app:app") as (port, _):  # rsgi is granian's default
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as c:
            r = c.get("/who?a=1&b=&a=2", headers={"user-agent": "probe/1", "x-many": "v"})
    got = r.json()
    assert got["method"] == "GET" and got["path"] == "/who" and got["agent"] == "probe/1"
    assert got["query"] == {"a": "2", "b": ""} and got["n_headers"] >= 3


def test_asgi_middleware_sees_websockets_under_rsgi(mw_server):
    """The pure-ASGI middleware runs for WebSockets under RSGI as under ASGI: a guard in it is not bypassed."""
    port, _ = mw_server
    with pytest.raises(InvalidStatus) as info:
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=5):
            pass
    assert info.value.response.status_code == 403  # refused by WSGuard before the handler
    with connect(f"ws://127.0.0.1:{port}/ws?token=ok", open_timeout=5) as ws:
        for text in ("hi", "again"):
            ws.send(text)
            assert ws.recv(timeout=5) == text
    with pytest.raises(InvalidStatus) as info:
        with connect(f"ws://127.0.0.1:{port}/nowhere?token=ok", open_timeout=5):
            pass
    assert info.value.response.status_code == 404  # the app's own refusal, through the adapter
    with connect(f"ws://127.0.0.1:{port}/ws?token=ok", open_timeout=5) as ws:  # the server still works
        ws.send("still here")
        assert ws.recv(timeout=5) == "still here"
        ws.close()
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5)
