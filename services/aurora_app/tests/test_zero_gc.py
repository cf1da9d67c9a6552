"""The request path allocates nothing on the GC heap.

The worker's GC allocated-bytes counter (GC.allocatedInCurrentThread, exposed in
/metrics) must not move across 20,000 requests after warm-up, whatever the
endpoint, body framing, pipelining or errors; nor across 1,000,000 pipelined
/plaintext and /json requests.
"""
import threading

from rawhttp import Reader, get, metric_sum, metric_value

MIX = [
    get("/plaintext"),
    get("/json"),
    get("/json-large"),
    get("/hello/gc"),
    get("/healthz"),
    get("/users/42"),                 # typed parameter, struct written as JSON
    get("/query?id=7&name=a+b%21"),   # query parameters decoded
    get("/offload?ms=0"),             # a fiber handler that waits for the offload pool
    get("/stream?n=3&size=8"),        # a chunked body, each chunk written before the next is made
    get("/api/visits", extra="Cookie: visits=41\r\nX-Request-Id: r1\r\n"),  # middleware, cookies
    b'POST /api/users HTTP/1.1\r\nHost: t\r\nContent-Length: 56\r\n\r\n'
    b'{"id":7,"name":"a\\u00e9","active":true,"scores":[1,2,3]}',      # a JSON body read into a struct
    get("/missing"),
    get("/json", method="DELETE"),
    get("/plaintext", method="HEAD"),
    b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello",
    b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    get("/metrics"),
]


def run_batch(server, n, batch=200):
    sent = 0
    with server.connect(timeout=20) as s:
        rd = Reader(s)
        while sent < n:
            reqs = [MIX[(sent + i) % len(MIX)] for i in range(min(batch, n - sent))]
            s.sendall(b"".join(reqs))
            for raw in reqs:
                r = rd.read_response(head_only=raw.startswith(b"HEAD"))
                assert r.status in (200, 201, 404, 405)
            sent += len(reqs)
    # bad requests (their own connections)
    for raw in (b"GET / HTTP/2.0\r\nHost: t\r\n\r\n", b"GET / HTTP/1.1\nHost: t\r\n\r\n"):
        with server.connect() as s:
            s.sendall(raw)
            assert Reader(s).read_response().status in (400, 505)


def test_gc_allocated_bytes_unchanged_across_requests(make_server):
    srv = make_server()
    run_batch(srv, 2000)  # warm-up
    before = metric_value(srv, "aurora_gc_allocated_bytes_total")
    run_batch(srv, 20000)
    after = metric_value(srv, "aurora_gc_allocated_bytes_total")
    assert after == before, f"GC allocated {after - before} bytes during 20,000 requests"
    assert metric_value(srv, "http_server_request_duration_seconds_count") > 0


def test_gc_allocated_bytes_unchanged_across_a_million_requests(make_server):
    """1,000,000 pipelined requests on one connection, checked by byte count: every response to the same path
    has the same length (the Date header is fixed-width), so the total length proves each one arrived."""
    srv = make_server()
    pair = get("/plaintext") + get("/json")
    with srv.connect(timeout=30) as s:
        s.sendall(pair)
        rd = Reader(s)
        first = [rd.read_response(), rd.read_response()]
        assert [r.status for r in first] == [200, 200] and first[0].body == b"Hello, World!"
    run_batch(srv, 2000)  # warm-up
    before = metric_value(srv, "aurora_gc_allocated_bytes_total")
    count_before = metric_sum(srv, "http_server_request_duration_seconds_count")
    pairs, per_send = 500_000, 500
    with srv.connect(timeout=60) as s:
        # measure one pair's response length on this connection, then stream the rest
        s.sendall(pair)
        rd = Reader(s)
        a, b = rd.read_response(), rd.read_response()
        assert a.status == b.status == 200
        s.sendall(pair)
        buf = b""
        while buf.count(b"HTTP/1.1 200") < 2 or not buf.endswith(b"}"):
            buf += s.recv(65536)
        pair_len = len(buf)
        left = pairs - 2
        expected = left * pair_len
        sender = threading.Thread(target=lambda: [s.sendall(pair * per_send) for _ in range(left // per_send)]
                                  + [s.sendall(pair * (left % per_send))])
        sender.start()
        got, tail = 0, b""
        while got < expected:
            chunk = s.recv(1 << 20)
            assert chunk, f"connection closed after {got} of {expected} bytes"
            got += len(chunk)
            tail = (tail + chunk)[-64:]
        sender.join()
        assert got == expected and tail.endswith(b'{"message":"Hello, World!"}')
    after = metric_value(srv, "aurora_gc_allocated_bytes_total")
    count_after = metric_sum(srv, "http_server_request_duration_seconds_count")
    assert count_after - count_before >= 2 * pairs  # every request was served (and counted)
    assert after == before, f"GC allocated {after - before} bytes during {2 * pairs:,} requests"
