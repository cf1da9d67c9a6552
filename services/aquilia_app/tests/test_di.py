import asyncio
from contextlib import asynccontextmanager

import pytest

from aquilia_app.di import (APP, REQUEST, SINGLETON, Container, CycleError, DIError, MissingDependency, RequestScope,
                            ScopeError)
from aquilia_app.requests import Request


def run(coro):
    return asyncio.run(coro)


class Config:
    def __init__(self):
        self.url = "sqlite://"


class Engine:
    def __init__(self, config: Config):
        self.config = config


class Session:
    def __init__(self, engine: Engine):
        self.engine = engine


def test_scopes_singleton_shared_request_per_scope():
    c = Container()
    c.register(Config)
    c.register(Engine, scope=APP)
    c.register(Session, scope=REQUEST)
    c.compile()

    async def main():
        await c.startup()
        s1, s2 = c.request_scope(), c.request_scope()
        a = await s1.resolve(Session)
        b = await s1.resolve(Session)
        other = await s2.resolve(Session)
        assert a is b and a is not other
        assert a.engine is other.engine  # app scope shared
        assert a.engine.config is await c.resolve(Config)
        with pytest.raises(ScopeError):
            await c.resolve(Session)
        await c.shutdown()

    run(main())


def test_async_providers_and_teardown_order_even_on_error():
    events = []
    c = Container()

    async def make_number() -> int:
        return 41

    async def resource(n: int):
        events.append(("open", n))
        try:
            yield n + 1
        finally:
            events.append(("close", n))

    @asynccontextmanager
    async def other(x: float):
        events.append("open other")
        try:
            yield str(x)
        except RuntimeError as e:  # the handler's exception is passed to the teardown
            events.append(f"saw {e}")
            raise
        finally:
            events.append("close other")

    c.register(int, make_number, scope=SINGLETON)
    c.register(float, resource, scope=REQUEST)
    c.register(str, other, scope=REQUEST)
    c.compile()

    async def main():
        await c.startup()
        scope = c.request_scope()
        try:
            async with scope:
                assert await scope.resolve(str) == "42"
                raise RuntimeError("handler failed")
        except RuntimeError:
            pass
        assert events == [("open", 41), "open other", "saw handler failed", "close other", ("close", 41)]

    run(main())


def test_app_scope_teardown_at_shutdown():
    closed = []

    async def pool():
        yield "pool"
        closed.append(True)

    c = Container()
    c.register(str, pool, scope=APP)

    async def main():
        await c.startup()
        assert await c.resolve(str) == "pool"
        assert not closed
        await c.shutdown()
        assert closed == [True]

    run(main())


def test_cycles_rejected_at_compile():
    class A:
        def __init__(self, b: "B"):
            pass

    class B:
        def __init__(self, a: A):
            pass

    A.__init__.__annotations__["b"] = B
    c = Container()
    c.register(A)
    c.register(B)
    with pytest.raises(CycleError, match="cycle"):
        c.compile()


def test_missing_dependency_and_scope_violation():
    c = Container()
    c.register(Engine)  # Config missing
    with pytest.raises(MissingDependency, match="Config"):
        c.compile()
    c = Container()
    c.register(Config, scope=REQUEST)
    c.register(Engine, scope=SINGLETON)
    with pytest.raises(ScopeError, match="singleton-scoped"):
        c.compile()


def test_request_scope_is_cheap_and_shares_plans():
    c = Container()
    for i in range(500):
        c.register(type(f"T{i}", (), {}), scope=REQUEST)
    c.compile()
    s = c.request_scope()
    assert isinstance(s, RequestScope)
    assert s._c._plans is c._plans  # shared by reference
    assert s._cache is None and s._exits is None  # nothing allocated until used
    assert not hasattr(s, "__dict__")


def test_value_and_decorator():
    c = Container()
    c.value(Config, Config())

    @c.provides(scope=REQUEST)
    def engine(config: Config) -> Engine:
        return Engine(config)

    async def main():
        await c.startup()
        s = c.request_scope()
        e = await s.resolve(Engine)
        assert isinstance(e, Engine) and e.config is await c.resolve(Config)

    run(main())


# -- generator providers, driven without contextlib ------------------------------------------------
def _scope_with(provider):
    c = Container()
    c.register(str, provider, scope=REQUEST)
    c.compile()
    return c.request_scope()


