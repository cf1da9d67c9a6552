"""The request path allocates nothing on the GC heap.

The worker's GC allocated-bytes counter (GC.allocatedInCurrentThread, exposed in
/metrics) must not move across 20,000 requests after warm-up, whatever the
endpoint, body framing, pipelining or errors.
"""
from rawhttp import Reader, get, metric_value

MIX = [
    get("/plaintext"),
    get("/json"),
    get("/json-large"),
    get("/hello/gc"),
    get("/healthz"),
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
                assert r.status in (200, 404, 405)
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
