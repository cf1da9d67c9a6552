"""Controllers, binding, middleware order and responses, through the ASGI interface (in process)."""
import asyncio
import time

import httpx
import msgspec
import orjson
import pytest

from aquilia_app import (App, BadRequest, Body, Container, Controller, ASGIMiddleware, MissingDependency, REQUEST,
                         Request, Response, RouteConflict, StreamingResponse, get, post)
from aquilia_app.responses import json_bytes, problem


def run(coro):
    return asyncio.run(coro)


async def call(app, method, url, **kw):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        return await c.request(method, url, **kw)


class Greeting:
    def __init__(self):
        self.word = "hello"


class Counter:
    created = 0

    def __init__(self):
        Counter.created += 1


class Payload(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    n: int


class Greeter(Controller):
    prefix = "/greet"

    def __init__(self, g: Greeting, c: Counter):
        self.g = g

    @get("/{who:slug}", name="greet")
    async def hello(self, who: str, times: int = 1, loud: bool = False):
        s = " ".join([f"{self.g.word} {who}"] * times)
        return s.upper() if loud else s

    @post("/echo", status=201)
    def echo(self, body: Payload, request: Request):
        return {"name": body.name, "n": body.n, "path": request.path}

    @post("/nums")
    async def nums(self, body: Body[list[int]]):
        return {"sum": sum(body)}

    @get("/need")
    async def need(self, q: int):
        return {"q": q}


def make_app():
    c = Container()
    c.register(Greeting)
    c.register(Counter, scope=REQUEST)
    app = App(container=c, max_body_size=64)
    app.controller(Greeter)

    @app.get("/boom")
    async def boom():
        raise RuntimeError("kaboom")

    @app.get("/bad")
    async def bad():
        raise BadRequest("nope")

    @app.get("/stream")
    async def stream():
        async def gen():
            for i in range(3):
                yield f"{i};"
        return StreamingResponse(gen())

    @app.get("/none")
    async def none():
        return None

    return app


def test_controller_constructor_injection_and_query_binding():
    app = make_app()
    r = run(call(app, "GET", "/greet/bob?times=2&loud=true"))
    assert r.status_code == 200 and r.text == "HELLO BOB HELLO BOB"
    assert r.headers["content-type"].startswith("text/plain")
    before = Counter.created
    run(call(app, "GET", "/greet/al"))
    assert Counter.created == before + 1  # request-scoped dependency -> controller per request
    assert app.url_for("greet", who="x-y") == "/greet/x-y"


def test_query_validation_errors_are_422_problem():
    app = make_app()
    r = run(call(app, "GET", "/greet/bob?times=abc"))
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
    assert "times" in r.json()["detail"]
    r = run(call(app, "GET", "/greet/need"))
    assert r.status_code == 422 and "required" in r.json()["detail"]


def test_json_body_struct_validation():
    app = make_app()
    r = run(call(app, "POST", "/greet/echo", content=b'{"name":"a","n":3}'))
    assert r.status_code == 201 and r.json() == {"name": "a", "n": 3, "path": "/greet/echo"}
    r = run(call(app, "POST", "/greet/echo", content=b'{"name":"a","n":"x"}'))
    assert r.status_code == 422 and r.json()["title"] == "Unprocessable Content"
    r = run(call(app, "POST", "/greet/echo", content=b'{"name":'))
    assert r.status_code == 400 and "malformed JSON" in r.json()["detail"]
    r = run(call(app, "POST", "/greet/echo", content=b''))
    assert r.status_code == 400
    r = run(call(app, "POST", "/greet/echo", content=b'{"name":"a","n":1,"extra":1}'))
    assert r.status_code == 422
    r = run(call(app, "POST", "/greet/nums", content=b'[1,2,3]'))
    assert r.json() == {"sum": 6}


def test_a_json_string_that_is_not_utf8_is_400_through_request_decode():
    app = App()

    @app.post("/decode")
    async def decode(request: Request):
        return await request.decode(Payload)

    r = run(call(app, "POST", "/decode", content=b'{"name":"\xff","n":1}'))
    assert r.status_code == 400 and "malformed JSON" in r.json()["detail"]
    r = run(call(app, "POST", "/decode", content=b'{"name":"a","n":1}'))
    assert r.json() == {"name": "a", "n": 1}


def test_body_limit_413():
    app = make_app()
    r = run(call(app, "POST", "/greet/echo", content=b'{"name":"' + b"a" * 100 + b'","n":1}'))
    assert r.status_code == 413 and r.headers["content-type"] == "application/problem+json"


def test_errors_and_special_results():
    app = make_app()
    r = run(call(app, "GET", "/boom"))
    assert r.status_code == 500 and r.json()["status"] == 500 and "kaboom" not in r.text
    assert run(call(app, "GET", "/bad")).status_code == 400
    assert run(call(app, "GET", "/none")).status_code == 204
    r = run(call(app, "GET", "/stream"))
    assert r.text == "0;1;2;"
    r = run(call(app, "DELETE", "/greet/bob"))
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
    assert run(call(app, "GET", "/greet/b%20b")).status_code == 404  # slug rejects a space


def test_missing_dependency_rejected_at_startup():
    class Unknown:
        pass

    class C(Controller):
        def __init__(self, u: Unknown):
            pass

        @get("/c")
        async def c(self):
            return "x"

    app = App()
    app.controller(C)
    with pytest.raises(MissingDependency):
        app.compile()


def test_ambiguous_routes_rejected_at_startup():
    app = App()

    @app.get("/x/{a:int}")
    async def a(a: int):
        return "a"

    @app.get("/x/{b:int}")
    async def b(b: int):
        return "b"

    with pytest.raises(RouteConflict):
        app.compile()


def test_middleware_sorted_once_by_priority():
    order = []
    built = []

    def mw(tag):
        class M(ASGIMiddleware):
            def __init__(self, app, **opts):
                super().__init__(app, **opts)
                built.append(tag)

            async def __call__(self, scope, receive, send):
                if scope["type"] == "http":
                    order.append(tag)

                    async def send2(msg):
                        if msg["type"] == "http.response.start":
                            msg["headers"] = list(msg["headers"]) + [(b"x-mw", tag.encode())]
                        await send(msg)
                    return await self.app(scope, receive, send2)
                return await self.app(scope, receive, send)
        return M

    app = App()

    @app.get("/")
    async def root():
        return "ok"

    app.add_middleware(mw("late"), priority=50)
    app.add_middleware(mw("first"), priority=10)
    app.add_middleware(mw("second"), priority=10)
    assert [m.__name__ for m in app.middleware.order()] == ["M", "M", "M"]
    r = run(call(app, "GET", "/"))
    run(call(app, "GET", "/"))
    assert order == ["first", "second", "late"] * 2
    assert built == ["late", "second", "first"]  # built once, inside out
    assert r.headers.get_list("x-mw") == ["late", "second", "first"]
    with pytest.raises(RuntimeError):
        app.add_middleware(mw("too late"))


def test_responses_prepare_headers_once_and_keep_bytes():
    r = Response.json({"a": [1, 2]}, 201, {"X-Test": "1"})
    assert r.body == b'{"a":[1,2]}' and r.status == 201
    assert r.raw_headers == [(b"content-type", b"application/json"), (b"content-length", b"11"), (b"x-test", b"1")]
    assert isinstance(r.body, bytes)
    p = problem(404, "Not Found", "x")
    assert p.header("content-type") == "application/problem+json"

    class S(msgspec.Struct):
        x: int
    assert json_bytes(S(1)) == b'{"x":1}'
    assert json_bytes({"s": S(2)}) == b'{"s":{"x":2}}'
    with pytest.raises(ValueError):
        Response(b"", headers={"x": "a\r\nb"})
    with pytest.raises(TypeError):
        json_bytes(object())
    import datetime
    import decimal
    # what orjson leaves out, as msgspec writes it: a Decimal as an exact string, a timedelta in ISO 8601
    assert json_bytes({"d": decimal.Decimal("1.50"), "t": datetime.timedelta(seconds=90), "set": {3}}) == \
        b'{"d":"1.50","t":"PT90S","set":[3]}'


def test_rsgi_headers_share_one_list_per_type_and_leave_content_length_to_granian():
    from aquilia_app.application import _closing
    from aquilia_app.responses import CT_JSON, StreamingResponse
    from aquilia_app.rsgi import response_headers

    a, b = Response(b"{}", 200, None, CT_JSON), Response(b"[1]", 200, None, CT_JSON)
    assert response_headers(a) == [("content-type", "application/json")]
    assert response_headers(a) is response_headers(b)  # shared: nothing built per response
    assert a._raw is None  # and the ASGI byte pairs were never built
    r = Response.json({"a": 1}, 201, {"Location": "/x"})
    assert response_headers(r) == [("content-type", "application/json"), ("location", "/x")]
    assert response_headers(Response(b"", 200, None, "image/png")) == [("content-type", "image/png")]
    s = StreamingResponse(iter([b"x"]), headers={"x-a": "1"})
    assert response_headers(s) == [("content-type", "text/plain; charset=utf-8"), ("x-a", "1")]
    c = _closing(r)  # an error answered before the body was read: keeps the headers, adds close
    assert c.raw_headers[2:] == [(b"location", b"/x"), (b"connection", b"close")] and r.extra == [(b"location", b"/x")]
    assert response_headers(c)[-1] == ("connection", "close")


def test_lifespan_starts_and_tears_down_providers():
    events = []

    class Res:
        pass

    async def res():
        events.append("open")
        yield Res()
        events.append("close")

    c = Container()
    c.register(Res, res)
    app = App(container=c)

    @app.get("/r")
    async def r(x: Res):
        return {"ok": isinstance(x, Res)}

    async def main():
        inbox = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
        sent = []

        async def receive():
            return inbox.pop(0)

        async def send(msg):
            sent.append(msg["type"])
            if msg["type"] == "lifespan.startup.complete":
                assert events == ["open"]
                r = await call(app, "GET", "/r")
                assert r.json() == {"ok": True}

        entry = app.asgi()
        await entry({"type": "lifespan"}, receive, send)
        return sent

    assert run(main()) == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert events == ["open", "close"]


def test_a_lifespan_context_wraps_the_app_after_the_startup_hooks():
    from contextlib import asynccontextmanager

    from aquilia_app.testclient import TestClient
    events = []

    @asynccontextmanager
    async def lifespan(app):
        events.append(("enter", app.__class__.__name__))
        yield
        events.append("exit")

    app = App(lifespan=lifespan)
    app.on_startup(lambda: events.append("startup hook"))
    app.on_shutdown(lambda: events.append("shutdown hook"))

    @app.get("/events")
    async def seen():
        return list(events)

    with TestClient(app) as client:
        assert client.get("/events").json() == ["startup hook", ["enter", "App"]]
    assert events == ["startup hook", ("enter", "App"), "exit", "shutdown hook"]


def test_request_state_starts_from_the_lifespan_state_and_carries_middleware_values():
    """Starlette's lifespan state and request.state: each request gets its own copy of what the
    lifespan yielded; a middleware's values reach the handler; app.state is the app's own."""
    from contextlib import asynccontextmanager

    from aquilia_app import Middleware
    from aquilia_app.testclient import TestClient

    @asynccontextmanager
    async def lifespan(app):
        yield {"db": "the-db", "hits": 0}

    class Auth(Middleware):
        async def __call__(self, request, call_next):
            request.state.user = request.header("x-user", "anonymous")
            return await call_next(request)

    app = App(lifespan=lifespan)
    app.add_middleware(Auth())
    app.on_startup(lambda: setattr(app.state, "name", "shop"))

    @app.get("/who")
    async def who(request: Request):
        request.state.hits += 1  # this request's copy only
        return {"user": request.state.user, "db": request.state.db, "hits": request.state.hits,
                "app": request.app.state.name, "has_cart": "cart" in request.state}

    with TestClient(app) as client:
        for _ in range(2):
            assert client.get("/who", headers={"x-user": "ada"}).json() == \
                {"user": "ada", "db": "the-db", "hits": 1, "app": "shop", "has_cart": False}
    assert app.lifespan_state is None  # gone with the run


def test_request_state_and_session_from_pure_asgi_middleware():
    """As in Starlette, ``request.state`` holds what a pure-ASGI middleware put in ``scope["state"]``,
    and ``request.session`` is Starlette's ``SessionMiddleware``'s (``scope["session"]``)."""
    from starlette.middleware.sessions import SessionMiddleware as StarletteSessions

    from aquilia_app.testclient import TestClient

    class SetUser(ASGIMiddleware):
        async def __call__(self, scope, receive, send):
            scope.setdefault("state", {})["user"] = "ada"
            await self.app(scope, receive, send)

    app = App()
    app.add_middleware(StarletteSessions, secret_key="s" * 32)
    app.add_middleware(SetUser)

    @app.post("/login")
    async def login(request: Request):
        request.session["user"] = request.state.user
        return {"ok": True}

    @app.get("/me")
    async def me(request: Request):
        return {"session": dict(request.session), "state_user": request.state.user}

    with TestClient(app) as client:
        assert client.post("/login").json() == {"ok": True}
        assert client.get("/me").json() == {"session": {"user": "ada"}, "state_user": "ada"}


def test_request_state_without_a_lifespan_and_a_missing_attribute():
    from aquilia_app.testclient import TestClient

    app = App(debug=True)

    @app.get("/state")
    async def state(request: Request):
        request.state.x = 1
        return {"x": request.state.x}

    @app.get("/missing")
    async def missing(request: Request):
        return request.state.nothing

    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/state").json() == {"x": 1}
        r = client.get("/missing")
        assert r.status_code == 500 and "state has no attribute 'nothing'" in r.text


def test_a_lifespan_that_yields_something_else_than_a_mapping_fails_the_startup():
    from contextlib import asynccontextmanager

    from aquilia_app.testclient import TestClient
    exited = []

    @asynccontextmanager
    async def lifespan(app):
        try:
            yield ["not", "a", "mapping"]
        finally:
            exited.append(True)

    with pytest.raises(RuntimeError, match="yields a mapping"):
        with TestClient(App(lifespan=lifespan)):
            pass
    assert exited == [True]


def test_failed_startup_is_reported():
    async def broken():
        raise RuntimeError("no database")

    c = Container()
    c.register(Greeting, broken)
    app = App(container=c)

    async def main():
        inbox = [{"type": "lifespan.startup"}]
        sent = []

        async def receive():
            return inbox.pop(0)

        async def send(msg):
            sent.append(msg)
        await app({"type": "lifespan"}, receive, send)
        return sent

    (msg,) = run(main())
    assert msg["type"] == "lifespan.startup.failed" and "no database" in msg["message"]


# -- robustness: the in-process halves of test_robustness.py ----------------------------------------

async def asgi_request(app, method, path, chunks, *, complete=True, on_receive=None):
    """Call the ASGI app directly with the body in ``chunks``; with ``complete=False`` the client
    never sends the rest.  Returns (status, {header: value}, body) as bytes."""
    pending = list(chunks)
    scope = {"type": "http", "method": method, "path": path, "query_string": b"",
             "headers": [(b"content-length", b"%d" % (sum(map(len, chunks)) + (0 if complete else 100)))]}
    out = {}

    async def receive():
        if not pending:
            await asyncio.Event().wait()  # a client that stopped sending
        chunk = pending.pop(0)
        if on_receive is not None:
            on_receive(chunk)
        return {"type": "http.request", "body": chunk, "more_body": bool(pending) or not complete}

    async def send(msg):
        if msg["type"] == "http.response.start":
            out["status"], out["headers"] = msg["status"], dict(msg["headers"])
        else:
            out["body"] = out.get("body", b"") + msg.get("body", b"")

    await app(scope, receive, send)
    return out["status"], out["headers"], out["body"]


def test_body_is_read_before_request_scoped_providers():
    events = []

    class Conn:
        pass

    async def conn():
        events.append("provider")
        yield Conn()

    class Uploads(Controller):
        def __init__(self, c: Conn):
            pass

        @post("/ctl")
        async def ctl(self, body: Payload):
            return {"n": body.n}

    c = Container()
    c.register(Conn, conn, scope=REQUEST)
    app = App(container=c)
    app.controller(Uploads)

    @app.post("/fn")
    async def fn(c: Conn, body: Payload):  # the dependency comes first in the signature
        return {"n": body.n}

    for path in ("/ctl", "/fn"):
        events.clear()
        status, _, body = run(asgi_request(app, "POST", path, [b'{"name":"a",', b'"n":2}'],
                                           on_receive=lambda chunk: events.append("body")))
        assert status == 200 and body == b'{"n":2}'
        assert events == ["body", "body", "provider"], path  # no pooled resource held during an upload


def test_body_timeout_is_408_problem_and_closes():
    app = App(body_timeout=0.2)

    @app.post("/echo")
    async def echo(body: Payload):
        return {"n": body.n}

    t = time.monotonic()
    status, headers, body = run(asgi_request(app, "POST", "/echo", [b'{"na'], complete=False))
    assert status == 408 and headers[b"content-type"] == b"application/problem+json"
    assert headers[b"connection"] == b"close" and b"0.2 s" in body
    assert 0.15 <= time.monotonic() - t < 2
    with pytest.raises(ValueError):
        App(body_timeout=-1)


def test_a_streamed_body_has_the_body_timeout_and_is_read_once():
    app = App(body_timeout=0.2)
    seen = []

    @app.post("/count")
    async def count(request: Request):
        async for chunk in request.stream():
            seen.append(chunk)
        with pytest.raises(RuntimeError):
            await request.body()  # streamed to its end: not kept
        return {"n": len(seen)}

    t = time.monotonic()
    status, headers, body = run(asgi_request(app, "POST", "/count", [b"ab", b"cd"], complete=False))
    assert status == 408 and b"0.2 s" in body and seen == [b"ab", b"cd"]
    assert 0.15 <= time.monotonic() - t < 2
    seen.clear()
    status, _, body = run(asgi_request(app, "POST", "/count", [b"ab", b"cd"]))
    assert status == 200 and orjson.loads(body) == {"n": 2} and seen == [b"ab", b"cd"]


def test_pool_acquire_timeout_is_503_problem_with_retry_after(tmp_path):
    from aquilia_app.db import Connection, SQLitePool

    async def main():
        gate = asyncio.Event()

        async def pool():
            p = await SQLitePool(str(tmp_path / "t.sqlite3"), 1, acquire_timeout=0.2).open()
            yield p
            await p.close()

        async def conn(p: SQLitePool):
            cn = await p.acquire()
            try:
                yield cn
            finally:
                p.release(cn)

        c = Container()
        c.register(SQLitePool, pool)
        c.register(Connection, conn, scope=REQUEST)
        app = App(container=c)

        @app.get("/hold")
        async def hold(cn: Connection):
            await cn.fetchone("SELECT 1 AS n")  # the first read takes the pool's only connection
            await gate.wait()
            return {"held": True}

        @app.get("/one")
        async def one(cn: Connection):
            return await cn.fetchone("SELECT 1 AS n")

        await app.startup()
        holder = asyncio.create_task(call(app, "GET", "/hold"))
        await asyncio.sleep(0.05)  # /hold has the only connection
        t = time.monotonic()
        busy = await asyncio.wait_for(call(app, "GET", "/one"), 5)
        waited = time.monotonic() - t
        gate.set()
        held = await holder
        again = await call(app, "GET", "/one")  # the connection went back to the pool
        await app.shutdown()
        return busy, waited, held, again

    busy, waited, held, again = run(main())
    assert busy.status_code == 503 and busy.headers["content-type"] == "application/problem+json"
    assert busy.headers["retry-after"] == "1" and busy.json()["status"] == 503
    assert 0.15 <= waited < 2
    assert held.json() == {"held": True} and again.json() == {"n": 1}


def test_rsgi_headers_of_a_response_subclass():
    from aquilia_app.rsgi import response_headers

    class Greeting(Response):
        def __init__(self, who):
            super().__init__(f"hello {who}", 200, [("x-greeting", who)])

    # granian is given the whole body and sets Content-Length itself: a second one would break the answer
    assert response_headers(Greeting("bob")) == [("content-type", "text/plain; charset=utf-8"), ("x-greeting", "bob")]


# -- the return annotation as the response model (FastAPI's response_model) ---------------------------
def test_a_model_return_annotation_shapes_and_checks_the_response():
    import dataclasses
    from typing import AsyncIterator, TypedDict

    import msgspec

    from aquilia_app import App, Response
    from aquilia_app.testclient import TestClient

    class UserOut(msgspec.Struct):
        id: int
        name: str

    @dataclasses.dataclass
    class Row:  # an ORM-like object: read through its attributes
        id: int
        name: str
        password: str

    class Count(TypedDict):
        n: int

    app = App(debug=True)

    @app.get("/user", status=201)
    async def user() -> UserOut:
        return {"id": 1, "name": "ada", "password": "secret"}  # the extra field is left out

    @app.get("/rows")
    async def rows() -> list[UserOut]:
        return [Row(2, "bo", "secret")]

    @app.get("/count")
    async def count() -> Count:
        return {"n": "3"}  # not an int: refused, never sent

    @app.get("/custom")
    async def custom() -> UserOut:
        return Response.text("as given", 202)  # a response passes as it is

    @app.get("/maybe")
    async def maybe() -> UserOut | None:
        return None

    @app.get("/plain")
    async def plain() -> dict:
        return {"kept": True, "extra": 1}  # not a model: as returned

    @app.get("/stream")
    async def stream() -> AsyncIterator[str]:
        async def gen():
            yield "a"
        return gen()

    @app.get("/generator")
    async def generator():  # an async generator handler: streamed
        yield "x"
        yield b"y"

    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.get("/user")
        assert (r.status_code, r.json()) == (201, {"id": 1, "name": "ada"})
        assert client.get("/rows").json() == [{"id": 2, "name": "bo"}]
        r = client.get("/count")
        assert r.status_code == 500 and "does not match its return annotation" in r.json()["detail"]
        r = client.get("/custom")
        assert (r.status_code, r.text) == (202, "as given")
        assert client.get("/maybe").status_code == 204
        assert client.get("/plain").json() == {"kept": True, "extra": 1}
        assert client.get("/stream").text == "a"
        assert client.get("/generator").text == "xy"


def test_a_parameter_an_optional_part_leaves_out_is_none_in_the_handler():
    """``/posts[/{page:int}]``: the variant without the parameter is a static path; the handler still
    gets ``page=None`` (README: "a parameter that is left out is None"), never a 500."""
    app = App()

    @app.get("/posts[/{page:int}]")
    async def posts(page: int | None):
        return {"page": page}

    @app.get("/a[/{x}]/b")
    async def middle(request: Request, x: str | None = None):
        return {"x": x, "params": request.path_params}

    r = run(call(app, "GET", "/posts"))
    assert r.status_code == 200 and r.json() == {"page": None}
    assert run(call(app, "GET", "/posts/3")).json() == {"page": 3}
    assert run(call(app, "HEAD", "/posts")).status_code == 200
    assert run(call(app, "GET", "/a/b")).json() == {"x": None, "params": {"x": None}}
    assert run(call(app, "GET", "/a/z/b")).json() == {"x": "z", "params": {"x": "z"}}


def test_a_controllers_middleware_attribute_runs_around_each_of_its_routes():
    """``class Admin(Controller): middleware = [...]`` (Litestar's controller attribute): around every route of
    the class (and of a subclass), outside the route's own, inside ``app.controller(..., middleware=)``;
    never silently ignored (an auth middleware there must not be skipped)."""
    from aquilia_app import Middleware

    class Mark(Middleware):
        def __init__(self, name):
            self.name = name

        async def __call__(self, request, call_next):
            resp = await call_next(request)
            return resp.with_headers([("x-chain", f"{self.name}>{resp.header('x-chain') or ''}")], replace=True)

    class Admin(Controller):
        prefix = "/admin"
        middleware = [Mark("class")]

        @get("/a", middleware=[Mark("route")])
        async def a(self):
            return "a"

    class SubAdmin(Admin):
        prefix = "/sub"

    app = App()
    app.controller(Admin, middleware=[Mark("group")])
    app.controller(SubAdmin)
    assert run(call(app, "GET", "/admin/a")).headers["x-chain"] == "group>class>route>"
    assert run(call(app, "GET", "/sub/a")).headers["x-chain"] == "class>route>"


def test_the_reference_apps_location_keeps_the_root_path(tmp_path):
    """Behind ``--root-path /api`` the app's URLs hold the root path (README, "Root path"): so does the
    ``Location`` of ``POST /items``, which the client follows to the new item."""
    from aquilia_app.app import create_app

    app = create_app(str(tmp_path / "items.db"), metrics=False)

    async def main():
        await app.startup()
        try:
            transport = httpx.ASGITransport(app=app, root_path="/api")
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                r = await c.post("/api/items", json={"name": "a", "price": 1})
                assert r.status_code == 201 and r.headers["location"] == f"/api/items/{r.json()['id']}"
                assert (await c.get(r.headers["location"])).json() == r.json()
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
                r = await c.post("/items", json={"name": "b", "price": 2})
                assert r.headers["location"] == f"/items/{r.json()['id']}"
        finally:
            await app.shutdown()
    run(main())


@pytest.mark.parametrize("name,value", [("AQUILIA_APP_BODY_TIMEOUT", "-1"), ("AQUILIA_APP_BODY_TIMEOUT", "nan"),
                                        ("AQUILIA_APP_MAX_BODY", "-5"), ("AQUILIA_APP_POOL", "abc")])
def test_the_reference_app_refuses_a_bad_setting_by_name(tmp_path, monkeypatch, name, value):
    """A bad AQUILIA_APP_* value stops the worker with a message naming the variable (as the CLI's
    options are refused), never a traceback from deep inside App()."""
    from aquilia_app.app import create_app

    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit, match=name):
        create_app(str(tmp_path / "items.db"), metrics=False)


