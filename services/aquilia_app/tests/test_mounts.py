"""ASGI apps mounted under a prefix (mounts.py) and an app served under a root path: in process, then on
the wire (granian RSGI and ASGI, uvicorn) with mount_app.py: a raw ASGI app, a Starlette app,
prometheus-client's ASGI app and another App, over HTTP and WebSockets."""
import asyncio
import hashlib
import os

import httpx
import orjson
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

import mount_app
from aquilia_app import App, Request, Response, WebSocketDisconnect
from aquilia_app.cors import CORSMiddleware
from aquilia_app.metrics import Metrics
from aquilia_app.middleware import Middleware
from aquilia_app.testclient import TestClient, WebSocketRejected
from server_util import raw_request, running_server, status_of

EVERY_SERVER = {"granian-rsgi": ("--interface", "rsgi"), "granian-asgi": ("--interface", "asgi"),
                "uvicorn": ("--server", "uvicorn")}


def _app_mounting(sub, *middleware) -> App:
    app = App()
    for mw in middleware:
        app.add_middleware(mw)
    app.mount("/sub", sub)
    return app


# -- what mount accepts ------------------------------------------------------------------------------
def test_mount_tells_an_asgi_app_from_a_handler_and_refuses_anything_else():
    async def handler(request, path):
        return Response.text(f"handled {path}")

    app = App()
    app.mount("/h", handler)
    app.mount("/a", mount_app.report)
    with TestClient(app) as client:
        r = client.get("/h/x")
        assert (r.status_code, r.text) == (200, "handled x")
        assert client.post("/h/x").status_code == 405  # a handler mount serves GET and HEAD
        assert client.post("/a/x", content=b"abc").status_code == 201  # an ASGI app every method
    for bad in (lambda: None, lambda a, b, c, d: None, 42):
        with pytest.raises(TypeError, match="mount takes"):
            App().mount("/x", bad)
    with pytest.raises(ValueError):
        App().mount("/", mount_app.report)


# -- in process --------------------------------------------------------------------------------------
def test_the_mounted_app_gets_root_path_whole_path_query_and_body():
    with TestClient(_app_mounting(mount_app.report)) as client:
        body = os.urandom(5000)
        r = client.put("/sub/a%20b/c?x=1&y=2", content=body)
        assert r.status_code == 201 and r.headers["x-mounted"] == "report"
        assert r.json() == {"method": "PUT", "path": "/sub/a b/c", "root_path": "/sub", "query": "x=1&y=2",
                            "size": 5000, "sha256": hashlib.sha256(body).hexdigest()}
        assert client.get("/sub/").json()["path"] == "/sub/"
        r = client.get("/sub?q=1")  # the prefix itself: to its root, as a directory
        assert (r.status_code, r.headers["location"]) == (307, "/sub/?q=1")


def test_native_middleware_runs_around_a_mounted_app():
    cors = CORSMiddleware(allow_origins=["https://a.example"])
    with TestClient(_app_mounting(mount_app.report, cors)) as client:
        r = client.post("/sub/x", content=b"hi", headers={"origin": "https://a.example"})
        assert r.status_code == 201 and r.json()["size"] == 2
        assert r.headers["access-control-allow-origin"] == "https://a.example"
        assert r.headers["x-mounted"] == "report"  # the app's own headers kept


def test_a_body_a_middleware_already_read_is_handed_to_the_mounted_app():
    class Reader(Middleware):
        seen = None

        async def __call__(self, request, call_next):
            Reader.seen = await request.body()
            return await call_next(request)

    with TestClient(_app_mounting(mount_app.report, Reader())) as client:
        r = client.post("/sub/x", content=b"0123456789")
        assert Reader.seen == b"0123456789"
        assert r.status_code == 201 and r.json()["sha256"] == hashlib.sha256(b"0123456789").hexdigest()
        r = client.post("/sub/x")  # an empty body read before: the app gets it, and does not wait on
        assert r.status_code == 201 and r.json()["size"] == 0


def test_a_mounted_app_that_fails_or_says_nothing_gives_500():
    async def fails(scope, receive, send):
        raise RuntimeError("boom")

    async def silent(scope, receive, send):
        return None

    for sub in (fails, silent):
        with TestClient(_app_mounting(sub)) as client:
            r = client.get("/sub/x")
            assert r.status_code == 500 and r.headers["content-type"] == "application/problem+json"


def test_the_request_metrics_carry_the_mounted_apps_status():
    app = App(metrics=Metrics())
    app.mount("/sub", mount_app.report)
    with TestClient(app) as client:
        client.post("/sub/x", content=b"")
    text = app.metrics.exposition(None)[0].decode()
    assert 'method="POST",route="/sub/{path:path}",service="aquilia_app",status_class="2xx"} 1.0' in text, text


