"""The endpoints, HEAD, 404/405 and the response headers."""
import json
import re

import pytest

from rawhttp import Reader, get, request


def test_plaintext(server):
    r = request(server, get("/plaintext"))
    assert r.status == 200 and r.reason == "OK"
    assert r.body == b"Hello, World!"
    assert r.header("Content-Type") == "text/plain"
    assert r.header("Content-Length") == "13"
    assert r.header("Server") == "aurora"
    assert re.fullmatch(r"[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT", r.header("Date"))


def test_json(server):
    r = request(server, get("/json"))
    assert r.status == 200
    assert r.header("Content-Type") == "application/json"
    assert json.loads(r.body) == {"message": "Hello, World!"}
    assert r.body == b'{"message":"Hello, World!"}'


def test_json_large(server):
    r = request(server, get("/json-large"))
    assert r.status == 200
    items = json.loads(r.body)
    assert len(items) == 1000
    assert items[0] == {"id": 1, "name": "item-1", "active": True, "score": -500}
    assert [i["id"] for i in items] == list(range(1, 1001))
    assert int(r.header("Content-Length")) == len(r.body)


def test_healthz_and_param_route(server):
    assert request(server, get("/healthz")).body == b"ok\n"
    r = request(server, get("/hello/aurora?x=1"))
    assert r.status == 200 and r.body == b"Hello, aurora!"


def test_path_parameters_are_percent_decoded(server):
    assert request(server, get("/hello/a%20b%21")).body == b"Hello, a b!!"
    assert request(server, get("/hello/caf%C3%A9")).body == "Hello, café!".encode()
    for bad in ("/hello/%zz", "/hello/a%2", "/hello/" + "%41" * 400):  # malformed, or past the 1 KiB room
        assert request(server, get(bad)).status == 404, bad


def test_head_has_headers_but_no_body(server):
    with server.connect() as s:
        s.sendall(get("/json-large", method="HEAD") + get("/plaintext"))
        rd = Reader(s)
        head = rd.read_response(head_only=True)
        assert head.status == 200
        assert int(head.header("Content-Length")) > 20000
        # the next response follows immediately: no body bytes were sent
        nxt = rd.read_response()
        assert nxt.body == b"Hello, World!"


def test_not_found_and_method_not_allowed(server):
    r = request(server, get("/nope"))
    assert r.status == 404
    r = request(server, get("/plaintext", method="DELETE"))
    assert r.status == 405
    assert r.header("Allow") == "GET, HEAD"
    r = request(server, get("/echo"))
    assert r.status == 405 and r.header("Allow") == "POST"


