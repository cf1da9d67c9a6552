"""``RouteGroup``: routes declared apart from the app and added to it under a prefix, with middleware of
their own (FastAPI's ``APIRouter``, Sanic's ``Blueprint``, Litestar's ``Router``).

    api = RouteGroup("/api/v1", middleware=[TimeoutMiddleware(5)])

    @api.get("/items/{id:int}", name="item")
    async def item(id: int): ...

    api.controller(Orders)           # a controller's routes, under the group's prefix
    api.include(admin_group)         # groups nest: prefixes join, middleware stacks outer first
    app.include(api)

A group only records what is declared on it; ``App.include`` registers it on the app, so a group can be
declared in a module of its own and included in several apps.  The group's middleware runs around each
of its routes (outside the route's own, inside the app's) as route middleware does: the app's other
routes do not pay for it.  WebSocket routes and mounts take the prefix, not the middleware.
"""
from __future__ import annotations

from .middleware import route_middleware
from .routing import MethodShortcuts, route_docs

__all__ = ["RouteGroup", "join_prefix"]


def join_prefix(prefix: str, pattern: str) -> str:
    """``prefix`` + ``pattern`` as one path pattern (``"/api" + "/items"``, ``"/api" + ""`` → ``"/api"``)."""
    full = prefix.rstrip("/") + pattern if prefix else pattern
    return full or "/"


def _checked_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or (prefix and not prefix.startswith("/")):
        raise ValueError(f"a group prefix is empty or starts with '/', not {prefix!r}")
    return prefix.rstrip("/")


class RouteGroup(MethodShortcuts):
    """``tags``: OpenAPI tags of every route of the group (before each route's own)."""

    def __init__(self, prefix: str = "", *, middleware=(), tags=()):
        self.prefix = _checked_prefix(prefix)
        self.middleware = route_middleware(middleware)
        self.tags = route_docs(tags=tags)["tags"]
        self._entries: list[tuple] = []  # (kind, args, options), replayed in order by register()

    def route(self, pattern: str, methods=("GET",), *, name: str | None = None, status: int = 200,
              middleware=(), **docs):
        middleware = route_middleware(middleware)
        route_docs(**docs)  # checked now, where the mistake is

        def deco(fn):
            self._entries.append(("route", (pattern, methods, fn), {"name": name, "status": status,
                                                                      "middleware": middleware, **docs}))
            return fn

        return deco

    def websocket(self, pattern: str, *, name: str | None = None, max_message: int | None = None):
        def deco(fn):
            self._entries.append(("websocket", (pattern, fn), {"name": name, "max_message": max_message}))
            return fn

        return deco

    def controller(self, cls):
        self._entries.append(("controller", (cls,), {}))
        return cls

    def mount(self, prefix: str, target, *, name: str | None = None) -> None:
        self._entries.append(("mount", (prefix, target), {"name": name}))

    def include(self, group: "RouteGroup") -> None:
        if group is self:
            raise ValueError("a group cannot include itself")
        self._entries.append(("group", (group,), {}))

    def register(self, app, prefix: str = "", middleware: tuple = (), tags: tuple = (),
                 _outer: frozenset = frozenset()) -> None:
        """Add every route of the group (and of the groups it includes) to ``app``, under ``prefix`` +
        the group's prefix, inside ``middleware`` and after ``tags`` (an including group's)."""
        if self in _outer:
            raise ValueError("route groups include each other in a cycle")
        prefix = join_prefix(prefix, self.prefix) if self.prefix else prefix
        middleware = middleware + self.middleware
        tags = tags + self.tags
        for kind, args, options in self._entries:
            if kind == "route":
                pattern, methods, fn = args
                options = dict(options, middleware=middleware + options["middleware"],
                               tags=(*tags, *options.get("tags", ())))
                if not options["tags"]:
                    del options["tags"]  # no docs options: no OpenAPI entry in the route's meta
                app.route(join_prefix(prefix, pattern), methods, **options)(fn)
            elif kind == "websocket":
                pattern, fn = args
                app.websocket(join_prefix(prefix, pattern), **options)(fn)
            elif kind == "controller":
                app.controller(args[0], prefix=prefix, middleware=middleware, tags=tags)
            elif kind == "mount":
                app.mount(join_prefix(prefix, args[0]), args[1], **options)
            else:
                args[0].register(app, prefix, middleware, tags, _outer | {self})