def test_an_app_mounted_in_an_app_routes_below_its_prefix():
    with TestClient(_app_mounting(mount_app.inner)) as client:
        r = client.get("/sub/items/3")
        assert r.status_code == 200
        assert r.json() == {"id": 3, "url": "http://testserver/sub/items/3", "route_path": "/items/3",
                            "self": "http://testserver/sub/items/3"}
        assert client.get("/sub/items/x").status_code == 404
        assert client.get("/items/3").status_code == 404  # only under the prefix


def test_websockets_under_the_prefix_go_to_the_mounted_app():
    with TestClient(_app_mounting(mount_app.report)) as client:
        with client.websocket_connect("/sub/a/b?x=1", subprotocols=["chat", "v2"]) as ws:
            assert ws.subprotocol == "chat"
            assert ws.receive_json() == {"path": "/sub/a/b", "root_path": "/sub", "query": "x=1",
                                         "subprotocols": ["chat", "v2"]}
            ws.send_text("hello")
            assert ws.receive_text() == "hello"
            ws.send_bytes(b"\x00\xff")
            assert ws.receive_bytes() == b"\x00\xff"
        with client.websocket_connect("/sub/") as ws:
            assert ws.receive_json()["path"] == "/sub/"
        with pytest.raises(WebSocketRejected) as refused:
            client.websocket_connect("/sub/x?refuse=1000").__enter__()
        assert refused.value.status == 403  # a close before accept
        with pytest.raises(WebSocketRejected) as missing:
            client.websocket_connect("/elsewhere").__enter__()
        assert missing.value.status == 404


def test_a_mounted_starlette_app_and_a_mounted_app_take_their_websockets():
    app = App()
    app.mount("/star", mount_app.starlette_app)
    app.mount("/inner", mount_app.inner)
    with TestClient(app) as client:
        with client.websocket_connect("/star/echo") as ws:
            ws.send_text("hi")
            assert ws.receive_json() == {"echo": "hi", "root_path": "/star",
                                         "hello_url": "http://testserver/star/hello/x"}
        with pytest.raises(WebSocketRejected) as denied:
            client.websocket_connect("/star/echo?deny=1").__enter__()
        assert denied.value.status == 403
        with client.websocket_connect("/inner/ws/7") as ws:
            ws.send_text("x")
            assert ws.receive_json() == {"n": 7, "route_path": "/ws/7", "message": "x"}
        with pytest.raises(WebSocketRejected) as bad:
            client.websocket_connect("/inner/ws/seven").__enter__()
        assert bad.value.status == 404


def test_a_mounted_websocket_app_that_fails_is_refused_or_closed_as_a_handler_would_be():
    async def fails_before_accept(scope, receive, send):
        await receive()
        raise RuntimeError("boom")

    async def fails_after_accept(scope, receive, send):
        await receive()
        await send({"type": "websocket.accept"})
        raise RuntimeError("boom")

    with TestClient(_app_mounting(fails_before_accept), raise_server_exceptions=False) as client:
        with pytest.raises(WebSocketRejected) as refused:
            client.websocket_connect("/sub/x").__enter__()
        assert refused.value.status == 500
    with TestClient(_app_mounting(fails_after_accept), raise_server_exceptions=False) as client:
        with client.websocket_connect("/sub/x") as ws:
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive()
            assert closed.value.code == 1011


def test_a_mounted_app_sending_to_a_client_that_left_gets_an_oserror():
    outcome = []

    async def pusher(scope, receive, send):
        await receive()
        await send({"type": "websocket.accept"})
        assert (await receive())["type"] == "websocket.disconnect"
        try:
            await send({"type": "websocket.send", "text": "late"})
        except OSError as e:  # what Starlette's WebSocket turns into its WebSocketDisconnect
            outcome.append(e)

    with TestClient(_app_mounting(pusher)) as client:
        with client.websocket_connect("/sub/x") as ws:
            ws.close()
    assert len(outcome) == 1


def _root_path_app() -> App:
    app = App()

    @app.get("/items/{id:int}", name="item")
    async def item(request: Request, id: int):
        return {"url": request.url, "base": request.base_url, "self": request.url_for("item", id=id)}

    @app.get("/folder/")
    async def folder():
        return "folder"

    return app


def test_an_app_under_a_server_root_path_routes_on_the_rest_of_the_path():
    """uvicorn's --root-path (and a proxy that forwards the prefix) put the root path in front of the
    path; the app routes on what follows it and builds its URLs with it."""
    async def go():
        app = _root_path_app()
        transport = httpx.ASGITransport(app, root_path="/api")
        async with httpx.AsyncClient(transport=transport, base_url="http://h.example") as client:
            r = await client.get("/api/items/7")
            assert r.status_code == 200
            assert r.json() == {"url": "http://h.example/api/items/7", "base": "http://h.example/api/",
                                "self": "http://h.example/api/items/7"}
            r = await client.get("/api/folder?x=1")  # the trailing-slash redirect keeps the root path
            assert (r.status_code, r.headers["location"]) == (307, "/api/folder/?x=1")
            assert (await client.get("/apiary/items/7")).status_code == 404  # not under the root

    asyncio.run(go())


