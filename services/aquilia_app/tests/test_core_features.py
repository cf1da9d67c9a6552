"""The application core: native middleware (order, short-circuit, errors, both front ends), exception
handlers by type and status, background tasks after the response, ``mount``."""
import asyncio

import httpx
import pytest

from aquilia_app import (App, BackgroundTasks, Container, HTTPException, Middleware, NotFound, REQUEST, Request,
                         Response)

pytestmark = pytest.mark.asyncio


async def call(app, method, path, **kw):
    await app.startup()
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            return await c.request(method, path, **kw)
    finally:
        await app.shutdown()


class Tag(Middleware):
    def __init__(self, name, log):
        self.name, self.log = name, log

    async def __call__(self, request, call_next):
        self.log.append(f"in {self.name} {request.route is not None}")
        resp = await call_next(request)
        self.log.append(f"out {self.name} {request.route.pattern if request.route else None}")
        return resp.with_headers([("x-" + self.name, "1")])


async def test_native_middleware_runs_in_priority_order_around_routing():
    log = []
    app = App()
    app.add_middleware(Tag("inner", log), priority=50)
    app.add_middleware(Tag, priority=10, name="outer", log=log)

    @app.get("/items/{id:int}")
    async def item(id: int):
        return {"id": id}

    r = await call(app, "GET", "/items/3")
    assert r.status_code == 200 and r.json() == {"id": 3}
    assert r.headers["x-outer"] == "1" and r.headers["x-inner"] == "1"
    assert log == ["in outer False", "in inner False", "out inner /items/{id:int}", "out outer /items/{id:int}"]
    log.clear()
    r = await call(app, "GET", "/nowhere")  # a miss goes through the chain too
    assert r.status_code == 404 and r.headers["x-outer"] == "1"
    assert log[-1] == "out outer None"


async def test_a_shared_response_is_not_mutated_by_middleware():
    shared = Response(b"same", 200)
    app = App()
    app.add_middleware(Tag("a", []))

    @app.get("/s")
    async def s():
        return shared

    for _ in range(3):
        r = await call(app, "GET", "/s")
        assert r.headers.get_list("x-a") == ["1"]
    assert shared.extra is None


async def test_middleware_may_answer_itself_and_its_errors_become_problems():
    class Gate(Middleware):
        async def __call__(self, request, call_next):
            if request.header("x-block"):
                return Response(b"blocked", 403)
            if request.header("x-boom"):
                raise RuntimeError("middleware bug")
            if request.header("x-teapot"):
                raise HTTPException(418, "short and stout")
            return await call_next(request)

    app = App()
    app.add_middleware(Gate())
    ran = []

    @app.get("/x")
    async def x():
        ran.append(1)
        return "ok"

    assert (await call(app, "GET", "/x", headers={"x-block": "1"})).status_code == 403
    r = await call(app, "GET", "/x", headers={"x-boom": "1"})
    assert r.status_code == 500 and r.headers["content-type"] == "application/problem+json"
    r = await call(app, "GET", "/x", headers={"x-teapot": "1"})
    assert r.status_code == 418 and r.json()["detail"] == "short and stout"
    assert ran == []
    assert (await call(app, "GET", "/x")).text == "ok"


async def test_middleware_options_go_to_the_class_not_an_instance():
    app = App()
    with pytest.raises(TypeError, match="constructor"):
        app.add_middleware(Tag("a", []), name="b")


class Boom(Exception):
    pass


class BiggerBoom(Boom):
    pass


