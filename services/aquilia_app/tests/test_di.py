import asyncio
from contextlib import asynccontextmanager

import pytest

from aquilia_app.di import (APP, REQUEST, SINGLETON, Container, CycleError, DIError, MissingDependency, RequestScope,
                            ScopeError)


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
