"""The direct path of the blocking API (plain http, no proxy: pooled blocking sockets on the calling
thread): connection reuse, framing (Content-Length, chunked, until close, HEAD), retry rules when the
server closes an idle connection, and content decoding. Real sockets and servers, no mocks."""

from __future__ import annotations

import socket
import threading
import time
import zlib

import pytest

import requestx_client as requests
from requestx_client import _native
from requestx_client import exceptions as exc
from servers import RawServer, ok

pytestmark = pytest.mark.skipif(_native.sync_io_mode() != "direct", reason="REQUESTX_CLIENT_SYNC_IO is not direct")


def test_keep_alive_reuses_one_connection():
    with RawServer(lambda c, r, h: ok(b"r%d" % r)) as srv, requests.Session() as s:
        got = [s.get(srv.url + "/x").content for _ in range(5)]
        assert got == [b"r0", b"r1", b"r2", b"r3", b"r4"]
        assert srv.connections == 1
        assert s._native.direct_idle_count() == 1


def test_request_head_on_the_wire():
    with RawServer(lambda c, r, h: ok()) as srv, requests.Session() as s:
        s.post(srv.url + "/p?q=1", data=b"abc", headers={"X-One": "1"})
        head = srv.requests[0].decode()
        lines = head.split("\r\n")
        assert lines[0] == "POST /p?q=1 HTTP/1.1"
        fields = dict(line.split(": ", 1) for line in lines[1:])
        assert fields["Host"] == srv.url.removeprefix("http://")
        assert fields["X-One"] == "1" and fields["Content-Length"] == "3"
        assert fields["Accept-Encoding"] == "gzip, deflate, br, zstd"


def _chunked_upload(send):
    """What a raw server receives when ``send(url)`` posts a chunked body: (head, body bytes as sent)."""
    got = {}

    def serve(listener):
        conn, _ = listener.accept()
        with conn:
            data = b""
            while not data.endswith(b"0\r\n\r\n"):
                piece = conn.recv(65536)
                if not piece:
                    break
                data += piece
            got["head"], _, got["body"] = data.partition(b"\r\n\r\n")
            conn.sendall(ok(b"done"))

    with socket.create_server(("127.0.0.1", 0)) as listener:
        t = threading.Thread(target=serve, args=(listener,), daemon=True)
        t.start()
        r = send("http://127.0.0.1:%d/up" % listener.getsockname()[1])
        t.join(5)
    assert r.content == b"done"
    return got["head"].decode(), got["body"]


def test_a_transfer_encoding_header_sends_the_body_chunked():
    head, body = _chunked_upload(lambda url: requests.post(url, data=b"hello", headers={"Transfer-Encoding": "chunked"}))
    fields = [line.lower() for line in head.split("\r\n")[1:]]
    assert "transfer-encoding: chunked" in fields and not any(f.startswith("content-length") for f in fields)
    assert body == b"5\r\nhello\r\n0\r\n\r\n"
    _, empty = _chunked_upload(lambda url: requests.post(url, data=b"", headers={"Transfer-Encoding": "chunked"}))
    assert empty == b"0\r\n\r\n"


def test_connection_close_is_not_reused():
    with RawServer(lambda c, r, h: ok(extra=b"Connection: close\r\n") if r == 0 else None) as srv, \
            requests.Session() as s:
        assert s.get(srv.url).content == b"hello"
        assert s.get(srv.url).content == b"hello"
        assert srv.connections == 2
        assert s._native.direct_idle_count() == 0


def test_chunked_response_with_extensions_and_trailers():
    body = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;name=value\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n")
    with RawServer(lambda c, r, h: body) as srv, requests.Session() as s:
        assert s.get(srv.url).content == b"hello world"
        assert s.get(srv.url).text == "hello world"  # the connection stays usable after the trailers
        assert srv.connections == 1


def test_chunked_response_from_http_server(server):
    r = requests.get(server.url + "/chunked-lines")
    assert r.content == b"line one\nline two\nline three\nlast"


