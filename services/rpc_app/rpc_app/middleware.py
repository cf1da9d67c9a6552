"""Middleware hooks around every call.

Subclass ``Middleware`` and override either hook (sync or ``async def``; the engine
looks once, at construction, at which hooks exist and whether any is async):

* ``before_call(ctx, params)`` runs before the method; raise ``RpcError`` to refuse the call.
* ``after_call(ctx, result, error)`` runs after it (``error`` is the RpcError sent, or None).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from .context import RpcContext


class Middleware:
    def before_call(self, ctx: RpcContext, params: Any) -> None:  # pragma: no cover - default
        return None

    def after_call(self, ctx: RpcContext, result: Any, error: Any) -> None:  # pragma: no cover
        return None


def _overrides(mw, name: str) -> bool:
    return getattr(type(mw), name, None) is not getattr(Middleware, name)


class MiddlewareChain:
    """Hooks resolved once: only overridden hooks are called, in order (after_call reversed)."""

    __slots__ = ("before", "after", "is_async", "active")

    def __init__(self, middleware=()):
        mws = list(middleware)
        for mw in mws:
            if not isinstance(mw, Middleware):
                raise TypeError(f"middleware must subclass rpc_app.Middleware, got {type(mw).__name__}")
        self.before = tuple(mw.before_call for mw in mws if _overrides(mw, "before_call"))
        self.after = tuple(mw.after_call for mw in reversed(mws) if _overrides(mw, "after_call"))
        self.is_async = any(inspect.iscoroutinefunction(h) for h in self.before + self.after)
        self.active = bool(self.before or self.after)

    def run_before(self, ctx, params) -> None:
        for hook in self.before:
            hook(ctx, params)

    def run_after(self, ctx, result, error) -> None:
        for hook in self.after:
            hook(ctx, result, error)

    async def arun_before(self, ctx, params) -> None:
        for hook in self.before:
            r = hook(ctx, params)
            if inspect.isawaitable(r):
                await r

    async def arun_after(self, ctx, result, error) -> None:
        for hook in self.after:
            r = hook(ctx, result, error)
            if inspect.isawaitable(r):
                await r


class LoggingMiddleware(Middleware):
    """Example: log each call's method and outcome (never its params)."""

    def __init__(self, logger: logging.Logger | None = None):
        self.log = logger or logging.getLogger("rpc_app.calls")

    def after_call(self, ctx, result, error):
        if error is None:
            self.log.info("%s id=%r ok", ctx.method, ctx.request_id)
        else:
            self.log.info("%s id=%r error %s", ctx.method, ctx.request_id, error.code)
