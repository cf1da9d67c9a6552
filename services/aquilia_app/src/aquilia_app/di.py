"""Dependency injection: a container with singleton, app and request scopes.

* A provider is a class (its ``__init__`` annotations name its dependencies), a sync or async function
  (its parameter annotations name the dependencies), a sync or async generator function or a
  ``@contextmanager`` / ``@asynccontextmanager`` function (teardown runs when the owning scope closes),
  or a ready value.
* ``compile()`` runs once at start-up: it resolves every dependency token, rejects unknown tokens,
  cycles and scope violations (a longer-lived provider may not depend on a shorter-lived one), and
  builds a resolve plan per token: ``(kind, factory, deps, scope)``.
* A :class:`RequestScope` holds a reference to the compiled plans and allocates only its cache and
  (lazily) its teardown list, so creating one is O(1) whatever the number of providers.
* Teardowns of a scope run in reverse order of creation at ``aclose()``, also when the request failed.

Scopes: ``singleton`` (once per container, lives until the container closes), ``app`` (once per
application start-up, closed at shutdown) and ``request``.
"""
from __future__ import annotations

import contextlib
import inspect
import typing
from types import AsyncGeneratorType
from typing import Any, Callable

__all__ = [
    "Container",
    "Override",
    "RequestScope",
    "DIError",
    "CycleError",
    "ScopeError",
    "MissingDependency",
    "SINGLETON",
    "APP",
    "REQUEST",
]

SINGLETON, APP, REQUEST = "singleton", "app", "request"
_RANK = {SINGLETON: 0, APP: 1, REQUEST: 2}

# plan kinds (_GIVEN: the value each request scope is given, e.g. the request itself)
_VALUE, _SYNC, _ASYNC, _GEN, _CM, _GIVEN = range(6)
_MISSING = object()


class DIError(Exception):
    """Base class of every container error."""


class MissingDependency(DIError, LookupError):
    """A token that no provider gives."""


class CycleError(DIError):
    """Providers that depend on each other in a cycle."""


class ScopeError(DIError):
    """A provider depends on one with a shorter life (e.g. singleton -> request)."""


def _hints(fn) -> dict:
    try:
        return typing.get_type_hints(fn)
    except Exception:
        return getattr(fn, "__annotations__", {}) or {}


def dependencies_of(fn: Callable, skip_first: bool = False) -> tuple:
    """The ``(param name, token)`` pairs of a callable's annotated parameters (introspected once)."""
    target = fn.__init__ if inspect.isclass(fn) else fn
    if target is object.__init__:
        return ()
    sig = inspect.signature(target)
    hints = _hints(target)
    out = []
    params = list(sig.parameters.values())
    if skip_first or inspect.isclass(fn):
        params = params[1:]
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        token = hints.get(p.name, p.annotation)
        if token is inspect.Parameter.empty:
            if p.default is not p.empty:
                continue
            raise DIError(f"parameter {p.name!r} of {fn!r} has no annotation to inject")
        out.append((p.name, token))
    return tuple(out)


class _Provider:
    __slots__ = ("token", "factory", "scope", "kind", "deps")

    def __init__(self, token, factory, scope, kind, deps):
        self.token, self.factory, self.scope, self.kind, self.deps = token, factory, scope, kind, deps


def _kind_of(factory) -> int:
    if inspect.isasyncgenfunction(factory):
        return _GEN
    wrapped = getattr(factory, "__wrapped__", None)
    if wrapped is not None and inspect.isasyncgenfunction(wrapped):
        return _CM  # @asynccontextmanager
    if inspect.iscoroutinefunction(factory):
        return _ASYNC
    if inspect.isgeneratorfunction(factory) or (wrapped is not None and inspect.isgeneratorfunction(wrapped)):
        return _CM  # a sync generator (FastAPI's ``def get_db(): yield db``) or @contextmanager: see _factory_of
    return _SYNC


class _SyncCM:
    """A sync context manager driven as an async one (the teardown of a sync generator provider)."""

    __slots__ = ("_cm",)

    def __init__(self, cm):
        self._cm = cm

    async def __aenter__(self):
        return self._cm.__enter__()

    async def __aexit__(self, et, e, tb):
        return self._cm.__exit__(et, e, tb)


