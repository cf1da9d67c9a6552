"""End to end: the real server in a subprocess, over real sockets - granian through RSGI (the default),
granian through ASGI, and uvicorn + httptools + uvloop (ASGI)."""
import re
import time

import httpx
import orjson
import pytest

from server_util import raw_request, running_server, status_of

from aquilia_app.app import HTML_ROWS, JSON_LARGE, JSON_SMALL, STREAM_CHUNK


SERVERS = {
    "granian-rsgi": ("--server", "granian", "--interface", "rsgi"),
    "granian-asgi": ("--server", "granian", "--interface", "asgi"),
    "uvicorn": ("--server", "uvicorn"),
}


@pytest.fixture(scope="module", params=list(SERVERS))
def server(request):
    with running_server("--workers", "1", *SERVERS[request.param]) as (port, proc):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            yield port, client, proc


def test_ping(server):
    _, c, _ = server
    r = c.get("/ping")
    assert r.status_code == 200 and r.text == "pong" and r.headers["content-type"].startswith("text/plain")


def test_json_small_and_large(server):
    _, c, _ = server
    r = c.get("/json")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json() == JSON_SMALL and 150 <= len(r.content) <= 260
    r = c.get("/json-large")
    assert r.json() == JSON_LARGE and len(r.json()) == 1000 and 35_000 <= len(r.content) <= 45_000


def test_html(server):
    _, c, _ = server
    r = c.get("/html")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "&lt;script&gt;" in r.text and "<script>" not in r.text  # autoescaped
    assert r.text.count("<tr><td>") == len(HTML_ROWS)


def test_stream(server):
    _, c, _ = server
    with c.stream("GET", "/stream") as r:
        assert r.status_code == 200 and r.headers.get("transfer-encoding") == "chunked"
        body = b"".join(r.iter_bytes())
    assert body == STREAM_CHUNK * 10 and len(STREAM_CHUNK) == 1024
    t = time.monotonic()
    r = c.get("/stream", params={"delay": "10"})
    assert r.content == STREAM_CHUNK * 10 and time.monotonic() - t >= 0.09
    for bad, status in (("abc", 422), ("-1", 400), ("5000", 400), ("nan", 422)):  # not a number: 422
        r = c.get("/stream", params={"delay": bad})
        assert r.status_code == status and r.headers["content-type"] == "application/problem+json", bad


def test_healthz_and_head(server):
    _, c, _ = server
    assert c.get("/healthz").json() == {"status": "ok"}
    r = c.head("/ping")
    assert r.status_code == 200 and r.content == b""


def test_items_crud(server):
    _, c, _ = server
    r = c.post("/items", content=b'{"name":"widget","price":9.5,"tags":["a","b"]}')
    assert r.status_code == 201
    item = r.json()
    assert item["name"] == "widget" and item["tags"] == ["a", "b"]
    assert r.headers["location"] == f"/items/{item['id']}"
    assert c.get(r.headers["location"]).json() == item
    for i in range(5):
        c.post("/items", json={"name": f"gadget {i}", "price": i})
    r = c.get("/items", params={"min_price": 2, "limit": 2})
    body = r.json()
    assert body["total"] == 4 and [x["price"] for x in body["items"]] == [9.5, 2.0]
    r = c.get("/items", params={"name": "gadget", "limit": 2, "offset": 2})
    assert [x["name"] for x in r.json()["items"]] == ["gadget 2", "gadget 3"]
    r = c.put(f"/items/{item['id']}", json={"name": "widget 2", "price": 1})
    assert r.status_code == 200 and c.get(f"/items/{item['id']}").json()["name"] == "widget 2"
    assert c.delete(f"/items/{item['id']}").status_code == 204
    assert c.get(f"/items/{item['id']}").status_code == 404
    assert c.delete(f"/items/{item['id']}").status_code == 404
    assert c.put(f"/items/{item['id']}", json={"name": "x", "price": 1}).status_code == 404


def test_metrics_endpoint(server):
    _, c, _ = server
    for _ in range(3):
        c.get("/json")
    time.sleep(1.2)
    text = c.get("/metrics").text
    assert 'http_server_request_duration_seconds_bucket{le="2.5e-05",method="GET",route="/json",service="aquilia_app",status_class="2xx"}' in text
    assert 'route="/items/{id:int|min=1}"' in text  # the template, never the raw path
    assert "/items/1\"" not in text
    assert 'perfkit_hotpath_duration_seconds' in text


# -- bad input: every case with its exact status ---------------------------------------------

@pytest.mark.parametrize("data,status", [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /ping HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400),
    (b"GET /ping HTTP/9.9\r\nHost: x\r\n\r\n", 400),
    (b"GET /ping HTTP/1.1\r\nBad Header\r\n\r\n", 400),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40, 400),  # a TLS hello on plain HTTP
])
def test_malformed_http_is_400(server, data, status):
    port, c, _ = server
    assert status_of(raw_request(port, data)) == status
    assert c.get("/ping").status_code == 200  # still serving