async def test_exception_handlers_by_class_most_specific_first_and_by_status():
    app = App()

    @app.exception_handler(Boom)
    async def on_boom(request, exc):
        return Response.json({"handled": "boom", "path": request.path}, 409)

    @app.exception_handler(BiggerBoom)
    def on_bigger(request, exc):  # a plain function works too
        return Response.json({"handled": "bigger"}, 410)

    @app.exception_handler(404)
    async def on_404(request, exc):
        return Response.text(f"nothing at {request.path}", 404)

    @app.exception_handler(405)
    async def on_405(request, exc):
        return Response.text("allow: " + ",".join(exc.allow), 405)

    @app.get("/boom")
    async def boom():
        raise Boom()

    @app.get("/bigger")
    async def bigger():
        raise BiggerBoom()

    @app.get("/gone")
    async def gone():
        raise NotFound("it left")

    r = await call(app, "GET", "/boom")
    assert (r.status_code, r.json()) == (409, {"handled": "boom", "path": "/boom"})
    assert (await call(app, "GET", "/bigger")).status_code == 410
    r = await call(app, "GET", "/gone")
    assert (r.status_code, r.text) == (404, "nothing at /gone")
    r = await call(app, "GET", "/missing")
    assert (r.status_code, r.text) == (404, "nothing at /missing")
    r = await call(app, "POST", "/boom")
    assert (r.status_code, r.text) == (405, "allow: GET,HEAD")


async def test_status_handlers_win_and_an_exception_handler_is_for_server_errors():
    """As Starlette: an HTTPException goes to its status's handler before any class handler, a handler
    for ``Exception`` never turns a 404 or 422 into a 500, and ``exception_handler(500)`` takes every
    unhandled error."""
    app = App()

    @app.exception_handler(Exception)
    async def server_error(request, exc):
        return Response.json({"server_error": type(exc).__name__}, 500)

    @app.exception_handler(404)
    async def not_found(request, exc):
        return Response.json({"not_found": request.path}, 404)

    @app.get("/gone")
    async def gone():
        raise NotFound("it left")

    @app.get("/boom")
    async def boom():
        raise RuntimeError("bug")

    @app.get("/limit")
    async def limit(n: int):
        return {"n": n}

    r = await call(app, "GET", "/gone")
    assert (r.status_code, r.json()) == (404, {"not_found": "/gone"})
    r = await call(app, "GET", "/missing")
    assert (r.status_code, r.json()) == (404, {"not_found": "/missing"})
    r = await call(app, "GET", "/limit?n=x")
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["query", "n"]
    r = await call(app, "GET", "/boom")
    assert (r.status_code, r.json()) == (500, {"server_error": "RuntimeError"})

    app = App()

    @app.exception_handler(500)
    async def on_500(request, exc):
        return Response.json({"custom": type(exc).__name__}, 500)

    @app.exception_handler(HTTPException)
    async def on_http(request, exc):
        return Response.json({"http": exc.status}, exc.status)

    @app.get("/boom")
    async def boom2():
        raise RuntimeError("bug")

    r = await call(app, "GET", "/boom")
    assert (r.status_code, r.json()) == (500, {"custom": "RuntimeError"})
    r = await call(app, "GET", "/missing")  # the router's 404 reaches a class handler too
    assert (r.status_code, r.json()) == (404, {"http": 404})

    app = App()

    @app.exception_handler(NotFound)
    async def plain(request, exc):  # not a Response: it keeps the error's status
        return {"error": exc.detail}

    @app.exception_handler(RuntimeError)
    def text(request, exc):
        return "sorry"

    @app.get("/boom")
    async def boom3():
        raise RuntimeError("bug")

    r = await call(app, "GET", "/missing")
    assert (r.status_code, r.json()) == (404, {"error": "no route matches this path"})
    r = await call(app, "GET", "/boom")
    assert (r.status_code, r.text) == (500, "sorry")


async def test_a_failing_exception_handler_gives_a_500():
    app = App()

    @app.exception_handler(Boom)
    async def broken(request, exc):
        raise RuntimeError("handler bug")

    @app.get("/boom")
    async def boom():
        raise Boom()

    r = await call(app, "GET", "/boom")
    assert r.status_code == 500 and r.headers["content-type"] == "application/problem+json"


async def test_an_exception_handler_written_for_starlette_reads_status_code():
    app = App()

    @app.exception_handler(HTTPException)
    async def as_in_fastapi(request, exc):
        return Response.json({"detail": exc.detail}, exc.status_code, headers=exc.headers)

    @app.get("/auth")
    async def auth():
        raise HTTPException(401, "log in", headers={"WWW-Authenticate": "Bearer"})

    r = await call(app, "GET", "/auth")
    assert (r.status_code, r.json(), r.headers["www-authenticate"]) == (401, {"detail": "log in"}, "Bearer")


