"""aquilia_app.testclient: the synchronous in-process client (HTTP through httpx, lifespan, streaming
responses, WebSockets) against ws_app.py and small apps of its own."""
import asyncio
import contextlib
import threading
import time

import httpx
import pytest

import ws_app
from aquilia_app import App, Request, Response, ValidationFailed
from aquilia_app.testclient import TestClient, WebSocketRejected
from aquilia_app.websockets import WebSocketDisconnect


def _http_app() -> App:
    app = App()

    @app.get("/hello")
    async def hello(name: str = "world"):
        return {"hello": name}

    @app.post("/echo", status=201)
    async def echo(request: Request):
        return {"got": await request.json(), "type": request.header("content-type")}

    @app.get("/login")
    async def login():
        return Response.json({"ok": True}).set_cookie("sid", "abc123")

    @app.get("/whoami")
    async def whoami(request: Request):
        return {"sid": request.cookies.get("sid")}

    @app.get("/old")
    async def old():
        return Response.redirect("/hello?name=moved", 307)

    @app.get("/fail")
    async def fail():
        raise RuntimeError("handler bug")

    @app.get("/slow")
    async def slow():
        await __import__("asyncio").sleep(30)

    return app


# -- HTTP -----------------------------------------------------------------------------------------

def test_get_post_json_and_query():
    with TestClient(_http_app()) as client:
        r = client.get("/hello", params={"name": "ada lovelace"})
        assert r.status_code == 200 and r.json() == {"hello": "ada lovelace"}
        r = client.post("/echo", json={"a": [1, 2]})
        assert r.status_code == 201 and r.json() == {"got": {"a": [1, 2]}, "type": "application/json"}
        assert client.get("/nope").status_code == 404


@pytest.mark.parametrize("raw,seen", [("a%2520b", "a%20b"), ("%252e%252e", "%2e%2e"), ("100%25", "100%"),
                                       ("caf%C3%A9", "caf\u00e9"), ("a%2Fb", "a/b")])
def test_the_path_is_percent_decoded_once(raw, seen):
    """As every server decodes it (uvicorn, granian: ``%2520`` is ``%20``, never a space)."""
    app = App()

    @app.get("/echo/{rest:path}")
    async def echo(request: Request, rest: str):
        return {"rest": rest, "path": request.path}

    with TestClient(app) as client:
        assert client.get(f"/echo/{raw}").json() == {"rest": seen, "path": f"/echo/{seen}"}


def test_cookies_are_kept_across_requests():
    with TestClient(_http_app()) as client:
        assert client.get("/whoami").json() == {"sid": None}
        r = client.get("/login")
        assert "sid=abc123" in r.headers["set-cookie"]
        assert client.get("/whoami").json() == {"sid": "abc123"}


def test_redirects_are_not_followed_unless_asked():
    with TestClient(_http_app()) as client:
        r = client.get("/old")
        assert r.status_code == 307 and r.headers["location"] == "/hello?name=moved"
        r = client.get("/old", follow_redirects=True)
        assert r.status_code == 200 and r.json() == {"hello": "moved"}
    with TestClient(_http_app(), follow_redirects=True) as client:
        assert client.get("/old").json() == {"hello": "moved"}


def test_a_failing_handler_is_a_500_problem():
    with TestClient(_http_app()) as client:
        r = client.get("/fail")
        assert r.status_code == 500 and r.headers["content-type"] == "application/problem+json"


def test_an_app_that_never_answers_times_out():
    with TestClient(_http_app(), timeout=0.3) as client:
        t0 = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            client.get("/slow")
        assert time.monotonic() - t0 < 5
        assert client.get("/hello").status_code == 200  # and the client still works


def test_exceptions_escaping_the_app():
    async def broken(scope, receive, send):
        if scope["type"] == "lifespan":
            return  # no lifespan support: the client goes on without it
        raise ValueError("the ASGI app itself failed")

    with TestClient(broken) as client:
        with pytest.raises(ValueError, match="itself failed"):
            client.get("/")
    with TestClient(broken, raise_server_exceptions=False) as client:
        assert client.get("/").status_code == 500


# -- lifespan ---------------------------------------------------------------------------------------

def test_lifespan_runs_startup_and_shutdown():
    ws_app.STARTED.clear()
    client = TestClient(ws_app.build())
    with client:
        assert ws_app.STARTED == ["startup"]
        assert client.get("/healthz").json() == {"status": "ok"}
    assert ws_app.STARTED == ["startup", "shutdown"]