def _factory_of(factory, kind: int):
    """The callable a plan calls: a sync generator function (or ``@contextmanager``) becomes one returning
    an async context manager, so that its code after ``yield`` runs at teardown, with the scope's error
    raised at the ``yield`` as for an async generator."""
    if kind != _CM:
        return factory
    wrapped = getattr(factory, "__wrapped__", None)
    if inspect.isgeneratorfunction(factory):
        cm_factory = contextlib.contextmanager(factory)
    elif wrapped is not None and inspect.isgeneratorfunction(wrapped) and not inspect.isasyncgenfunction(wrapped):
        cm_factory = factory  # already a @contextmanager
    else:
        return factory

    def sync_cm(**kwargs):
        return _SyncCM(cm_factory(**kwargs))
    sync_cm.__qualname__ = getattr(factory, "__qualname__", "provider")
    return sync_cm


class Container:
    def __init__(self):
        self._providers: dict[Any, _Provider] = {}
        self._plans: dict[Any, tuple] = {}
        self._values: dict[Any, Any] = {}  # singleton + app instances
        self._exits: list = []  # teardowns of singleton/app providers
        self._compiled = False
        self._running = False  # between startup() and shutdown()

    # -- registration -------------------------------------------------------------------------
    def register(self, token, factory=None, *, scope: str = SINGLETON):
        if self._compiled:
            raise DIError("container already compiled")
        if scope not in _RANK:
            raise DIError(f"unknown scope {scope!r} (use singleton, app, request)")
        factory = token if factory is None else factory
        if not callable(factory):
            raise DIError(f"provider for {token!r} is not callable; use value()")
        kind = _kind_of(factory)
        deps = dependencies_of(factory)
        self._providers[token] = _Provider(token, _factory_of(factory, kind), scope, kind, deps)
        return factory

    def request_value(self, token) -> None:
        """Declare ``token`` as the value each request scope is given (``RequestScope(c, value)``):
        request-scoped providers may depend on it.  ``App`` declares its ``Request`` so, so that a
        provider such as ``current_user(request: Request)`` reads headers and cookies."""
        if self._compiled:
            raise DIError("container already compiled")
        self._providers[token] = _Provider(token, None, REQUEST, _GIVEN, ())

    def value(self, token, instance):
        if self._compiled:
            raise DIError("container already compiled")
        self._providers[token] = _Provider(token, instance, SINGLETON, _VALUE, ())

    def provides(self, token=None, *, scope: str = SINGLETON):
        """Decorator form: ``@container.provides(Token, scope="request")``."""

        def deco(fn):
            tok = token
            if tok is None:
                tok = _hints(fn).get("return")
                if tok is None:
                    raise DIError(f"{fn!r} needs a token or a return annotation")
                origin = typing.get_origin(tok)
                if origin is not None and typing.get_args(tok):  # AsyncIterator[T] -> T
                    tok = typing.get_args(tok)[0]
            self.register(tok, fn, scope=scope)
            return fn

        return deco

    def override(self, token, factory=None, *, value=_MISSING) -> "Override":
        """Replace the provider of a registered ``token`` by ``factory`` (or a ready ``value``) until
        the returned ``Override`` is undone or its ``with`` block ends; for tests, as FastAPI's
        ``dependency_overrides``: ``with container.override(Repo, FakeRepo): ...``.

        The replacement keeps the original's scope (handlers were planned for it) and is checked as a
        registration is (its dependencies must exist, no cycle, no shorter-lived dependency).  While the
        container runs, only a request-scoped provider can be replaced (the next request uses it);
        singletons and app providers are replaced before start-up or between runs."""
        old = self._providers.get(token)
        if old is None:
            raise MissingDependency(f"no provider for {_name(token)} to override")
        if value is not _MISSING:
            new = _Provider(token, value, old.scope, _VALUE, ())
        elif callable(factory):
            kind = _kind_of(factory)
            new = _Provider(token, _factory_of(factory, kind), old.scope, kind, dependencies_of(factory))
        else:
            raise DIError(f"override of {_name(token)} needs a callable provider or value=")
        self._swap(token, new)
        return Override(self, token, old)

    def _swap(self, token, provider: _Provider) -> None:
        """Put ``provider`` in for ``token`` and re-plan, or leave everything as it was on an error."""
        if self._running and provider.scope != REQUEST:
            raise DIError(f"{_name(token)} is {provider.scope}-scoped and built at start-up: "
                          "override it before start-up or between runs")
        previous = self._providers[token]
        self._providers[token] = provider
        if not self._compiled:
            return
        plans = self._plans
        self._plans, self._compiled = {}, False
        try:
            self.compile()
        except DIError:
            self._providers[token], self._plans, self._compiled = previous, plans, True
            raise

    def __contains__(self, token) -> bool:
        return token in self._providers

    def scope_of(self, token) -> str:
        return self._providers[token].scope

    # -- compilation --------------------------------------------------------------------------
    def compile(self) -> "Container":
        if self._compiled:
            return self
        state: dict = {}  # token -> 1 visiting, 2 done

        def visit(token, path):
            st = state.get(token)
            if st == 2:
                return
            if st == 1:
                cyc = path[path.index(token):] + [token]
                raise CycleError("dependency cycle: " + " -> ".join(_name(t) for t in cyc))
            prov = self._providers.get(token)
            if prov is None:
                raise MissingDependency(f"no provider for {_name(token)} (needed by {_name(path[-1]) if path else '?'})")
            state[token] = 1
            for pname, dep in prov.deps:
                dprov = self._providers.get(dep)
                if dprov is None:
                    raise MissingDependency(f"no provider for {_name(dep)} (parameter {pname!r} of {_name(token)})")
                if _RANK[dprov.scope] > _RANK[prov.scope]:
                    raise ScopeError(
                        f"{prov.scope}-scoped {_name(token)} cannot depend on {dprov.scope}-scoped {_name(dep)}"
                    )
                visit(dep, path + [token])
            state[token] = 2
            self._plans[token] = (prov.kind, prov.factory, prov.deps, prov.scope)

        for token in list(self._providers):
            visit(token, [])
        self._compiled = True
        return self

    def check(self, needs: tuple, consumer: str) -> None:
        """Validate the tokens a consumer (controller, handler) needs, at start-up."""
        for pname, token in needs:
            if token not in self._providers:
                raise MissingDependency(f"no provider for {_name(token)} (parameter {pname!r} of {consumer})")

    def needs_request_scope(self, needs: tuple) -> bool:
        return any(self._providers[t].scope == REQUEST for _, t in needs)

    # -- lifecycle ----------------------------------------------------------------------------
    async def startup(self) -> None:
        """Create every singleton and app provider (eagerly, so failures show at start-up)."""
        self.compile()
        self._running = True
        for token, plan in self._plans.items():
            if plan[3] != REQUEST and token not in self._values:
                await self._build(token, self._values, self._exits)

    async def shutdown(self) -> None:
        self._running = False
        exits, self._exits = self._exits, []
        self._values.clear()
        await _run_exits(exits)

    async def resolve(self, token):
        """Resolve a singleton/app token (outside a request)."""
        v = self._values.get(token, _MISSING)
        if v is not _MISSING:
            return v
        if not self._compiled:
            self.compile()
        plan = self._plans.get(token)
        if plan is None:
            raise MissingDependency(f"no provider for {_name(token)}")
        if plan[3] == REQUEST:
            raise ScopeError(f"{_name(token)} is request-scoped: resolve it from a RequestScope")
        return await self._build(token, self._values, self._exits)

    def request_scope(self) -> "RequestScope":
        return RequestScope(self)

    async def _build(self, token, cache: dict, exits: list, scope: "RequestScope | None" = None):
        kind, factory, deps, pscope = self._plans[token]
        if kind == _VALUE:
            cache[token] = factory
            return factory
        if deps:
            kwargs = {}
            for pname, dep in deps:
                v = self._values.get(dep, _MISSING)  # a singleton or app value: no call at all
                if v is _MISSING:
                    v = await (self._build(dep, self._values, self._exits) if scope is None else scope.resolve(dep))
                kwargs[pname] = v
        else:
            kwargs = _NOKW
        if kind == _SYNC:
            value = factory(**kwargs)
        elif kind == _ASYNC:
            value = await factory(**kwargs)
        elif kind == _GEN:  # driven directly: a third of the cost of an asynccontextmanager around it
            gen = factory(**kwargs)
            try:
                value = await gen.__anext__()
            except StopAsyncIteration:
                raise DIError(f"provider {_name(factory)} returned without yielding a value") from None
            exits.append(gen)
        else:
            cm = factory(**kwargs)
            value = await cm.__aenter__()
            exits.append(cm)
        cache[token] = value
        return value