async def test_exception_handler_keys_are_checked():
    app = App()
    with pytest.raises(TypeError):
        app.exception_handler("404")


async def test_background_tasks_run_after_the_response_before_the_scope_closes():
    events = []

    class Conn:
        pass

    async def conn():
        events.append("open")
        yield Conn()
        events.append("close")

    c = Container()
    c.register(Conn, conn, scope=REQUEST)
    app = App(container=c)

    def blocking(x):
        events.append(f"sync {x}")

    async def failing():
        raise RuntimeError("task bug")  # logged; the next task still runs

    @app.post("/signup")
    async def signup(tasks: BackgroundTasks, db: Conn):
        async def later():
            events.append(f"async uses {type(db).__name__}")
        tasks.add(later)
        tasks.add(failing)
        tasks.add_task(blocking, 7)
        events.append("handler")
        return {"ok": True}

    r = await call(app, "POST", "/signup")
    assert r.json() == {"ok": True}
    assert events == ["open", "handler", "async uses Conn", "sync 7", "close"]


async def test_background_tasks_of_a_failed_handler_never_run():
    """As FastAPI: a handler that raises (an HTTPException, a validation error found after it added tasks,
    or a bug) gets its error response and the tasks it added are dropped; a handler that returns an error
    response itself keeps them."""
    ran = []
    app = App()

    @app.post("/signup")
    async def signup(tasks: BackgroundTasks, fail: str = ""):
        tasks.add(ran.append, f"mail {fail or 'ok'}")
        if fail == "http":
            raise HTTPException(409, "taken")
        if fail == "bug":
            raise RuntimeError("bug")
        if fail == "response":
            return Response.json({"error": "soft"}, 400)
        return {"ok": True}

    assert (await call(app, "POST", "/signup?fail=http")).status_code == 409
    assert (await call(app, "POST", "/signup?fail=bug")).status_code == 500
    assert ran == []
    assert (await call(app, "POST", "/signup?fail=response")).status_code == 400
    assert (await call(app, "POST", "/signup")).status_code == 200
    assert ran == ["mail response", "mail ok"]


async def test_mount_serves_every_path_under_the_prefix():
    app = App()

    async def files(request: Request, path: str):
        return Response.text(f"{request.method} {path}")

    app.mount("/files/", files)
    assert (await call(app, "GET", "/files/a/b.txt")).text == "GET a/b.txt"
    assert (await call(app, "HEAD", "/files/x")).status_code == 200
    assert (await call(app, "POST", "/files/x")).status_code == 405
    assert (await call(app, "GET", "/files/")).text == "GET "
    bare = await call(app, "GET", "/files?x=1&y=%2F")  # the prefix alone: redirected to its root, query kept
    assert bare.status_code == 307 and bare.headers["location"] == "/files/?x=1&y=%2F"
    with pytest.raises(ValueError):
        App().mount("/", files)


async def test_the_extra_http_exceptions_are_raised_as_the_others():
    """README: ``ServiceUnavailable`` (503 with ``Retry-After``) and ``RequestTimeout`` (408) join the other
    ``HTTPException``s - a handler raises them without arguments."""
    from aquilia_app import RequestTimeout, ServiceUnavailable

    app = App()

    @app.get("/408")
    async def slow():
        raise RequestTimeout()

    @app.get("/408-detail")
    async def slow_detail():
        raise RequestTimeout(detail="the upstream took too long")

    @app.get("/503")
    async def busy():
        raise ServiceUnavailable()

    r = await call(app, "GET", "/408")
    assert r.status_code == 408 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["title"] == "Request Timeout"
    assert (await call(app, "GET", "/408-detail")).json()["detail"] == "the upstream took too long"
    r = await call(app, "GET", "/503")
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert str(RequestTimeout(2.5)) == "408 Request Timeout: the request body was not received within 2.5 s"