def test_each_with_block_is_a_run_of_its_own():
    """A module-level app under a test fixture that opens ``with TestClient(app)`` per test: every block
    runs the start-up and shutdown hooks and the lifespan again, and gets fresh singletons."""
    from aquilia_app import Container

    class Pool:
        made = 0

        def __init__(self):
            Pool.made += 1
            self.number = Pool.made

    events = []
    c = Container()
    c.register(Pool)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        events.append("lifespan in")
        yield
        events.append("lifespan out")

    app = App(container=c, lifespan=lifespan)
    app.on_startup(lambda: events.append("startup"))
    app.on_shutdown(lambda: events.append("shutdown"))

    @app.get("/pool")
    async def pool(p: Pool):
        return {"pool": p.number}

    seen = []
    for _ in range(2):
        with TestClient(app) as client:
            seen.append(client.get("/pool").json()["pool"])
    assert events == ["startup", "lifespan in", "lifespan out", "shutdown"] * 2
    assert seen == [1, 2]  # a new Pool for the second run


def test_a_request_after_shutdown_does_not_start_the_app_again():
    events = []
    app = App()
    app.on_startup(lambda: events.append("startup"))

    @app.get("/")
    async def home():
        return "hi"

    with TestClient(app):
        pass

    async def request_after_shutdown():
        sent = []

        async def receive():
            return {"type": "http.request", "body": b""}

        async def send(msg):
            sent.append(msg)

        scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""}
        await app(scope, receive, send)
        return sent[0]["status"]

    assert asyncio.run(request_after_shutdown()) == 200  # served (a server still draining), not restarted
    assert events == ["startup"]


def test_a_failed_startup_raises():
    app = App()

    @app.on_startup
    def explode():
        raise RuntimeError("no database")

    with pytest.raises(RuntimeError, match="startup failed: RuntimeError: no database"):
        with TestClient(app):
            pass


def test_without_with_the_app_starts_on_first_request():
    ws_app.STARTED.clear()
    client = TestClient(ws_app.build())
    try:
        assert client.get("/healthz").status_code == 200
        assert ws_app.STARTED == ["startup"]
    finally:
        client.close()


# -- streaming --------------------------------------------------------------------------------------

def test_a_finite_stream_is_read_whole():
    with TestClient(ws_app.build()) as client:
        r = client.get("/stream", params={"n": 5, "tag": "tc-finite"})
        assert r.text == "".join(f"chunk {i}\n" for i in range(5))
    assert ws_app.EVENTS["tc-finite"] == ["stream end"]


def test_an_endless_stream_yields_chunks_as_they_come_and_stops_when_closed():
    with TestClient(ws_app.build()) as client:
        with client.stream("GET", "/stream", params={"tag": "tc-endless"}) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            t0 = time.monotonic()
            got = [next(lines) for _ in range(3)]
            assert got == ["chunk 0", "chunk 1", "chunk 2"]
            assert time.monotonic() - t0 < 2  # one chunk every 20 ms: not waiting for an end
        # closing the response told the app the client left: its generator was closed
        assert ws_app.EVENTS["tc-endless"] == ["stream end"]
        assert client.get("/healthz").status_code == 200


def test_requests_from_several_threads():
    with TestClient(_http_app()) as client:
        results = []

        def worker(i):
            results.append(client.get("/hello", params={"name": str(i)}).json()["hello"])

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results, key=int) == [str(i) for i in range(8)]


# -- WebSockets -------------------------------------------------------------------------------------

def test_websocket_round_trip():
    with TestClient(ws_app.build()) as client:
        with client.websocket_connect("/ws/text", subprotocols=["chat.v2", "chat.v1"]) as ws:
            assert ws.subprotocol == "chat.v2" and ws.headers["x-ws"] == "yes"
            ws.send_text("hello")
            assert ws.receive_text() == "hello"
        with client.websocket_connect("/ws/bytes") as ws:
            ws.send_bytes(b"\x00\xff")
            assert ws.receive_bytes() == b"\x00\xff"
        with client.websocket_connect("/ws/json") as ws:
            ws.send_json({"a": 1})
            assert ws.receive_json() == {"got": {"a": 1}}
            for i in range(500):  # many, in order
                ws.send_json(i)
            assert [ws.receive_json()["got"] for _ in range(500)] == list(range(500))


def test_websocket_parameters_cookies_and_di_teardown():
    with TestClient(ws_app.build(), cookies={"flavor": "lemon"}) as client:
        url = "/ws/rooms/9?tag=tc-room&name=bob"
        with client.websocket_connect(url, headers={"x-token": "tk"}) as ws:
            hello = ws.receive_json()
            ws.send_text("hey")
            assert ws.receive_text() == "bob@9: hey"
            assert ws_app.EVENTS["tc-room"] == ["handler start"]
        assert hello["room"] == 9 and hello["name"] == "bob" and hello["token"] == "tk"
        assert hello["flavor"] == "lemon"
        # leaving the block closed the socket and waited for the app: the request scope is torn down
        assert ws_app.EVENTS["tc-room"] == ["handler start", "handler end", "session closed"]