@pytest.mark.parametrize("failure", [None, ValueError("handler failed")])
def test_a_generator_provider_sees_the_scope_error_at_its_yield(failure):
    seen = []

    async def conn():
        try:
            yield "conn"
            seen.append("committed")
        except ValueError as e:
            seen.append(f"rolled back: {e}")
            raise
        finally:
            seen.append("released")

    async def main():
        scope = _scope_with(conn)
        assert await scope.resolve(str) == "conn"
        await scope.aclose(failure)  # the error going through the teardown is not a teardown failure
    run(main())
    assert seen == (["committed", "released"] if failure is None else ["rolled back: handler failed", "released"])


def test_a_generator_provider_that_swallows_the_error_or_fails_its_teardown():
    async def swallows():
        try:
            yield "x"
        except ValueError:
            pass

    async def fails():
        yield "x"
        raise OSError("could not release")

    async def main():
        scope = _scope_with(swallows)
        await scope.resolve(str)
        await scope.aclose(ValueError("handler failed"))  # swallowed: nothing to report
        scope = _scope_with(fails)
        await scope.resolve(str)
        with pytest.raises(OSError, match="could not release"):
            await scope.aclose()
    run(main())


def test_a_generator_provider_must_yield_exactly_once():
    closed = []

    async def never():
        if False:
            yield "x"

    async def twice():
        try:
            yield "x"
            yield "y"
        finally:
            closed.append(True)

    async def main():
        with pytest.raises(DIError, match="without yielding"):
            await _scope_with(never).resolve(str)
        scope = _scope_with(twice)
        await scope.resolve(str)
        with pytest.raises(RuntimeError, match="yielded more than once"):
            await scope.aclose()
    run(main())
    assert closed == [True]  # closed all the same


# -- overrides (tests replacing a provider, as FastAPI's dependency_overrides) ------------------------
class Repo:
    def __init__(self, session: Session):
        self.session = session

    def name(self) -> str:
        return "real"


class FakeRepo(Repo):
    def __init__(self, config: Config):  # dependencies of its own
        self.config = config

    def name(self) -> str:
        return "fake"


def _served_container():
    from aquilia_app import App
    from aquilia_app.testclient import TestClient

    c = Container()
    c.register(Config)
    c.register(Engine, scope=APP)
    c.register(Session, scope=REQUEST)
    c.register(Repo, scope=REQUEST)
    app = App(container=c)

    @app.get("/repo")
    async def repo(r: Repo, engine: Engine):
        return {"repo": r.name(), "engine": type(engine).__name__}

    return c, lambda: TestClient(app)


def test_an_override_replaces_a_provider_for_the_requests_and_undo_puts_it_back():
    c, client_of = _served_container()
    with c.override(Repo, FakeRepo):
        with client_of() as client:
            assert client.get("/repo").json() == {"repo": "fake", "engine": "Engine"}
    with client_of() as client:  # the app started once already: the container is compiled
        assert client.get("/repo").json()["repo"] == "real"
        with c.override(Repo, FakeRepo):  # request-scoped: while the app runs, for the next request
            assert client.get("/repo").json()["repo"] == "fake"
        assert client.get("/repo").json()["repo"] == "real"


def test_an_app_scoped_provider_is_overridden_between_runs_not_while_running():
    class FakeEngine(Engine):
        pass

    c, client_of = _served_container()
    with client_of() as client:
        with pytest.raises(DIError, match="before start-up"):
            c.override(Engine, FakeEngine)
        assert client.get("/repo").json()["engine"] == "Engine"
    with c.override(Engine, FakeEngine), client_of() as client:
        assert client.get("/repo").json()["engine"] == "FakeEngine"
    with client_of() as client:
        assert client.get("/repo").json()["engine"] == "Engine"


def test_an_override_is_checked_like_a_registration_and_a_bad_one_changes_nothing():
    class NeedsNothingKnown:
        def __init__(self, missing: Repo, other: "Unregistered"):  # noqa: F821
            pass

    class Unregistered:
        pass

    c, client_of = _served_container()
    with client_of() as client:
        with pytest.raises(MissingDependency):
            c.override(Unregistered, Unregistered)  # only a registered token can be replaced
        with pytest.raises(DIError):
            c.override(Repo, NeedsNothingKnown)  # its dependencies must be provided
        with pytest.raises(DIError, match="callable provider or value="):
            c.override(Repo, 42)
        assert client.get("/repo").json()["repo"] == "real"  # left as it was
        fake = FakeRepo(Config())
        with c.override(Repo, value=fake) as o:
            assert client.get("/repo").json()["repo"] == "fake"
            o.undo()
            o.undo()  # once only
            assert client.get("/repo").json()["repo"] == "real"
    c2 = Container()
    c2.register(Config)
    c2.register(Engine)
    c2.compile()
    with pytest.raises(CycleError):
        c2.override(Config, _needs_engine)
    assert run(c2.resolve(Engine)).config.url == "sqlite://"