def test_oversized_headers_431(server):
    port, c, _ = server
    raw = raw_request(port, b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\nConnection: close\r\n\r\n")
    assert status_of(raw) == 431 and b"application/problem+json" in raw
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(150))
    assert status_of(raw_request(port, b"GET /ping HTTP/1.1\r\nHost: x\r\n" + many + b"Connection: close\r\n\r\n")) == 431


def test_oversized_body_413(server):
    port, c, _ = server
    big = b'{"name":"' + b"a" * (1 << 20) + b'","price":1}'
    r = c.post("/items", content=big)
    assert r.status_code == 413 and r.json()["status"] == 413
    # declared length over the limit: refused before reading the body
    raw = raw_request(port, b"POST /items HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\nConnection: close\r\n\r\n")
    assert status_of(raw) == 413

    def chunks():
        for _ in range(40):
            yield b"x" * 65536
    r = c.post("/items", content=chunks())  # chunked, no Content-Length
    assert r.status_code == 413
    # the body was left unread, so the server will not reuse this connection: the answer must say so,
    # or the client sends its next request into a closing socket ("Server disconnected")
    assert r.headers.get("connection") == "close"
    for _ in range(3):
        assert c.post("/items", content=b"{", headers={"content-type": "application/json"}).status_code == 400


@pytest.mark.parametrize("body,status,title", [
    (b'{"name":', 400, "Bad Request"),
    (b"not json", 400, "Bad Request"),
    (b"", 400, "Bad Request"),
    (b'{"name":"\xff","price":1}', 400, "Bad Request"),  # a string that is not UTF-8
    (b'{"name":"a","price":1,"tags":["\xc3"]}', 400, "Bad Request"),
    (b'{"name":"","price":1}', 422, "Unprocessable Content"),
    (b'{"name":"a","price":-1}', 422, "Unprocessable Content"),
    (b'{"name":"a","price":"1"}', 422, "Unprocessable Content"),
    (b'{"name":"a","price":1,"evil":true}', 422, "Unprocessable Content"),
    (b'[1,2]', 422, "Unprocessable Content"),
    (b'{"name":"a","price":1,"tags":"x"}', 422, "Unprocessable Content"),
])
def test_invalid_json_400_and_validation_422_problem(server, body, status, title):
    _, c, _ = server
    r = c.post("/items", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status
    assert r.headers["content-type"] == "application/problem+json"
    p = orjson.loads(r.content)
    assert p["status"] == status and p["title"] == title


@pytest.mark.parametrize("path,status", [
    ("/items/abc", 404), ("/items/0", 404), ("/items/-1", 404), ("/items/1.5", 404), ("/items/99999999", 404),
    ("/items/1/extra", 404), ("/nope", 404), ("/", 404), ("/ping/x", 404), ("/%00", 404),
    ("/items/" + "9" * 5000, 404), ("/items/-" + "9" * 5000, 404),  # more digits than int() converts
    ("/items?limit=abc", 422), ("/items?limit=1000", 400), ("/items?offset=-3", 400),
    ("/items?min_price=cheap", 422),
])
def test_wrong_path_and_query_types(server, path, status):
    _, c, _ = server
    r = c.get(path)
    assert r.status_code == status, path
    assert r.headers["content-type"] == "application/problem+json"


def test_a_trailing_slash_redirects_to_the_route(server):
    _, c, _ = server
    r = c.get("/ping/?a=1")
    assert r.status_code == 307 and r.headers["location"] == "/ping?a=1"
    assert c.get("//ping/").status_code == 404  # never a Location that names another host


def _unmatched_4xx(metrics_text: str) -> float:
    m = re.search(r'http_server_request_duration_seconds_count\{method="GET",route="<unmatched>",'
                  r'service="aquilia_app",status_class="4xx"\} ([0-9.]+)', metrics_text)
    return float(m.group(1)) if m else 0.0


def test_path_int_too_long_to_convert_is_a_counted_404(server):
    _, c, _ = server
    before = _unmatched_4xx(c.get("/metrics").text)  # each scrape flushes the counts first
    r = c.get("/items/" + "1" * 5000)
    assert r.status_code == 404 and r.json()["status"] == 404
    assert r.headers["content-type"] == "application/problem+json"
    assert _unmatched_4xx(c.get("/metrics").text) == before + 1


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_an_id_beyond_sqlites_integers_is_404_not_500(server, method):
    _, c, _ = server
    for id_ in ("9223372036854775808", "9" * 4000):  # past 2**63 - 1: sqlite3 cannot bind it
        r = c.request(method, f"/items/{id_}", json={"name": "x", "price": 1} if method == "PUT" else None)
        assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json", (method, id_[:20])
    r = c.get("/items", params={"offset": str(1 << 63)})
    assert r.status_code == 400 and r.json()["status"] == 400
    assert c.get("/items", params={"offset": str((1 << 63) - 1)}).json()["items"] == []


def test_wrong_method_405_with_allow(server):
    _, c, _ = server
    r = c.patch("/items/1")
    assert r.status_code == 405 and r.headers["allow"] == "DELETE, GET, HEAD, PUT"
    r = c.post("/ping")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
    raw = raw_request(server[0], b"BREW /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status_of(raw) in (400, 405)


def test_server_survived_everything(server):
    _, c, proc = server
    assert proc.poll() is None
    assert c.get("/ping").text == "pong"