def test_rejected_handshakes_raise_websocket_rejected():
    with TestClient(ws_app.build()) as client:
        for path, status in [("/ws/nowhere", 404), ("/ws/rooms/x?tag=a", 404), ("/ws/private", 401),
                             ("/ws/refuse", 403), ("/ws/boom-early", 500)]:
            with pytest.raises(WebSocketRejected) as info:
                with client.websocket_connect(path):
                    pass
            assert info.value.status == status, path
        assert info.value.headers["content-type"] == "application/problem+json"
        with pytest.raises(WebSocketRejected) as info:
            with client.websocket_connect("/ws/private"):
                pass
        assert info.value.json()["detail"] == "a valid x-token header is required"
        with pytest.raises(WebSocketRejected) as info:  # a parameter that does not bind: as for HTTP
            with client.websocket_connect("/ws/small"):
                pass
        assert info.value.status == ValidationFailed("x").status
        assert info.value.json()["errors"][0]["loc"] == ["query", "tag"]


def test_server_side_closes_raise_websocket_disconnect(caplog):
    with TestClient(ws_app.build()) as client:
        cases = [("/ws/small?tag=tc-small", lambda ws: ws.send_bytes(b"x" * (ws_app.SMALL_LIMIT + 1)),
                  (1009, f"message over {ws_app.SMALL_LIMIT} bytes")),
                 ("/ws/boom?tag=tc-boom", lambda ws: ws.send_text("go"), (1011, "internal error")),
                 ("/ws/policy", lambda ws: ws.send_text("go"), (1008, "not allowed in this room")),
                 ("/ws/text", lambda ws: ws.send_bytes(b"binary"), (1003, "expected a text message, got a binary one")),
                 ("/ws/json", lambda ws: ws.send_text("{oops"), (1007, None))]
        for path, act, (code, reason) in cases:
            with client.websocket_connect(path) as ws:
                act(ws)
                with pytest.raises(WebSocketDisconnect) as info:
                    ws.receive()
                assert info.value.code == code, path
                assert reason is None or info.value.reason == reason, path
                with pytest.raises(WebSocketDisconnect):  # and it stays closed
                    ws.receive_text()
        with client.websocket_connect("/ws/leave") as ws:
            assert ws.receive_text() == "bye"
            with pytest.raises(WebSocketDisconnect) as info:
                ws.receive_text()
            assert info.value.code == 1000
    assert ws_app.EVENTS["tc-small"] == ["small end"] and ws_app.EVENTS["tc-boom"] == ["raising"]
    logged = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert logged == ["error in WebSocket handler /ws/boom"]  # 1011 is logged; 1008, 1009... are not


def test_closing_the_session_ends_a_pushing_handler():
    with TestClient(ws_app.build()) as client:
        with client.websocket_connect("/ws/push?tag=tc-push") as ws:
            assert [ws.receive_text() for _ in range(3)] == ["0", "1", "2"]
        assert ws_app.EVENTS["tc-push"] == ["push end"]


def test_a_silent_app_times_out_instead_of_hanging():
    with TestClient(ws_app.build()) as client:
        with client.websocket_connect("/ws/text", timeout=0.2) as ws:
            with pytest.raises(TimeoutError):
                ws.receive_text()


def test_a_head_response_has_headers_and_no_body():
    with TestClient(_http_app()) as client:
        get, head = client.get("/hello"), client.head("/hello")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == get.headers["content-length"] == str(len(get.content))


@pytest.mark.parametrize("where", ["hook", "lifespan"])
def test_a_failed_shutdown_is_reported_after_every_step_ran(where):
    """As Starlette: a shutdown hook or lifespan exit that raises is reported to the server
    (``lifespan.shutdown.failed``), so ``TestClient`` raises at the end of its block; the other hooks and
    the providers' teardowns still run."""
    from aquilia_app import Container

    events = []

    async def pool():
        yield "pool"
        events.append("pool closed")

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        events.append("lifespan out")
        if where == "lifespan":
            raise RuntimeError("lifespan exit failed")

    c = Container()
    c.register(str, pool)
    app = App(container=c, lifespan=lifespan)

    @app.on_shutdown
    def first_registered():
        events.append("last hook")

    @app.on_shutdown
    def second_registered():
        if where == "hook":
            raise RuntimeError("flush failed")

    with pytest.raises(RuntimeError, match="shutdown failed: RuntimeError: (flush|lifespan exit) failed"):
        with TestClient(app):
            pass
    assert events == ["lifespan out", "last hook", "pool closed"]