def test_url_for_finds_an_unnamed_route_by_its_handler_name():
    """As Starlette names routes after their endpoint (``request.url_for("read_item", item_id=1)``): a
    given name wins, then the first route whose handler has that name; a controller method by its name."""
    from aquilia_app import Controller, get
    from aquilia_app.routing import URLBuildError
    from aquilia_app.testclient import TestClient

    app = App()

    @app.get("/items/{item_id:int}")
    async def read_item(request: Request, item_id: int):
        return {"self": request.url_for("read_item", item_id=item_id), "other": request.url_for("listed")}

    @app.get("/named", name="listed")
    async def list_items():
        return []

    @app.get("/again/{item_id:int}")
    async def read_item_again(item_id: int):  # another function: its own name
        return {}

    class Users(Controller):
        prefix = "/users"

        @get("/{uid:int}")
        async def show(self, uid: int):
            return {}

    app.controller(Users)
    with TestClient(app) as client:
        assert client.get("/items/7").json() == {"self": "http://testserver/items/7",
                                                 "other": "http://testserver/named"}
    assert app.url_for("show", uid=3) == "/users/3"
    assert app.url_for("read_item_again", item_id=1) == "/again/1"
    with pytest.raises(URLBuildError):
        app.url_for("list_items")  # named otherwise: the given name only
