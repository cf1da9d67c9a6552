"""Pure-ASGI middleware with priorities.

A middleware is any factory ``factory(app, **options) -> asgi_app`` (usually a class whose
``__init__`` takes the next app).  ``MiddlewareStack.build`` sorts the entries once (lower priority =
outer; equal priorities keep registration order) and wraps the endpoint app once at start-up; the
resulting chain is reused for every request.
"""
from __future__ import annotations

from typing import Any, Callable

from .types import ASGIApp

__all__ = ["MiddlewareStack", "Middleware"]


class Middleware:
    """Convenience base: subclass and override ``__call__``; ``self.app`` is the next app."""

    def __init__(self, app: ASGIApp, **options: Any):
        self.app = app
        self.options = options

    async def __call__(self, scope, receive, send):
        await self.app(scope, receive, send)


class MiddlewareStack:
    def __init__(self):
        self._entries: list[tuple[int, int, Callable, dict]] = []
        self._built = False

    def add(self, factory: Callable[..., ASGIApp], priority: int = 100, **options: Any) -> None:
        if self._built:
            raise RuntimeError("middleware stack already built; add middleware before start-up")
        if not callable(factory):
            raise TypeError(f"middleware {factory!r} is not callable")
        self._entries.append((priority, len(self._entries), factory, options))

    def order(self) -> list[Callable]:
        return [e[2] for e in sorted(self._entries, key=lambda e: (e[0], e[1]))]

    def build(self, app: ASGIApp) -> ASGIApp:
        entries = sorted(self._entries, key=lambda e: (e[0], e[1]))
        for _prio, _seq, factory, options in reversed(entries):
            app = factory(app, **options)
        self._built = True
        return app

    def __len__(self) -> int:
        return len(self._entries)