def test_one_client_runs_several_with_blocks_and_serves_between_them():
    """As Starlette's TestClient: a module-level ``client = TestClient(app)`` used as ``with client:`` by
    every test runs start-up and shutdown each time, keeps its cookies, and serves requests outside."""
    events = []
    app = _http_app()
    app.on_startup(lambda: events.append("startup"))
    app.on_shutdown(lambda: events.append("shutdown"))
    client = TestClient(app)
    with client:
        assert client.get("/login").status_code == 200
    with client as again:
        assert again is client
        assert client.get("/whoami").json() == {"sid": "abc123"}
    assert events == ["startup", "shutdown"] * 2
    assert client.get("/hello").json() == {"hello": "world"}
    client.close()


def test_a_file_response_made_without_the_request_answers_ranges_and_conditionals(tmp_path):
    """``return FileResponse(path)`` as a Starlette app writes it: the app gives it the request before
    sending, so Range, If-None-Match and HEAD are honoured; a response with its own status is left as it is."""
    from aquilia_app.files import FileResponse

    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)) * 4)
    app = App()

    @app.get("/data")
    async def data():
        return FileResponse(str(path))

    @app.get("/created")
    async def created():
        return FileResponse(str(path), status=201)

    with TestClient(app) as client:
        r = client.get("/data", headers={"range": "bytes=10-19"})
        assert (r.status_code, r.content, r.headers["content-range"]) == (206, bytes(range(10, 20)), "bytes 10-19/1024")
        etag = client.get("/data").headers["etag"]
        assert client.get("/data", headers={"if-none-match": etag}).status_code == 304
        r = client.head("/data")
        assert (r.status_code, r.content, r.headers["content-length"]) == (200, b"", "1024")
        r = client.get("/created", headers={"range": "bytes=0-0"})
        assert r.status_code == 201 and len(r.content) == 1024



def test_an_exception_raised_after_the_whole_response_is_raised_in_the_test():
    # Starlette's ServerErrorMiddleware sends its 500, then re-raises: the test sees the exception
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 500, "headers": []})
        await send({"type": "http.response.body", "body": b"Internal Server Error"})
        raise ValueError("boom after the response")

    with pytest.raises(ValueError, match="boom after"):
        TestClient(app).get("/")
    r = TestClient(app, raise_server_exceptions=False).get("/")
    assert (r.status_code, r.text) == (500, "Internal Server Error")



def test_requests_see_the_lifespan_state_of_an_asgi_app():
    # as Starlette's TestClient: the lifespan scope's "state", copied into each request's scope
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route, WebSocketRoute

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield {"db": "conn"}

    async def home(request):
        seen, request.state.mine = hasattr(request.state, "mine"), 1  # a copy per request
        return JSONResponse({"db": request.state.db, "mine": seen})

    async def ws(websocket):
        await websocket.accept()
        await websocket.send_text(websocket.state.db)
        await websocket.close()

    app = Starlette(lifespan=lifespan, routes=[Route("/", home), WebSocketRoute("/ws", ws)])
    with TestClient(app) as client:
        assert client.get("/").json() == {"db": "conn", "mine": False}
        assert client.get("/").json() == {"db": "conn", "mine": False}
        with client.websocket_connect("/ws") as s:
            assert s.receive_text() == "conn"



def test_websocket_json_modes_and_raw_send_as_starlette():
    from starlette.applications import Starlette
    from starlette.routing import WebSocketRoute

    async def ws(websocket):
        await websocket.accept()
        got = await websocket.receive_json(mode="binary")
        await websocket.send_json({"echo": got}, mode="binary")
        raw = await websocket.receive_text()
        await websocket.send_json({"raw": raw})
        await websocket.close()

    app = Starlette(routes=[WebSocketRoute("/ws", ws)])
    with TestClient(app) as client, client.websocket_connect("/ws") as s:
        s.send_json({"a": 1}, mode="binary")
        assert s.receive_json(mode="binary") == {"echo": {"a": 1}}
        s.send({"type": "websocket.receive", "text": "hi"})
        assert s.receive_json() == {"raw": "hi"}



def test_root_path_argument_as_starlette():
    app = App()

    @app.get("/where", name="where")
    async def where(request: Request):
        return {"root": request.scope["root_path"], "url": request.url_for("where")}

    with TestClient(app, root_path="/api") as client:
        assert client.get("/where").json() == {"root": "/api", "url": "http://testserver/api/where"}



def test_websocket_connect_takes_params_and_cookies_as_starlette():
    from starlette.applications import Starlette
    from starlette.routing import WebSocketRoute

    async def ws(websocket):
        await websocket.accept()
        await websocket.send_json({"q": dict(websocket.query_params), "c": websocket.cookies})
        await websocket.close()

    app = Starlette(routes=[WebSocketRoute("/ws", ws)])
    with TestClient(app) as client, client.websocket_connect("/ws?a=1", params={"b": "2"}, cookies={"k": "v"}) as s:
        got = s.receive_json()
    assert got["c"] == {"k": "v"} and got["q"]["b"] == "2"
