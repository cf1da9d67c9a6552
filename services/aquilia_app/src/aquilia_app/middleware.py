"""Middleware: native (both front ends) and pure ASGI (the ecosystem's, slower on RSGI).

Native middleware works on the framework's own objects, so it runs unchanged under RSGI and ASGI:

    class Timing(Middleware):
        async def __call__(self, request, call_next):
            t = time.perf_counter()
            response = await call_next(request)
            return response.with_headers([("server-timing", f"app;dur={(time.perf_counter() - t) * 1e3:.1f}")])

    app.add_middleware(Timing())            # an instance, or the class and its options:
    app.add_middleware(CORSMiddleware, allow_origins=["https://app.example"])

Routing runs inside the native chain (``request.route`` is set once ``call_next`` has matched), so a
middleware also sees requests that match no route (CORS preflights, trusted-host checks, 404s).
A middleware may answer without calling ``call_next``.  Errors raised by the handler have already been
turned into responses when ``call_next`` returns; an error raised by a middleware itself becomes a 500
(or its problem response for an ``HTTPException``).  A response returned by ``call_next`` may be
shared (a module constant): add headers with ``response.with_headers(...)``, which copies a whole
``Response``, never by mutating it.

Pure-ASGI middleware (any ``factory(app, **options) -> asgi_app`` that is not a ``Middleware``) wraps
the whole ASGI app.  Under granian's RSGI interface an app with ASGI middleware serves every request
through an RSGI-to-ASGI adapter: it works, at ASGI's cost (measured in the README).

A plain ``async def fn(request, call_next)`` is native middleware too, as in FastAPI and Starlette:
``@app.middleware("http")`` registers it (``FunctionMiddleware(fn)`` is the same as an instance).

Both kinds are ordered by ``priority`` (lower = outer; equal priorities keep registration order) and
chained once, at start-up.

WebSockets have no response to wrap, so ``__call__`` never runs for them.  A native middleware that
must also see WebSocket handshakes (as Starlette's ``TrustedHostMiddleware``, ``SessionMiddleware`` and
uvicorn's proxy headers do) defines ``async def websocket(self, ws)``: app-wide ones run before each
WebSocket handler, outermost first; raising an ``HTTPException`` there refuses the handshake.
"""
from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable

from .types import ASGIApp

__all__ = ["Middleware", "FunctionMiddleware", "ASGIMiddleware", "MiddlewareStack", "CallNext", "route_middleware"]

CallNext = Callable[[Any], Awaitable[Any]]


class Middleware:
    """Base of native middleware: override ``__call__(request, call_next) -> response``."""

    async def __call__(self, request, call_next: CallNext):
        return await call_next(request)


class ASGIMiddleware:
    """Convenience base for pure-ASGI middleware: override ``__call__``; ``self.app`` is the next app."""

    def __init__(self, app: ASGIApp, **options: Any):
        self.app = app
        self.options = options

    async def __call__(self, scope, receive, send):
        await self.app(scope, receive, send)


def route_middleware(middleware) -> tuple:
    """A route's own middleware as a tuple, checked: each must be a ``Middleware`` instance."""
    for mw in middleware:
        if not isinstance(mw, Middleware):
            raise TypeError(f"route middleware must be Middleware instances, not {mw!r}")
    return tuple(middleware)


class FunctionMiddleware(Middleware):
    """``async def fn(request, call_next) -> response`` as native middleware."""

    def __init__(self, fn):
        if not inspect.iscoroutinefunction(fn) or len(inspect.signature(fn).parameters) != 2:
            raise TypeError(f"function middleware is an async def taking (request, call_next), not {fn!r}")
        self.fn = fn

    def __call__(self, request, call_next: CallNext):
        return self.fn(request, call_next)  # the function's own coroutine: no frame of ours


def _is_native(factory) -> bool:
    return isinstance(factory, Middleware) or (inspect.isclass(factory) and issubclass(factory, Middleware))


def _link(mw: Middleware, call_next: CallNext) -> CallNext:
    async def handle(request):
        try:
            return await mw(request, call_next)
        except Exception as e:  # answered here, so the outer middleware (CORS, request id) still run
            request.exc = request.exc or e
            return await request.app._error(request, e, request.method, "<unmatched>")
    return handle


class MiddlewareStack:
    def __init__(self):
        self._entries: list[tuple[int, int, Any, dict, bool]] = []
        self._built = False
        self.native_instances: list = []  # the native middleware objects, outermost first (once built)

    def add(self, factory, priority: int = 100, **options: Any) -> None:
        if self._built:
            raise RuntimeError("middleware stack already built; add middleware before start-up")
        native = _is_native(factory)
        if native and not inspect.isclass(factory) and options:
            raise TypeError(f"options given for the middleware instance {factory!r}: pass them to its constructor")
        if not native and not callable(factory):
            raise TypeError(f"middleware {factory!r} is neither a Middleware nor an ASGI middleware factory")
        self._entries.append((priority, len(self._entries), factory, options, native))

    def _sorted(self, native: bool) -> list:
        return [e for e in sorted(self._entries, key=lambda e: (e[0], e[1])) if e[4] == native]

    def order(self) -> list:
        return [e[2] for e in sorted(self._entries, key=lambda e: (e[0], e[1]))]

    @property
    def native_count(self) -> int:
        return sum(1 for e in self._entries if e[4])

    @property
    def asgi_count(self) -> int:
        return sum(1 for e in self._entries if not e[4])

    def build_native(self, endpoint: CallNext) -> CallNext:
        """The native chain around ``endpoint(request) -> response``."""
        handler = endpoint
        instances = []
        for _prio, _seq, factory, options, _ in reversed(self._sorted(True)):
            mw = factory(**options) if inspect.isclass(factory) else factory
            instances.append(mw)
            handler = _link(mw, handler)
        self.native_instances = instances[::-1]
        return handler

    def websocket_hooks(self) -> tuple:
        """The ``websocket(ws)`` hooks of the built native middleware, outermost first."""
        return tuple(mw.websocket for mw in self.native_instances if callable(getattr(mw, "websocket", None)))

    def build(self, app: ASGIApp) -> ASGIApp:
        """The ASGI chain around ``app``."""
        for _prio, _seq, factory, options, _ in reversed(self._sorted(False)):
            app = factory(app, **options)
        self._built = True
        return app

    def __len__(self) -> int:
        return len(self._entries)

    def __call__(self, kind: str = "http", *, priority: int = 100):
        """``@app.middleware("http")`` over ``async def fn(request, call_next)`` (FastAPI's form)."""
        if kind != "http":
            raise ValueError(f"function middleware is 'http' middleware (WebSockets have none), not {kind!r}")

        def deco(fn):
            self.add(FunctionMiddleware(fn), priority)
            return fn

        return deco