def _needs_engine(engine: Engine) -> Config:
    return Config()


# -- the request as a dependency (FastAPI's dependencies that read the request) -----------------------
class User(str):
    pass


async def current_user(request: Request) -> User:
    from aquilia_app import HTTPException

    token = request.header("authorization")
    if not token:
        raise HTTPException(401, "no token", headers={"www-authenticate": "Bearer"})
    return User(token.removeprefix("Bearer "))


def test_a_request_scoped_provider_takes_the_request():
    from aquilia_app import App, Controller, WebSocket, get
    from aquilia_app.testclient import TestClient

    seen_closed = []

    async def audit(request: Request):  # a generator provider: its teardown sees the same request
        yield request.path
        seen_closed.append(request.path)

    class Audit(str):
        pass

    c = Container()
    c.register(User, current_user, scope=REQUEST)
    c.register(Audit, audit, scope=REQUEST)
    app = App(container=c)

    @app.get("/me")
    async def me(user: User, trail: Audit):
        return {"user": user, "trail": trail}

    class Profile(Controller):
        prefix = "/profile"

        def __init__(self, request: Request):  # a controller made per request
            self.request = request

        @get("")
        async def show(self, user: User):
            return {"user": user, "same": self.request.path}

    app.controller(Profile)

    @app.websocket("/ws")
    async def ws(socket: WebSocket, user: User):
        await socket.accept()
        await socket.send_text(user)
        await socket.close()

    with TestClient(app) as client:
        r = client.get("/me")
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert client.get("/me", headers={"authorization": "Bearer ada"}).json() == {"user": "ada", "trail": "/me"}
        assert seen_closed == ["/me"]
        assert client.get("/profile", headers={"authorization": "Bearer bo"}).json() == {"user": "bo",
                                                                                          "same": "/profile"}
        with client.websocket_connect("/ws", headers={"authorization": "Bearer cy"}) as socket:
            assert socket.receive_text() == "cy"


def test_only_request_scoped_providers_take_the_request():
    from aquilia_app import App

    c = Container()
    c.register(User, current_user)  # a singleton: built before any request
    with pytest.raises(ScopeError, match="request-scoped Request"):
        App(container=c).compile()
    c = Container()
    c.request_value(Request)
    c.register(User, current_user, scope=REQUEST)
    c.compile()
    with pytest.raises(MissingDependency, match="given by a request"):
        run(c.request_scope().resolve(User))  # a scope made outside a request has no request


@pytest.mark.parametrize("failure", [None, ValueError("handler failed")])
def test_a_sync_generator_provider_yields_its_value_and_tears_down(failure):
    """FastAPI's ``def get_db(): db = ...; try: yield db; finally: db.close()``: the value is what it yields
    (never the generator object), its teardown runs when the scope closes and sees the scope's error."""
    from contextlib import contextmanager

    seen = []

    def conn():
        try:
            yield "conn"
            seen.append("committed")
        except ValueError as e:
            seen.append(f"rolled back: {e}")
            raise
        finally:
            seen.append("released")

    @contextmanager
    def managed():
        yield "managed"
        seen.append("managed out")

    async def main():
        scope = _scope_with(conn)
        assert await scope.resolve(str) == "conn"
        await scope.aclose(failure)
        c = Container()
        c.register(bytes, managed, scope=REQUEST)
        c.compile()
        scope = c.request_scope()
        assert await scope.resolve(bytes) == "managed"
        await scope.aclose()
    run(main())
    assert seen == (["committed", "released"] if failure is None else ["rolled back: handler failed", "released"]) \
        + ["managed out"]


def test_a_sync_generator_provider_in_a_handler():
    from aquilia_app import App
    from aquilia_app.testclient import TestClient

    class DB:
        pass

    events = []

    def get_db():
        db = DB()
        events.append("open")
        try:
            yield db
        finally:
            events.append("close")

    c = Container()
    c.register(DB, get_db, scope=REQUEST)
    app = App(container=c)

    @app.get("/db")
    async def handler(db: DB):
        return {"type": type(db).__name__}

    with TestClient(app) as client:
        assert client.get("/db").json() == {"type": "DB"}
    assert events == ["open", "close"]