def test_echo_content_length_and_chunked(server):
    r = request(server, b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
    assert r.status == 200 and r.body == b"hello"
    body = b"4\r\nWiki\r\n5;ext=x\r\npedia\r\n0\r\nTrailer: 1\r\n\r\n"
    r = request(server, b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
    assert r.status == 200 and r.body == b"Wikipedia"


def test_expect_100_continue(server):
    with server.connect() as s:
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
        interim = s.recv(100)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(b"abc")
        r = Reader(s).read_response()
        assert r.status == 200 and r.body == b"abc"


def test_metrics_exposition(server):
    request(server, get("/plaintext"))
    request(server, get("/hello/x"))
    request(server, get("/missing"))
    body = request(server, get("/metrics")).body.decode()
    h = "http_server_request_duration_seconds"
    assert f"# TYPE {h} histogram" in body
    lbl = 'service="aurora_app",route="/plaintext",method="GET",status_class="2xx"'
    assert f'{h}_bucket{{{lbl},le="2.5e-05"}}' in body
    assert f'{h}_bucket{{{lbl},le="10.0"}} 1' in body
    assert f'{h}_bucket{{{lbl},le="+Inf"}} 1' in body
    assert f"{h}_count{{{lbl}}} 1" in body
    assert 'route="/hello/:name"' in body          # the template, never the raw path
    assert 'route="<unmatched>",method="GET",status_class="4xx"' in body
    assert "route=\"/hello/x\"" not in body
    assert "# TYPE aurora_gc_allocated_bytes_total counter" in body
    assert re.search(r'^aurora_connections_open\{service="aurora_app"\} \d+$', body, re.M)
    # every sample line is "name{labels} value"
    for line in body.splitlines():
        if line and not line.startswith("#"):
            assert re.fullmatch(r'[a-z_]+(\{[^}]*\})? [0-9.e+-]+', line), line


def test_metrics_le_strings_follow_the_spec(server):
    # perfkit/metrics/SPEC.md: le written as prometheus-client writes it, so every language's series aggregate
    request(server, get("/plaintext"))
    body = request(server, get("/metrics")).body.decode()
    lbl = 'service="aurora_app",route="/plaintext",method="GET",status_class="2xx"'
    pat = r'^http_server_request_duration_seconds_bucket\{' + re.escape(lbl) + r',le="([^"]+)"\}'
    les = re.findall(pat, body, re.M)
    assert les == ["2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
                   "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf"]


def test_metrics_openmetrics_on_request(server):
    request(server, get("/plaintext"))
    accept = "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
    r = request(server, get("/metrics", extra=accept))
    assert r.status == 200
    assert r.header("Content-Type") == "application/openmetrics-text; version=1.0.0; charset=utf-8"
    body = r.body.decode()
    assert body.endswith("# EOF\n")
    # OpenMetrics names a counter family without _total; its sample keeps it
    assert "# TYPE aurora_connections_accepted counter\n" in body
    assert re.search(r'^aurora_connections_accepted_total\{service="aurora_app"\} \d+$', body, re.M)
    plain = request(server, get("/metrics"))
    assert plain.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8"
    assert "# TYPE aurora_connections_accepted_total counter\n" in plain.body.decode()
    assert "# EOF" not in plain.body.decode()


def test_no_metrics_records_nothing_per_request(make_server):
    # --no-metrics: the "off" side of a paired overhead measurement; /metrics itself still answers
    srv = make_server("--no-metrics")
    for _ in range(70):
        assert request(srv, get("/plaintext")).status == 200
    request(srv, get("/missing"))
    request(srv, b"GET / HTTP/9.9\r\nHost: t\r\n\r\n")
    body = request(srv, get("/metrics")).body.decode()
    assert "# TYPE http_server_request_duration_seconds histogram" in body
    assert "http_server_request_duration_seconds_count{" not in body
    series = _hotpath_series(body)
    assert set(series) == {"parse", "handle", "write"}
    assert all(s["count"] == 0 for s in series.values())
    assert re.search(r'^aurora_connections_accepted_total\{service="aurora_app"\} \d+$', body, re.M)
    assert "aurora_gc_allocated_bytes_total{" in body


def test_absolute_form_target(server):
    r = request(server, b"GET http://example.com/hello/abs?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n")
    assert r.status == 200 and r.body == b"Hello, abs!"


def _hotpath_series(body: str) -> dict:
    """{hotpath: {"count": n, "sum": s, "buckets": [(le, cumulative), ...]}} from the exposition."""
    out: dict = {}
    pat = re.compile(r'^perfkit_hotpath_duration_seconds_(bucket|sum|count)'
                     r'\{service="aurora_app",hotpath="([a-z_]+)"(?:,le="([^"]+)")?\} (\S+)$', re.M)
    for kind, hp, le, value in pat.findall(body):
        s = out.setdefault(hp, {"buckets": []})
        if kind == "bucket":
            s["buckets"].append((le, int(value)))
        else:
            s[kind] = float(value) if kind == "sum" else int(value)
    return out


def test_hotpath_histogram_is_sampled(server):
    # a fresh server times its first request, then one in 64 (one worker here)
    n = 130
    with server.connect() as s:
        rd = Reader(s)
        for i in range(n):
            s.sendall(get("/json" if i % 2 else "/plaintext"))
            assert rd.read_response().status == 200
    body = request(server, get("/metrics")).body.decode()
    h = "perfkit_hotpath_duration_seconds"
    assert f"# TYPE {h} histogram" in body
    series = _hotpath_series(body)
    assert set(series) == {"parse", "handle", "write"}
    for hp, s in series.items():
        # requests 1, 65 and 129 were timed; each was its own batch, so 3 writes too
        assert s["count"] == 3, (hp, s)
        assert s["sum"] > 0, (hp, s)
        les = [le for le, _ in s["buckets"]]
        assert les[0] == "2.5e-05" and les[-2] == "10.0" and les[-1] == "+Inf" and len(les) == 19
        counts = [c for _, c in s["buckets"]]
        assert counts == sorted(counts) and counts[-1] == s["count"]
    # the request histogram still counts every request
    lbl = 'service="aurora_app",route="/plaintext",method="GET",status_class="2xx"'
    assert f"http_server_request_duration_seconds_count{{{lbl}}} {n // 2}" in body


def test_hotpath_histogram_counts_pipelined_batches(server):
    # 63 pipelined requests in one send (one or a few batches) and the /metrics request:
    # only the first request is timed, and the write of the batch that holds it
    with server.connect() as s:
        s.sendall(b"".join(get("/plaintext") for _ in range(63)))
        rd = Reader(s)
        for _ in range(63):
            assert rd.read_response().body == b"Hello, World!"
    series = _hotpath_series(request(server, get("/metrics")).body.decode())
    assert series["parse"]["count"] == 1 and series["handle"]["count"] == 1
    assert series["write"]["count"] == 1


def test_hotpath_histogram_exported_before_traffic(server):
    # the /metrics request itself is the first request, so it is the one timed: its parse and
    # handle are observed before the exposition is rendered, its write only after
    series = _hotpath_series(request(server, get("/metrics")).body.decode())
    assert series["parse"]["count"] == 1 and series["handle"]["count"] == 0
    assert series["write"]["count"] == 0 and series["write"]["sum"] == 0
    series = _hotpath_series(request(server, get("/metrics")).body.decode())
    assert series["handle"]["count"] == 1 and series["write"]["count"] == 1


def _recv_some(s, timeout=1.0):
    """What the server sends within `timeout` (b"" if nothing)."""
    import socket
    s.settimeout(timeout)
    try:
        return s.recv(65536)
    except socket.timeout:
        return b""
    finally:
        s.settimeout(5)


def test_expect_100_continue_ignored_for_http10(server):
    """RFC 9110 §10.1.1: Expect: 100-continue from an HTTP/1.0 client is ignored."""
    with server.connect() as s:
        s.sendall(b"POST /echo HTTP/1.0\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
        assert _recv_some(s, 1.0) == b""  # no interim response
        s.sendall(b"abc")
        rd = Reader(s)
        r = rd.read_response()
        assert r.status == 200 and r.body == b"abc"
        assert b"100 Continue" not in rd.buf


@pytest.mark.parametrize("head,status", [
    (b"POST /missing HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n", 404),
    (b"PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n", 405),
    (b"BREW /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n", 501),
    (b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999\r\nExpect: 100-continue\r\n\r\n", 413),
    (b"POST /missing HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n", 404),
])
def test_expect_100_continue_not_sent_for_a_target_that_is_not_served(server, head, status):
    with server.connect() as s:
        s.sendall(head)
        rd = Reader(s)
        s.settimeout(3)
        data = s.recv(65536)
        assert data.startswith(b"HTTP/1.1 %d " % status), data[:40]
        rd.buf = data
        r = rd.read_response()
        assert r.status == status and r.header("Connection") == "close"
        # the body is not read as a request: the connection is closed (after a drain)
        try:
            s.sendall(b"abc")
        except OSError:
            pass
        assert rd.at_eof()
    assert request(server, get("/plaintext")).status == 200


def test_unknown_method_is_501(server):
    for method in ("BREW", "PROPFIND", "TRACE"):
        r = request(server, get("/plaintext", method=method))
        assert r.status == 501, method
        assert r.reason == "Not Implemented"
    # unknown method on an unknown path: 501 too; known methods keep 404/405
    assert request(server, get("/nowhere", method="BREW")).status == 501
    assert request(server, get("/plaintext", method="DELETE")).status == 405
    # the connection stays usable after a 501
    with server.connect() as s:
        s.sendall(get("/plaintext", method="BREW") + get("/plaintext"))
        rd = Reader(s)
        assert rd.read_response().status == 501
        assert rd.read_response().status == 200


def test_options_asterisk(server):
    r = request(server, b"OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n")
    assert r.status == 200
    allow = [m.strip() for m in r.header("Allow").split(",")]
    assert set(allow) == {"GET", "HEAD", "POST", "OPTIONS"}
    assert r.header("Content-Length") == "0" and r.body == b""