# -- on the wire -------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=list(EVERY_SERVER))
def mounted(request):
    with running_server("--app", "mount_app:app", *EVERY_SERVER[request.param]) as (port, _):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            yield client


def test_a_mounted_app_reads_a_large_body_itself_on_a_kept_alive_connection(mounted):
    body = os.urandom(300 * 1024)  # far above the mounting app's own limit (mount_app.MAX_BODY)
    for _ in range(2):  # the second request on the same connection
        r = mounted.post("/report/up/load?k=v", content=body)
        assert r.status_code == 201, r.text
        assert r.json() == {"method": "POST", "path": "/report/up/load", "root_path": "/report", "query": "k=v",
                            "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    assert mounted.post("/healthz", content=b"x" * 10).status_code == 405
    r = mounted.post("/report/chunked", content=iter([b"a" * 1000, b"b" * 2000]))  # chunked framing
    assert r.status_code == 201 and r.json()["size"] == 3000


def test_a_raw_non_ascii_query_reaches_a_mounted_app_as_sent(mounted):
    """granian takes raw UTF-8 bytes in a query (uvicorn refuses them: 400): through RSGI the mounted app's
    scope must hold those bytes, as granian's ASGI gives them - not a 500 from the scope's encoding."""
    port = mounted.base_url.port
    for query in (b"x=\xe2\x82\xac", b"x=\xc3\xa9"):
        raw = raw_request(port, b"GET /report/q?" + query + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        if status_of(raw) == 400 and b"Invalid HTTP request" in raw:
            continue  # uvicorn's parser: not the app
        assert status_of(raw) == 201, raw[:300]
        assert orjson.loads(raw.partition(b"\r\n\r\n")[2])["query"] == query.decode()
        raw = raw_request(port, b"GET /star/where?" + query + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        assert status_of(raw) == 200, raw[:300]  # Starlette decodes the query string as UTF-8


def test_a_mounted_starlette_app_routes_and_builds_its_urls_under_the_prefix(mounted):
    assert mounted.get("/star/hello/bob").json() == {"hello": "bob"}
    r = mounted.get("/star/where")
    assert r.json() == {"path": "/star/where", "root_path": "/star",
                        "hello_url": f"{mounted.base_url}".rstrip("/") + "/star/hello/x"}
    assert mounted.get("/star/missing").status_code == 404


def test_prometheus_clients_asgi_app_serves_the_metrics_it_was_given(mounted):
    mounted.get("/healthz")
    r = mounted.get("/prom/")
    assert r.status_code == 200 and "mounted_hits_total" in r.text
    assert mounted.get("/prom", follow_redirects=False).headers["location"] == "/prom/"


def test_an_app_mounted_in_an_app_on_the_wire(mounted):
    r = mounted.get("/inner/items/5")
    assert r.status_code == 200
    doc = r.json()
    assert (doc["id"], doc["route_path"]) == (5, "/items/5") and doc["url"].endswith("/inner/items/5")
    r = mounted.get("/inner/items/nope")
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    assert orjson.loads(r.content)["status"] == 404


def _ws_url(mounted, path: str) -> str:
    return str(mounted.base_url).replace("http://", "ws://").rstrip("/") + path


def test_mounted_apps_take_their_websockets_on_the_wire(mounted):
    with connect(_ws_url(mounted, "/report/a?x=1"), open_timeout=5) as ws:
        seen = orjson.loads(ws.recv(timeout=5))
        assert (seen["path"], seen["root_path"], seen["query"]) == ("/report/a", "/report", "x=1")
        ws.send(b"\x01\x02" * 1000)
        assert ws.recv(timeout=5) == b"\x01\x02" * 1000
    with connect(_ws_url(mounted, "/star/echo"), open_timeout=5) as ws:
        ws.send("hi")
        reply = orjson.loads(ws.recv(timeout=5))
        assert (reply["echo"], reply["root_path"]) == ("hi", "/star")
        assert reply["hello_url"].endswith("/star/hello/x")
    with connect(_ws_url(mounted, "/inner/ws/9"), open_timeout=5) as ws:
        ws.send("m")
        assert orjson.loads(ws.recv(timeout=5)) == {"n": 9, "route_path": "/ws/9", "message": "m"}
    for path, status in (("/star/echo?deny=1", 403), ("/inner/ws/nine", 404), ("/nowhere", 404)):
        with pytest.raises(InvalidStatus) as refused:
            connect(_ws_url(mounted, path), open_timeout=5)
        assert refused.value.response.status_code == status, path