_NOKW: dict = {}


class Override:
    """A provider put in by ``Container.override``: ``undo()`` (or the end of its ``with`` block)
    puts back the one it replaced."""

    __slots__ = ("_container", "_token", "_replaced")

    def __init__(self, container: Container, token, replaced: _Provider):
        self._container, self._token, self._replaced = container, token, replaced

    def undo(self) -> None:
        replaced, self._replaced = self._replaced, None
        if replaced is not None:
            self._container._swap(self._token, replaced)

    def __enter__(self) -> "Override":
        return self

    def __exit__(self, et, e, tb) -> None:
        self.undo()


class RequestScope:
    """Per-request cache; shares the container's plans by reference (O(1) to create).  ``given``: the
    value of the container's ``request_value`` token (the request)."""

    __slots__ = ("_c", "_cache", "_exits", "given")

    def __init__(self, container: Container, given=None):
        self._c = container
        self._cache = None
        self._exits = None
        self.given = given

    async def resolve(self, token):
        c = self._c
        v = c._values.get(token, _MISSING)
        if v is not _MISSING:
            return v
        cache = self._cache
        if cache is None:
            cache = self._cache = {}
        else:
            v = cache.get(token, _MISSING)
            if v is not _MISSING:
                return v
        plan = c._plans.get(token)
        if plan is None:
            raise MissingDependency(f"no provider for {_name(token)}")
        if plan[3] != REQUEST:
            return await c._build(token, c._values, c._exits)
        if plan[0] == _GIVEN:
            if self.given is None:
                raise MissingDependency(f"{_name(token)} is given by a request: this scope has none")
            return self.given
        if plan[0] >= _GEN and self._exits is None:  # _GEN and _CM have a teardown
            self._exits = []
        return await c._build(token, cache, self._exits, self)

    async def aclose(self, exc: BaseException | None = None) -> None:
        exits = self._exits
        if exits:
            self._exits = None
            await _run_exits(exits, exc)

    async def __aenter__(self):
        return self

    async def __aexit__(self, et, e, tb):
        await self.aclose(e)


async def _run_exits(exits: list, exc: BaseException | None = None) -> None:
    first_error = None
    for cm in reversed(exits):
        try:
            if cm.__class__ is AsyncGeneratorType:
                await _finish_generator(cm, exc)
            elif exc is None:
                await cm.__aexit__(None, None, None)
            else:
                await cm.__aexit__(type(exc), exc, exc.__traceback__)
        except Exception as e:  # keep closing the others
            if first_error is None and e is not exc:
                first_error = e
    if first_error is not None:
        raise first_error


async def _finish_generator(gen, exc: BaseException | None) -> None:
    """A generator provider's teardown: resumed after its ``yield``, with the scope's error raised
    there if there is one (as ``@asynccontextmanager`` would).  Letting that error through is not a
    teardown failure; a second ``yield`` is."""
    try:
        if exc is None:
            await gen.__anext__()
        else:
            await gen.athrow(exc)
    except StopAsyncIteration:
        return
    except BaseException as e:
        if e is exc:
            return
        raise
    await gen.aclose()
    raise RuntimeError(f"generator provider {gen.__qualname__} yielded more than once")


def _name(token) -> str:
    return getattr(token, "__qualname__", None) or repr(token)
