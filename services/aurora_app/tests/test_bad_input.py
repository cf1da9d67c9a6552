"""Every kind of bad input gets its status, then the connection is closed.

Bare LF: aurora rejects an LF that is not preceded by CR anywhere in the request
line, header fields, chunk-size lines and trailers with 400 (RFC 9112 §2.2 lets a
server accept it; refusing it removes a classic request-smuggling ambiguity).
"""
import pytest

from rawhttp import Reader, get, request

H = "Host: t\r\n"
BAD = [
    # (id, raw request, status)
    ("uri-too-long", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414),
    ("uri-too-long-no-crlf", b"GET /" + b"a" * 20000, 414),
    ("header-too-large", get("/plaintext", extra="X-Big: " + "b" * 17000 + "\r\n"), 431),
    ("too-many-headers", get("/plaintext", extra="".join(f"X-{i}: v\r\n" for i in range(70))), 431),
    ("body-too-large-cl", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n", 413),
    ("body-too-large-chunked", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                               b"200000\r\n", 413),
    ("cl-and-te", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("te-and-cl", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Length: 3\r\n\r\n0\r\n\r\n", 400),
    ("conflicting-cl", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
    ("conflicting-cl-list", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3, 4\r\n\r\nabcd", 400),
    ("negative-cl", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n", 400),
    ("plus-cl", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: +3\r\n\r\nabc", 400),
    ("obs-fold", b"GET /plaintext HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n  continued\r\n\r\n", 400),
    ("obs-fold-tab", b"GET /plaintext HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n\tcontinued\r\n\r\n", 400),
    ("bare-lf-request-line", b"GET /plaintext HTTP/1.1\nHost: t\r\n\r\n", 400),
    ("bare-lf-header", b"GET /plaintext HTTP/1.1\r\nHost: t\nX: y\r\n\r\n", 400),
    ("bare-lf-only", b"GET /plaintext HTTP/1.1\nHost: t\n\n", 400),
    ("bare-lf-chunk-size", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", 400),
    ("bare-cr-header", b"GET /plaintext HTTP/1.1\r\nHost: t\r\nX: a\rb\r\n\r\n", 400),
    ("nul-in-header", b"GET /plaintext HTTP/1.1\r\nHost: t\r\nX: a\x00b\r\n\r\n", 400),
    ("space-before-colon", b"GET /plaintext HTTP/1.1\r\nHost : t\r\n\r\n", 400),
    ("http2", b"GET /plaintext HTTP/2.0\r\nHost: t\r\n\r\n", 505),
    ("http3", b"GET /plaintext HTTP/3.0\r\nHost: t\r\n\r\n", 505),
    ("bad-version", b"GET /plaintext HTTX/1.1\r\nHost: t\r\n\r\n", 400),
    ("garbage", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),
    ("missing-host", b"GET /plaintext HTTP/1.1\r\n\r\n", 400),
    ("two-hosts", b"GET /plaintext HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ("double-space", b"GET  /plaintext HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("relative-target", b"GET plaintext HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("te-unknown", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
    ("te-not-final-chunked", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400),
    ("te-twice", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("te-http10", b"POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("bad-chunk-size", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n", 400),
    ("chunk-data-overrun", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", 400),
    ("chunk-size-overflow", b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                            b"fffffffffffffffffff\r\n", 400),
]


@pytest.mark.parametrize("raw,status", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_request_gets_status_and_close(server, raw, status):
    with server.connect() as s:
        try:
            s.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass
        rd = Reader(s)
        r = rd.read_response()
        assert r.status == status, r
        assert r.header("Connection") == "close"
        assert r.body.strip()  # a short reason
        assert rd.at_eof()
    # the server is still fine
    assert request(server, get("/plaintext")).body == b"Hello, World!"


def test_bad_request_after_good_pipelined_ones(server):
    with server.connect() as s:
        s.sendall(get("/plaintext") + get("/json") + b"GET / HTTP/1.1\r\nHost: t\r\nX: a\r\n b\r\n\r\n"
                  + get("/plaintext"))
        rd = Reader(s)
        assert rd.read_response().status == 200
        assert rd.read_response().status == 200
        assert rd.read_response().status == 400
        assert rd.at_eof()


def test_smuggling_attempt_is_not_split_into_two_requests(server):
    # classic CL.TE: if anything accepted this, "GET /admin" would be answered
    raw = (b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"0\r\n\r\nGET /hello/smuggled HTTP/1.1\r\nHost: t\r\n\r\n")
    with server.connect() as s:
        s.sendall(raw)
        rd = Reader(s)
        assert rd.read_response().status == 400
        assert rd.at_eof()


def test_invalid_requests_are_counted(server):
    request(server, b"GET / HTTP/9.9\r\nHost: t\r\n\r\n")
    body = request(server, get("/metrics")).body.decode()
    assert 'route="<invalid>",method="OTHER",status_class="5xx"' in body