def test_body_until_close():
    with RawServer(lambda c, r, h: (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nno length here",)) as srv, \
            requests.Session() as s:
        assert s.get(srv.url).content == b"no length here"
        assert s._native.direct_idle_count() == 0


def test_head_reads_no_body():
    with RawServer(lambda c, r, h: b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n") as srv, \
            requests.Session() as s:
        for _ in range(3):
            r = s.head(srv.url)
            assert r.status_code == 200 and r.content == b"" and r.headers["Content-Length"] == "1000"
        assert srv.connections == 1


def test_interim_100_continue_is_skipped():
    answer = b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"final")
    with RawServer(lambda c, r, h: answer) as srv:
        assert requests.post(srv.url, data=b"x").content == b"final"


def _one_answer_per_connection(c, r, h):
    """Answers the first request of each connection (keep-alive), then closes without answering."""
    return ok(b"conn%d" % c) if r == 0 else None


def test_idempotent_request_retried_when_idle_connection_was_closed():
    with RawServer(_one_answer_per_connection) as srv, requests.Session() as s:
        assert s.get(srv.url).content == b"conn0"
        assert s.get(srv.url).content == b"conn1"  # conn0 was dropped with the request: sent again
        assert s.put(srv.url, data=b"x").content == b"conn2"
        assert srv.connections == 3


def test_non_idempotent_request_not_retried():
    with RawServer(_one_answer_per_connection) as srv, requests.Session() as s:
        assert s.get(srv.url).content == b"conn0"
        with pytest.raises(exc.ConnectionError) as e:
            s.post(srv.url, data=b"x")  # it may have been processed: never sent twice
        assert type(e.value) is exc.ConnectionError
        assert s.post(srv.url, data=b"x").content == b"conn1"  # a fresh connection then works


def test_post_avoids_connection_the_server_already_closed():
    # the server answers the first connection's request and then closes it while it is idle
    with RawServer(lambda c, r, h: (ok(b"first"),) if c == 0 else ok(b"second")) as srv, requests.Session() as s:
        assert s.get(srv.url).content == b"first"
        time.sleep(0.1)  # the FIN has reached the client's socket
        assert s.post(srv.url, data=b"x").content == b"second"
        assert srv.connections == 2 and len(srv.requests) == 2


@pytest.mark.parametrize("name, encode", [
    ("gzip", lambda b: __import__("gzip").compress(b)),
    ("deflate", zlib.compress),
    ("br", lambda b: __import__("brotli").compress(b)),
    ("zstd", lambda b: __import__("zstandard").ZstdCompressor().compress(b)),
])
def test_content_encoding_decoded(name, encode):
    raw = b"payload " * 500
    answer = ok(encode(raw), b"Content-Encoding: %s\r\n" % name.encode())
    with RawServer(lambda c, r, h: answer) as srv, requests.Session() as s:
        r = s.get(srv.url)
        assert r.content == raw
        assert "Content-Encoding" not in r.headers and "Content-Length" not in r.headers
        assert s.get(srv.url).content == raw and srv.connections == 1


def test_corrupt_encoding_and_short_body():
    with RawServer(lambda c, r, h: ok(b"not gzip", b"Content-Encoding: gzip\r\n")) as srv:
        with pytest.raises(exc.ContentDecodingError):
            requests.get(srv.url)
    short = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this"
    with RawServer(lambda c, r, h: (short,)) as srv:
        with pytest.raises(exc.ChunkedEncodingError):
            requests.get(srv.url)
    with RawServer(lambda c, r, h: (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",)) as srv:
        with pytest.raises(exc.ChunkedEncodingError):
            requests.get(srv.url)


def test_garbage_response_is_a_connection_error():
    with RawServer(lambda c, r, h: b"this is not HTTP\r\n\r\n") as srv:
        with pytest.raises(exc.ConnectionError):
            requests.get(srv.url)


def test_large_body_then_reuse(server):
    # > 64 KiB with Content-Length: read straight into the body's own buffer
    with requests.Session() as s:
        r = s.get(server.url + "/big?size=3000001")
        assert len(r.content) == 3000001 and r.content[:3] == b"xxx"
        assert s.get(server.url + "/echo").json()["method"] == "GET"
        assert s._native.direct_idle_count() == 1


_SPIN_SCRIPT = """
import sys, threading
import requestx_client as requests
from requestx_client import _native
url = sys.argv[1]
with requests.Session() as s:
    quick = [s.get(url + "/echo").json()["method"] for _ in range(200)]
    slow = s.get(url + "/slow-headers?delay=0.05")  # answers after the poll budget: the blocking read takes over
    bad = []
    def worker():
        for _ in range(50):
            if s.get(url + "/echo").status_code != 200:
                bad.append(1)
    ts = [threading.Thread(target=worker) for _ in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
print(_native.spin_us(), quick.count("GET"), slow.status_code, len(bad))
"""


@pytest.mark.parametrize("setting,expected", [(None, 50), ("0", 0), ("200", 200), (" 7 ", 7)])
def test_poll_budget_setting(server, fresh_python, setting, expected):
    """REQUESTX_CLIENT_SPIN_US: how long the direct path polls for an answer before sleeping in read.
    Every setting answers quick and slow requests alike, from one thread and from four."""
    env = {} if setting is None else {"REQUESTX_CLIENT_SPIN_US": setting}
    out = fresh_python(_SPIN_SCRIPT, server.url, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(expected), "200", "200", "0"], out.stdout


@pytest.mark.parametrize("setting", ["abc", "-1", "10001", "1.5", ""])
def test_poll_budget_invalid_setting_is_refused_at_import(fresh_python, setting):
    out = fresh_python("import requestx_client", env={"REQUESTX_CLIENT_SPIN_US": setting})
    assert out.returncode != 0
    assert "ValueError: REQUESTX_CLIENT_SPIN_US must be a whole number of microseconds from 0 to 10000" in out.stderr
