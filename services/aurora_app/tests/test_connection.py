"""Keep-alive, pipelining, split reads, Connection: close, HTTP/1.0."""
import time

from rawhttp import Reader, get


def test_keep_alive_many_requests(server):
    with server.connect() as s:
        rd = Reader(s)
        for i in range(200):
            s.sendall(get(f"/hello/n{i}"))
            r = rd.read_response()
            assert r.status == 200 and r.body == f"Hello, n{i}!".encode()
            assert r.header("Connection") is None


def test_pipelining_answers_in_order(server):
    paths = [f"/hello/p{i}" if i % 3 else "/json" for i in range(300)]
    raw = b"".join(get(p) for p in paths)
    raw += b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nlast"
    with server.connect() as s:
        s.sendall(raw)
        rd = Reader(s)
        for p in paths:
            r = rd.read_response()
            expected = b'{"message":"Hello, World!"}' if p == "/json" else f"Hello, {p[7:]}!".encode()
            assert r.body == expected
        assert rd.read_response().body == b"last"


def test_pipelined_large_responses_with_backpressure(server):
    # ~33 MB of responses requested at once while the client does not read:
    # the server must stop and resume without losing or reordering anything
    n = 1200
    with server.connect(timeout=20) as s:
        s.sendall(b"".join(get("/json-large") if i % 2 else get(f"/hello/{i}") for i in range(n)))
        time.sleep(0.3)
        rd = Reader(s)
        for i in range(n):
            r = rd.read_response()
            if i % 2:
                assert r.body.startswith(b'[{"id":1,') and r.body.endswith(b"}]")
            else:
                assert r.body == f"Hello, {i}!".encode()


def test_request_split_across_reads(server):
    raw = b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello world" + get("/plaintext")
    with server.connect() as s:
        for b in raw:
            s.sendall(bytes([b]))
            time.sleep(0.001)
        rd = Reader(s)
        assert rd.read_response().body == b"hello world"
        assert rd.read_response().body == b"Hello, World!"


def test_chunked_body_split_across_reads(server):
    body = b"3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n"
    raw = b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    with server.connect() as s:
        for i in range(0, len(raw), 3):
            s.sendall(raw[i:i + 3])
            time.sleep(0.002)
        r = Reader(s).read_response()
        assert r.status == 200 and r.body == b"abc0123456789abcdef"


def test_large_body_over_many_reads(server):
    payload = bytes(range(256)) * 2048  # 512 KiB
    with server.connect(timeout=20) as s:
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
        r = Reader(s).read_response()
        assert r.status == 200 and r.body == payload


def test_connection_close_is_honoured(server):
    with server.connect() as s:
        s.sendall(get("/plaintext", extra="Connection: close\r\n") + get("/json"))
        rd = Reader(s)
        r = rd.read_response()
        assert r.body == b"Hello, World!" and r.header("Connection") == "close"
        assert rd.at_eof()  # the pipelined /json is not answered


def test_http10_closes_unless_keep_alive(server):
    with server.connect() as s:
        s.sendall(b"GET /plaintext HTTP/1.0\r\n\r\n")
        rd = Reader(s)
        assert rd.read_response().status == 200
        assert rd.at_eof()
    with server.connect() as s:
        s.sendall(b"GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" * 2)
        rd = Reader(s)
        assert rd.read_response().status == 200
        assert rd.read_response().status == 200


def test_leading_empty_lines_are_skipped(server):
    with server.connect() as s:
        s.sendall(b"\r\n\r\n" + get("/plaintext"))
        assert Reader(s).read_response().body == b"Hello, World!"


def test_many_workers_serve(make_server):
    srv = make_server(workers=2)
    for _ in range(20):
        with srv.connect() as s:
            s.sendall(get("/plaintext"))
            assert Reader(s).read_response().status == 200


def test_interleaved_partial_requests_on_many_connections(server):
    # partial requests are kept per connection while other connections are served
    conns = [server.connect() for _ in range(5)]
    try:
        reqs = [b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 8\r\n\r\nconn-%d-x" % i
                + get(f"/hello/c{i}") for i in range(5)]
        cut = [len(r) // 3 for r in reqs]
        for s, r, c in zip(conns, reqs, cut):
            s.sendall(r[:c])
        other = server.connect()  # a whole request on another connection in between
        other.sendall(get("/plaintext"))
        assert Reader(other).read_response().body == b"Hello, World!"
        other.close()
        for s, r, c in reversed(list(zip(conns, reqs, cut))):
            s.sendall(r[c:2 * c])
            time.sleep(0.01)
        for i, (s, r, c) in enumerate(zip(conns, reqs, cut)):
            s.sendall(r[2 * c:])
            rd = Reader(s)
            assert rd.read_response().body == b"conn-%d-x" % i
            assert rd.read_response().body == f"Hello, c{i}!".encode()
    finally:
        for s in conns:
            s.close()


def test_request_and_fin_in_one_segment_is_answered_then_closed(server):
    """A request and the client's FIN that arrive together (one wake-up): the request is answered and the
    connection closed at once, not left in CLOSE_WAIT until the idle timeout."""
    import socket
    import time
    for _ in range(3):
        with server.connect() as s:
            # corked: shutdown() tacks the FIN onto the unsent request segment
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            s.sendall(get("/plaintext"))
            s.shutdown(socket.SHUT_WR)
            start = time.monotonic()
            rd = Reader(s)
            r = rd.read_response()
            assert r.status == 200 and r.body == b"Hello, World!"
            assert rd.at_eof(timeout=5)
            assert time.monotonic() - start < 2.0


def test_request_then_fin_pipelined_requests_all_answered(server):
    import socket
    with server.connect() as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        s.sendall(get("/plaintext") * 3 + get("/json"))
        s.shutdown(socket.SHUT_WR)
        rd = Reader(s)
        assert [rd.read_response().status for _ in range(4)] == [200] * 4
        assert rd.at_eof(timeout=5)


def test_http10_keep_alive_is_announced(server):
    with server.connect() as s:
        s.sendall(b"GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        rd = Reader(s)
        r = rd.read_response()
        assert r.status == 200 and r.header("Connection") == "keep-alive"
        s.sendall(b"GET /json HTTP/1.0\r\n\r\n")  # no keep-alive: closed after the answer
        r = rd.read_response()
        assert r.status == 200 and r.header("Connection") == "close"
        assert rd.at_eof()
    # HTTP/1.1 keep-alive stays implicit
    with server.connect() as s:
        s.sendall(get("/plaintext"))
        assert Reader(s).read_response().header("Connection") is None


def test_fin_after_requests_with_blocked_output_closes_once_written(server):
    """The FIN arrives while the responses do not fit the socket: they are all written, then the
    connection is closed (not kept until the idle timeout)."""
    import socket
    with server.connect() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        s.sendall(get("/json-large") * 40)  # ~2.2 MB of responses
        s.shutdown(socket.SHUT_WR)
        time.sleep(0.5)  # the server's writes block meanwhile
        rd = Reader(s)
        for _ in range(40):
            assert rd.read_response().status == 200
        assert rd.at_eof(timeout=5)
