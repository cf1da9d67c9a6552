"""The application: registration, one-time compilation at start-up, and the request dispatch.

``App`` is an ASGI app.  At start-up (the ASGI lifespan, or the first request when the server sends no
lifespan) it compiles the DI container, builds each handler's binding plan, compiles the router
(rejecting ambiguous routes), builds the middleware chain once, and creates the singleton/app
providers.  After that a request costs: a dict lookup (static routes) or a tree walk (dynamic
routes), one ``Request`` object, the bound handler call, and the response's two ``send`` calls.
"""
from __future__ import annotations

import asyncio
import gc
import inspect
import logging
from time import perf_counter
from typing import Any, Callable, Mapping

from .controllers import (P_BODY, bind, build_plan, controller_routes, converting, dependencies_of, path_types,
                          plan_needs_scope, plan_reads_form, response_model)
from .di import Container, RequestScope
from .exceptions import HTTPException, MethodNotAllowed, NotFound
from .groups import join_prefix
from .metrics import Metrics
from .middleware import MiddlewareStack, route_middleware
from .mounts import MountedApp, is_asgi_app
from .requests import DEFAULT_MAX_BODY, Request, route_path
from .responses import CT_JSON, CT_TEXT, PerRequestResponse, Response, StreamingResponse, json_bytes, problem
from .routing import MethodShortcuts, Router, encode_path, route_docs
from .rsgi import RSGIRequest, asgi_scope, response_headers, serve_asgi
from .state import State
from .websockets import WebSocket, WebSocketBridge, serve_asgi_websocket, serve_rsgi_websocket

__all__ = ["App"]

log = logging.getLogger("aquilia_app")
_EMPTY: dict = {}
UNMATCHED = "<unmatched>"
_CLOSE = (b"connection", b"close")
_BODY_HEADERS = frozenset((b"content-length", "content-length", b"transfer-encoding", "transfer-encoding"))
_ZERO = (b"0", "0")
DEFAULT_BODY_TIMEOUT = 30.0  # seconds for the whole request body (408 after)
DRAIN_MAX = 64 * 1024  # an unread body up to this size is read and dropped, so the connection stays usable
DRAIN_TIMEOUT = 1.0  # seconds the response waits for such a body
_EVERY_METHOD = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _closing(resp):
    """``resp`` saying ``Connection: close`` (a copy of a ``Response``, which may be shared)."""
    return resp.with_headers([_CLOSE], replace=True)


class _Endpoint:
    __slots__ = ("call", "status", "needs_request", "fn0", "handler", "plan", "owner")

    def __init__(self, call, status, needs_request=True, fn0=None, handler=None, plan=(), owner=None):
        self.call = call
        self.status = status
        self.needs_request = needs_request
        self.fn0 = fn0  # an async handler taking nothing: awaited directly (one coroutine less)
        self.handler = handler  # the user's function, its binding plan and controller class (OpenAPI)
        self.plan = plan
        self.owner = owner


class _Pending:
    __slots__ = ("fn", "cls", "attr", "status", "route", "middleware")

    def __init__(self, fn, cls, attr, status, route, middleware=()):
        self.fn, self.cls, self.attr, self.status, self.route = fn, cls, attr, status, route
        self.middleware = tuple(middleware)  # native middleware of this route only


def to_response(result: Any, status: int = 200) -> Response:
    """Turn a handler's return value into a response (the ``serialize`` hot path)."""
    cls = result.__class__
    if cls is dict or cls is list:
        return Response(json_bytes(result), status, None, CT_JSON)
    if isinstance(result, (Response, PerRequestResponse)):
        return result
    if result is None:
        return Response(b"", 204 if status == 200 else status)
    if isinstance(result, str):
        return Response(result.encode(), status, None, CT_TEXT)
    if isinstance(result, (bytes, bytearray, memoryview)):
        return Response(bytes(result), status, None, b"application/octet-stream")
    if hasattr(result, "__aiter__"):
        return StreamingResponse(result, status)
    return Response(json_bytes(result), status, None, CT_JSON)


class App(MethodShortcuts):
    def __init__(self, *, container: Container | None = None, max_body_size: int = DEFAULT_MAX_BODY,
                 max_header_bytes: int = 16384, max_headers: int = 100,
                 body_timeout: float | None = DEFAULT_BODY_TIMEOUT,
                 metrics: Metrics | None = None, debug: bool = False, form_limits=None,
                 ws_max_message: int | None = 1 << 20, redirect_slashes: bool = True, lifespan=None):
        if body_timeout is not None and body_timeout < 0:
            raise ValueError("body_timeout must be >= 0 seconds (0 or None: no limit)")
        self.router = Router()
        self.container = container if container is not None else Container()
        if Request not in self.container:  # request-scoped providers may take the request (di.request_value)
            self.container.request_value(Request)
        self.middleware = MiddlewareStack()
        self.max_body = max_body_size
        self.body_timeout = body_timeout or None
        self.max_header_bytes = max_header_bytes
        self.max_headers = max_headers
        self.metrics = metrics
        self.debug = debug
        self.form_limits = form_limits  # forms.FormLimits for every form of the app (None: the defaults)
        self.ws_max_message = ws_max_message  # bytes per WebSocket message (1009 above; None: the server's limit)
        self.redirect_slashes = redirect_slashes  # a miss whose path has a route with/without its last "/": 307
        self._pending: list[_Pending] = []
        self._startup_hooks: list[Callable] = []
        self._shutdown_hooks: list[Callable] = []
        self._lifespan_factory = lifespan  # lifespan(app): an async context manager around the app's life (Starlette's)
        self._lifespan_cm = None
        self.lifespan_state: dict | None = None  # the mapping the lifespan yielded: each request.state starts from it
        self.state = State()  # the app's own attributes (Starlette's app.state)
        self._controllers: dict = {}  # class -> instance (app-lifetime controllers)
        self._compiled = False
        self._started = False
        self._stopped = False
        self._start_lock: asyncio.Lock | None = None
        self._n = 0
        self._static: dict = {}
        self._asgi = self._boot
        self._asgi_middleware = False
        self._not_found = problem(404, "Not Found", "no route matches this path")
        self.ws_router = Router()
        self._ws_pending: list[_Pending] = []
        self._exc_handlers: dict = {}  # exception class or status code -> handler(request, exc)
        self._native = None  # the native middleware chain (request -> response), when there is one
        self._ws_hooks: tuple = ()  # native middleware's websocket(ws) hooks, run before each WebSocket handler

    # -- registration -------------------------------------------------------------------------
    def route(self, pattern: str, methods=("GET",), *, name: str | None = None, status: int = 200,
              middleware=(), **docs):
        """Register a handler.  ``middleware``: native ``Middleware`` instances run around this route
        only (outermost first); the app's other routes do not pay for them.  ``docs``: how the route
        shows in the OpenAPI document (``tags``, ``summary``, ``description``, ``deprecated``,
        ``include_in_schema``; ``routing.route_docs``)."""
        middleware = route_middleware(middleware)
        meta = {"openapi": route_docs(**docs)} if docs else None

        def deco(fn):
            r = self.router.add(pattern, methods, None, name, meta, default_name=getattr(fn, "__name__", None))
            self._pending.append(_Pending(fn, None, None, status, r, middleware))
            return fn

        return deco

    def websocket(self, pattern: str, *, name: str | None = None, max_message: int | None = None):
        """Register a WebSocket handler: it takes a ``WebSocket`` parameter (plus typed path parameters,
        query parameters and DI dependencies, bound like an HTTP handler's); ``max_message`` overrides the
        app's ``ws_max_message`` for this route."""
        def deco(fn):
            meta = {"max_message": max_message} if max_message is not None else None
            r = self.ws_router.add(pattern, ("GET",), None, name, meta)
            self._ws_pending.append(_Pending(fn, None, None, 101, r))
            return fn

        return deco

    def mount(self, prefix: str, target, *, name: str | None = None) -> None:
        """Serve every path under ``prefix`` with ``target``: a handler ``await target(request, path)``
        (GET and HEAD), e.g. ``app.mount("/static", StaticFiles("public"))``, or an ASGI app (every
        method; ``mounts.py``), e.g. ``app.mount("/metrics", make_asgi_app())``.  ``prefix`` itself
        redirects to ``prefix/``."""
        prefix = "/" + prefix.strip("/")
        if prefix == "/":
            raise ValueError("mount needs a prefix other than '/'")
        if is_asgi_app(target):
            methods = _EVERY_METHOD

            async def handler(request: Request, path: str):
                return MountedApp(target, request, request.scope.get("root_path", "") + prefix)
        else:
            methods = ("GET", "HEAD")
            handler = target

        async def mounted(request: Request, path: str):
            return await handler(request, path)

        async def mounted_root(request: Request):
            return await handler(request, "")

        async def add_slash(request: Request):  # the prefix itself: its root, as a directory's URL
            query = request.query_string
            location = encode_path(request.path) + "/"
            return Response.redirect(location + ("?" + query if query else ""), 307)

        for fn in (mounted, mounted_root, add_slash):
            fn.__name__ = fn.__qualname__ = f"mount({prefix!r})"  # no url_for name of its own (name= gives one)
        hidden = {"include_in_schema": False}  # OpenAPI: a mount is not an operation
        self.route(prefix + "/{path:path}", methods, name=name, **hidden)(mounted)
        self.route(prefix + "/", methods, **hidden)(mounted_root)
        self.route(prefix, methods, **hidden)(add_slash)
        if methods is _EVERY_METHOD:  # WebSockets under the prefix go to the mounted app too
            self._mount_websockets(prefix, target)

    def _mount_websockets(self, prefix: str, target) -> None:
        async def mounted_ws(ws: WebSocket, path: str):
            await WebSocketBridge(ws).serve(target, ws.scope.get("root_path", "") + prefix)

        async def mounted_ws_root(ws: WebSocket):
            await mounted_ws(ws, "")

        for fn in (mounted_ws, mounted_ws_root):
            fn.__qualname__ = f"mount({prefix!r})"
        self.websocket(prefix + "/{path:path}")(mounted_ws)
        self.websocket(prefix + "/")(mounted_ws_root)

    def exception_handler(self, key):
        """Register ``handler(request, exc) -> response`` for an exception class (its subclasses too;
        the most specific class wins) or for an HTTP status (``HTTPException``s of that status, and
        the router's 404 and 405)."""
        if not (isinstance(key, int) or (inspect.isclass(key) and issubclass(key, BaseException))):
            raise TypeError(f"exception_handler takes an exception class or a status code, not {key!r}")

        def deco(fn):
            if self._compiled:
                raise RuntimeError("register exception handlers before start-up")
            self._exc_handlers[key] = fn
            return fn

        return deco

    def enable_openapi(self, **options) -> None:
        """Serve an OpenAPI 3.1 document of the routes (``/openapi.json``) and Swagger UI (``/docs``);
        options: see ``openapi.enable_openapi``.  Off unless called: production apps opt in."""
        from .openapi import enable_openapi

        enable_openapi(self, **options)

    def controller(self, cls, *, prefix: str = "", middleware=(), tags=()):
        """Register a controller's routes under ``prefix`` + its own ``prefix``, with ``middleware``
        (a route group's) around each route's own and ``tags`` (a group's) in the OpenAPI document."""
        prefix = join_prefix(prefix, getattr(cls, "prefix", "") or "")
        # a group's middleware, then the class's own (its ``middleware`` attribute, as Litestar's controllers)
        middleware = route_middleware(middleware) + route_middleware(getattr(cls, "middleware", None) or ())
        tags = route_docs(tags=tags)["tags"]
        found = controller_routes(cls)
        if not found:
            raise TypeError(f"controller {cls.__qualname__} declares no routes")
        for attr, pattern, methods, name, status, own, docs in found:
            if tags:  # a group's tags before the route's own
                docs = {**(docs or route_docs()), "tags": (*tags, *(docs or {}).get("tags", ()))}
            meta = {"openapi": docs} if docs else None
            r = self.router.add(join_prefix(prefix, pattern), methods, None, name, meta, default_name=attr)
            self._pending.append(_Pending(getattr(cls, attr), cls, attr, status, r, middleware + own))
        return cls

    def include(self, group) -> None:
        """Register a ``RouteGroup``'s routes (``groups.py``)."""
        group.register(self)

    def add_middleware(self, factory, priority: int = 100, **options):
        self.middleware.add(factory, priority, **options)

    def on_startup(self, fn):
        self._startup_hooks.append(fn)
        return fn

    def on_shutdown(self, fn):
        self._shutdown_hooks.append(fn)
        return fn

    def url_for(self, name: str, /, **params) -> str:
        return self.router.url_for(name, **params)

    # -- compilation (once) -------------------------------------------------------------------
    def compile(self) -> "App":
        if self._compiled:
            return self
        c = self.container.compile()
        ctl_deps: dict = {}
        for p in self._pending:
            plan = build_plan(p.fn, path_types(p.route.parsed), c, skip_self=p.cls is not None)
            for kind, pname, extra, _ in plan:
                if kind == 3:  # P_DEP
                    c.check(((pname, extra),), p.fn.__qualname__)
            if p.cls is not None and p.cls not in ctl_deps:
                deps = dependencies_of(p.cls)
                c.check(deps, p.cls.__qualname__)
                ctl_deps[p.cls] = deps
            call, simple = self._make_call(p, plan, ctl_deps.get(p.cls))
            model = response_model(p.fn)
            if model is not None:  # the result converted to the return annotation (FastAPI's response_model)
                call, simple = converting(call, model, p.status, p.fn.__qualname__), False
            if p.middleware:
                call, simple = self._with_route_middleware(call, p), False
            # A handler taking nothing gets no request object - unless exception handlers may need one.
            simple = simple and not self._exc_handlers
            fn0 = p.fn if simple and inspect.iscoroutinefunction(p.fn) else None
            p.route.endpoint = _Endpoint(call, p.status, not simple, fn0, p.fn, plan, p.cls)
        for p in self._ws_pending:
            plan = build_plan(p.fn, path_types(p.route.parsed), c, skip_self=False)
            p.route.endpoint = _Endpoint(self._make_call(p, plan, None)[0], p.status, True, None, p.fn, plan)
        self.router.compile()
        self.ws_router.compile()
        self._static = self.router._static
        if self.middleware.native_count:
            self._native = self.middleware.build_native(self._endpoint)
            self._ws_hooks = self.middleware.websocket_hooks()
        self._chain = self.middleware.build(self._core)
        self._asgi_middleware = self.middleware.asgi_count > 0
        self._compiled = True
        return self

    def _make_call(self, p: _Pending, plan: tuple, cdeps):
        """``(call(request, hot) -> result, takes_nothing)``: the handler with its bound parameters."""
        fn, cls, c = p.fn, p.cls, self.container
        is_async = inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)
        if inspect.isasyncgenfunction(fn):
            is_async = False  # calling it returns the async iterator -> streamed
        per_request_ctl = cls is not None and c.needs_request_scope(cdeps)
        needs_scope = per_request_ctl or plan_needs_scope(plan, c) or any(e[0] == 3 for e in plan)
        reads_body = any(e[0] == P_BODY for e in plan)
        reads_form = plan_reads_form(plan)
        controllers = self._controllers

        if not needs_scope and not plan and cls is None:
            if is_async:
                async def call0(req, hot):
                    return await fn()
            else:
                async def call0(req, hot):
                    return fn()
            return call0, True

        if not needs_scope:
            async def call_plain(req, hot):
                kwargs = await bind(plan, req, None) if plan else _EMPTY
                if cls is not None:
                    r = fn(controllers[cls], **kwargs)
                else:
                    r = fn(**kwargs)
                return await r if is_async else r
            return call_plain, False

        async def call_scoped(req, hot):
            if reads_body:  # before any provider runs: a slow upload must not hold a pooled connection
                await req.body()
            elif reads_form:
                await req.form()
            t = perf_counter() if hot is not None else 0.0
            scope = req.di = RequestScope(c, req)
            if cls is not None:
                if per_request_ctl:
                    deps = {}
                    for n, tok in cdeps:  # a loop, not a comprehension: an await inside one is a coroutine more
                        deps[n] = await scope.resolve(tok)
                    inst = cls(**deps)
                else:
                    inst = controllers[cls]
                kwargs = await bind(plan, req, scope)
                if hot is not None:
                    hot.observe_hot("di_scope", perf_counter() - t)
                r = fn(inst, **kwargs)
            else:
                kwargs = await bind(plan, req, scope)
                if hot is not None:
                    hot.observe_hot("di_scope", perf_counter() - t)
                r = fn(**kwargs)
            return await r if is_async else r
        return call_scoped, False

    def _with_route_middleware(self, call, p: _Pending):
        """``call`` wrapped in the route's own native middleware: handler errors become responses
        inside the chain (as on the app-wide chain), so the middleware sees and decorates them."""
        status, pattern = p.status, p.route.pattern
        stack = MiddlewareStack()
        for mw in p.middleware:
            stack.add(mw)

        async def endpoint(req):
            try:
                result = await call(req, None)
                return result if result.__class__ is Response else to_response(result, status)
            except Exception as e:
                req.exc = e
                return await self._error(req, e, req.method, pattern)

        chain = stack.build_native(endpoint)

        async def call_with_middleware(req, hot):
            return await chain(req)
        return call_with_middleware

    # -- lifecycle ----------------------------------------------------------------------------
    async def startup(self) -> None:
        """Start the app: the container's providers, app-lifetime controllers, the start-up hooks, the
        lifespan, metrics.  After a shutdown it starts again (a new run, as each ``with TestClient(app)``
        block is); a request that races a shutdown does not (``_start_once``)."""
        if self._started and not self._stopped:
            return
        self._stopped = False
        self.compile()
        await self.container.startup()
        for p in self._pending:
            cls = p.cls
            if cls is not None and cls not in self._controllers:
                deps = dependencies_of(cls)
                if not self.container.needs_request_scope(deps):
                    self._controllers[cls] = cls(**{n: await self.container.resolve(t) for n, t in deps})
        for hook in self._startup_hooks:
            r = hook()
            if inspect.isawaitable(r):
                await r
        if self._lifespan_factory is not None:
            cm = self._lifespan_factory(self)
            yielded = await cm.__aenter__()
            if yielded is not None and not isinstance(yielded, Mapping):
                await cm.__aexit__(None, None, None)
                raise TypeError(f"the lifespan yields a mapping (its request state) or nothing, not {yielded!r}")
            self._lifespan_cm = cm
            self.lifespan_state = None if yielded is None else dict(yielded)
        if self.metrics is not None:
            self.metrics.start()
        self._started = True
        self._asgi = self._chain
        # What start-up built (modules, routes, compiled templates, singletons) lives as long as the
        # process: move it out of the collector's reach so that full collections scan only request garbage.
        gc.freeze()

    async def shutdown(self) -> None:
        # ``_started`` stays True: a request racing the shutdown must not start the app again.
        if not self._started or self._stopped:
            return
        self._stopped = True
        cm, self._lifespan_cm = self._lifespan_cm, None
        self.lifespan_state = None
        failure = None  # the first step that failed: every step still runs, then it is raised (lifespan.shutdown.failed)
        if cm is not None:
            try:
                await cm.__aexit__(None, None, None)
            except Exception as e:
                log.exception("the lifespan's exit failed")
                failure = e
        for hook in reversed(self._shutdown_hooks):
            try:
                r = hook()
                if inspect.isawaitable(r):
                    await r
            except Exception as e:
                log.exception("shutdown hook failed")
                failure = failure or e
        if self.metrics is not None:
            await self.metrics.stop()
        try:
            await self.container.shutdown()
        finally:
            self._controllers.clear()
        if failure is not None:
            raise failure

    async def __call__(self, scope, receive, send) -> None:
        await self._asgi(scope, receive, send)

    # -- RSGI (granian's native interface; rsgi.py) -------------------------------------------
    def __rsgi_init__(self, loop) -> None:
        """granian calls this in each worker before its loop runs."""
        loop.run_until_complete(self.startup())

    def __rsgi_del__(self, loop) -> None:
        """granian calls this in each worker after its loop stopped."""
        try:
            loop.run_until_complete(self.shutdown())
        except Exception:
            log.exception("shutdown failed")

    async def __rsgi__(self, scope, proto) -> None:
        if not self._started:
            await self._start_once()
        if scope.proto != "http":
            return await serve_rsgi_websocket(self, scope, proto, self._chain if self._asgi_middleware else None)
        if self._asgi_middleware:
            return await serve_asgi(self._chain, asgi_scope(scope, self), proto)
        t0 = perf_counter()
        method = scope.method
        headers = scope.headers.items()
        resp, label, req, exc = await self._dispatch(method, scope.path, headers, RSGIRequest, scope, proto, t0)
        if resp.__class__ is Response or isinstance(resp, Response):  # subclasses too: one whole body
            proto.response_bytes(resp.status, response_headers(resp), resp.body)
        else:
            try:
                if resp.wants_request:
                    resp.negotiate(req if req is not None else RSGIRequest(scope, proto, _EMPTY, self.max_body, self))
                await resp.send_rsgi(proto)
            except Exception as e:  # a streaming generator that failed mid-way, or the client left
                exc = exc or e
                if e.__class__.__name__ == "RSGIProtocolClosed":  # granian's: the client left, as OSError on ASGI
                    log.debug("client gone while sending the response to %s %s", method, label)
                else:
                    log.exception("error while sending the response to %s %s", method, label)
        if req is not None:
            await self._finish(req, exc)
        if self.metrics is not None:
            self.metrics.observe_request(label, method, resp.status, perf_counter() - t0)

    def asgi(self):
        """The compiled ASGI callable (middleware chain + core), for servers: one call frame less than
        ``App.__call__``.  Needs a server that runs the ASGI lifespan (granian and uvicorn do); without
        one the app still starts on its first request."""
        self.compile()
        return self._chain

    async def _boot(self, scope, receive, send) -> None:
        # Before start-up: the lifespan goes through the chain once compiled; a server without
        # lifespan support starts the app on its first request.
        self.compile()
        if scope["type"] != "lifespan" and not self._started:
            await self._start_once()
        await self._chain(scope, receive, send)

    async def _lifespan(self, receive, send) -> None:
        while True:
            msg = await receive()
            t = msg["type"]
            if t == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as e:
                    log.exception("start-up failed")
                    await send({"type": "lifespan.startup.failed", "message": f"{type(e).__name__}: {e}"})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif t == "lifespan.shutdown":
                try:
                    await self.shutdown()
                except Exception as e:
                    await send({"type": "lifespan.shutdown.failed", "message": f"{type(e).__name__}: {e}"})
                    return
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- the request path ---------------------------------------------------------------------
    async def _core(self, scope, receive, send) -> None:
        """The ASGI front end (the innermost app of the ASGI middleware chain)."""
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                return await self._lifespan(receive, send)
            if not self._started:
                await self._start_once()
            if scope["type"] == "websocket":
                await serve_asgi_websocket(self, scope, receive, send)
            return
        if not self._started:
            await self._start_once()
        t0 = perf_counter()
        method = scope["method"]
        scope["app"] = self
        path = scope["path"] if not scope.get("root_path") else route_path(scope)
        resp, label, req, exc = await self._dispatch(method, path, scope["headers"], Request, scope, receive, t0)
        try:
            if resp.__class__ is Response:
                await send({"type": "http.response.start", "status": resp.status, "headers": resp.raw_headers})
                await send({"type": "http.response.body", "body": resp.body})
            else:
                if resp.wants_request:
                    resp.negotiate(req if req is not None else Request(scope, receive, _EMPTY, self.max_body, self))
                await resp(scope, receive, send)
        except OSError as e:  # the client left mid-response (uvicorn's ClientDisconnected is one)
            exc = exc or e
            log.debug("client gone while sending the response to %s %s", method, label)
        except Exception as e:  # e.g. a streaming generator that failed mid-way
            exc = exc or e
            log.exception("error while sending the response to %s %s", method, label)
        if req is not None:
            await self._finish(req, exc)
        if self.metrics is not None:
            self.metrics.observe_request(label, method, resp.status, perf_counter() - t0)

    async def _start_once(self) -> None:
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if not self._started:  # never again once stopped: only a lifespan start-up restarts the app
                await self.startup()

    async def _dispatch(self, method: str, path: str, headers, request_cls, source, channel, t0: float):
        """Route, bind, run the handler and turn its result into a response, for either front end:
        returns ``(response, route label, request or None, exception or None)``; the caller sends.

        ``headers`` are the raw pairs (bytes for ASGI, str for RSGI), ``request_cls(source, channel,
        params, max_body, app)`` builds the request only for handlers that take something."""
        hsize = 0
        has_body = False  # a Content-Length other than 0, or a Transfer-Encoding
        for hk, hv in headers:  # bytes pairs (ASGI) or str pairs (RSGI)
            hsize += len(hk) + len(hv)
            if hk in _BODY_HEADERS and hv.strip() not in _ZERO:
                has_body = True
        if hsize > self.max_header_bytes or len(headers) > self.max_headers:
            resp = problem(431, "Request Header Fields Too Large",
                           f"at most {self.max_headers} headers and {self.max_header_bytes} bytes")
            return _closing(resp), UNMATCHED, None, None
        if self._native is not None:
            req = request_cls(source, channel, _EMPTY, self.max_body, self)
            try:
                resp = await self._native(req)
            except Exception as e:  # raised by a middleware itself
                resp = await self._error(req, e, method, UNMATCHED)
            label = UNMATCHED if req.route is None else req.route.pattern
            exc = req.exc
        else:
            resp, label, req, exc = await self._run(method, path, request_cls, source, channel, t0)
        if has_body and (req is None or req._body is None):
            resp = await self._unread_body(resp, req, exc, request_cls, source, channel)
        return resp, label, req, exc

    async def _run(self, method: str, path: str, request_cls, source, channel, t0: float):
        """The path without native middleware: the request object only for handlers that take one."""
        metrics = self.metrics
        hot = None
        if metrics is not None:
            n = self._n = self._n + 1
            if not (n & metrics.sample_mask):
                hot = metrics
        route = None
        slot = self._static.get(path)
        if slot is not None:
            hit = slot.get(method)
            if hit is not None:
                route = hit[0]
                params = hit[1]  # {} - or None for each parameter an optional part leaves out
        if route is None:
            m = self.router.match(method, path)
            route = m.route
            params = m.params
        if hot is not None:
            t1 = perf_counter()
            hot.observe_hot("route_match", t1 - t0)
        if route is None:
            req = None
            if self._exc_handlers or self.redirect_slashes:
                req = request_cls(source, channel, _EMPTY, self.max_body, self)
            return await self._miss(m, method, req), UNMATCHED, req, None
        label = route.pattern
        ep = route.endpoint
        req = request_cls(source, channel, params, self.max_body, self) if ep.needs_request else None
        try:
            fn0 = ep.fn0
            if fn0 is not None:
                result = await fn0()
            else:
                result = await ep.call(req, hot)  # req is None for handlers that take nothing
            if hot is not None:
                t2 = perf_counter()
                hot.observe_hot("handler", t2 - t1)
                resp = result if result.__class__ is Response else to_response(result, ep.status)
                hot.observe_hot("serialize", perf_counter() - t2)
            else:
                resp = result if result.__class__ is Response else to_response(result, ep.status)
        except Exception as e:
            return await self._error(req, e, method, label), label, req, e
        return resp, label, req, None if req is None else req.exc  # set by route middleware's chain

    async def _endpoint(self, req):
        """The innermost step of the native middleware chain: route, bind, run, turn into a response."""
        method = req.method
        m = self.router.match(method, req.route_path)
        route = m.route
        if route is None:
            return await self._miss(m, method, req)
        req.route = route
        req.path_params = m.params
        ep = route.endpoint
        try:
            result = await ep.call(req, None)
            return result if result.__class__ is Response else to_response(result, ep.status)
        except Exception as e:
            req.exc = e
            return await self._error(req, e, method, route.pattern)

    async def _miss(self, m, method: str, req):
        """404 or 405 (with ``Allow``) for a request no route takes, through a status handler if any."""
        if m.status == 404:
            if self.redirect_slashes and req is not None:
                redirect = self._slash_redirect(req, method)
                if redirect is not None:
                    return redirect
            if not self._exc_handlers:
                return self._not_found
            e = NotFound("no route matches this path")
            if self._handler_for(e) is None:
                return self._not_found
        else:
            e = MethodNotAllowed(method, m.allow)
            if self._handler_for(e) is None:
                return problem(e.status, e.title, e.detail, headers=e.headers)
        return await self._error(req, e, method, UNMATCHED)

    def _slash_redirect(self, req, method: str) -> Response | None:
        """307 to the path with its trailing slash added or removed, when only that form has a route
        (as Starlette's ``redirect_slashes``); the query string is kept."""
        path = req.route_path
        if path == "/":
            return None
        other = path[:-1] if path.endswith("/") else path + "/"
        if self.router.match(method, other).route is None:
            return None
        full = req.path
        other = full[:len(full) - len(path)] + other  # the root path, when there is one, in front
        if other.startswith("//"):
            return None  # "//host/..." in a Location would send the client to another site
        qs = req.query_string
        location = encode_path(other)
        return Response.redirect(location + "?" + qs if qs else location, 307)

    def _handler_for(self, e: Exception):
        """The handler for ``e``, as Starlette picks it: an ``HTTPException`` goes to the handler of its
        status, else to the most specific class handler up to ``HTTPException`` (a handler for
        ``Exception`` is for server errors and never turns a 404 or a 422 into something else); any
        other exception to the most specific class handler, else to the handler of 500."""
        handlers = self._exc_handlers
        if not handlers:
            return None
        if isinstance(e, HTTPException):
            h = handlers.get(e.status)
            if h is not None:
                return h
            for cls in type(e).__mro__:
                if cls is Exception:
                    return None
                h = handlers.get(cls)
                if h is not None:
                    return h
            return None
        for cls in type(e).__mro__:
            h = handlers.get(cls)
            if h is not None:
                return h
        return handlers.get(500)

    async def _error(self, req, e: Exception, method: str, label: str):
        """The response for an exception: its registered handler, else problem+json (500 for anything
        that is not an ``HTTPException``, logged).  The background tasks the failed handler added are
        dropped: as in Starlette and FastAPI, they run only after a response the handler returned."""
        if req is not None and req.background is not None:
            req.background = None
        handler = self._handler_for(e)
        if handler is not None:
            try:
                r = handler(req, e)
                # a dict, str... keeps the error's status (never a 200 for an error)
                return to_response(await r if inspect.isawaitable(r) else r,
                                   e.status if isinstance(e, HTTPException) else 500)
            except Exception as e2:
                log.exception("exception handler %r failed for %s %s", handler, method, label)
                e = e2
        if isinstance(e, HTTPException):
            return problem(e.status, e.title, e.detail, errors=e.errors, headers=e.headers)
        log.exception("unhandled error in %s %s", method, label, exc_info=e)
        return problem(500, "Internal Server Error", f"{type(e).__name__}: {e}" if self.debug else None)

    async def _unread_body(self, resp, req, exc, request_cls, source, channel):
        """The request has a body that nobody read.  granian cannot reuse such a connection: it closes
        it after the response, and after a stream it does so without saying ``Connection: close``,
        so a keep-alive client sends its next request into a closing socket.  A success first drains
        a small body, and the connection stays usable.  An error, a body too big or too slow to drain,
        or a stream from a handler that has the request (its generator may still read the body) gets
        ``Connection: close``.  The request's DI scope is closed before the drain waits for the client:
        what it holds (a pooled database connection) must not wait on a slow body; a handler that left
        background tasks (they may use the scope after the response) gets ``Connection: close``."""
        if isinstance(resp, MountedApp):  # the mounted app reads the body itself
            return resp
        if resp.status < 400 and (req is None or isinstance(resp, Response)):
            if req is None:
                req = request_cls(source, channel, _EMPTY, self.max_body, self)
            elif req.di is not None:
                if req.background is not None:
                    return _closing(resp)
                await self._close_scope(req, exc)  # _finish closes it again: a no-op
            if await req.drain(DRAIN_MAX, DRAIN_TIMEOUT):
                return resp
        return _closing(resp)

    @staticmethod
    async def _close_scope(req, exc) -> None:
        """The request's DI scope's teardown (a second call does nothing)."""
        try:
            await req.di.aclose(exc)
        except Exception:
            log.exception("request-scope teardown failed")

    @staticmethod
    async def _finish(req, exc) -> None:
        """After the response: background tasks, then the request's DI scope and uploaded files."""
        req._stop_watch()  # is_disconnected's watch, if the handler started one
        if req.background is not None:
            await req.background.run()
        if req.di is not None:
            await App._close_scope(req, exc)
        if req._form is not None:  # uploaded files: spooled temporary files are freed now
            try:
                await req.close()
            except Exception:
                log.exception("closing the request's uploads failed")
