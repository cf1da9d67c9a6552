"""RpcContext: what a method may ask for by declaring a parameter of this type (or named ``ctx``)."""

from __future__ import annotations

from typing import Any


class RpcContext:
    """Per-call context, built only for methods that asked for it (decided at registration).

    Attributes: ``connection`` (the per-connection Session), ``method``, ``request_id``,
    ``is_notification``, ``scope`` (ASGI scope or the standalone server's connection info)
    and ``user`` (``scope["user"]`` when present, e.g. with Channels' AuthMiddlewareStack).
    Push: ``await ctx.notify(method, params)`` sends a notification to this client;
    ``await ctx.join(group)`` / ``ctx.leave(group)`` subscribe it to broadcasts to that group, and
    ``await ctx.broadcast(group, method, params)`` sends one.
    """

    __slots__ = ("connection", "method", "request_id", "is_notification")

    def __init__(self, connection: Any, method: str, request_id: Any, is_notification: bool):
        self.connection = connection
        self.method = method
        self.request_id = request_id
        self.is_notification = is_notification

    @property
    def scope(self) -> dict:
        conn = self.connection
        return getattr(conn, "scope", None) or {}

    @property
    def user(self) -> Any:
        return self.scope.get("user")

    @property
    def consumer(self) -> Any:
        """The Channels consumer (or None on the standalone server)."""
        return getattr(self.connection, "owner", None)

    async def notify(self, method: str, params: Any = None) -> None:
        await self._session().notify(method, params)

    async def broadcast(self, group: str, method: str, params: Any = None):
        """Notify every connection in ``group`` (this one included if it joined)."""
        session = self._session()
        out = self._hub(session).broadcast(group, method, params)
        return await out if hasattr(out, "__await__") else out

    async def join(self, group: str) -> None:
        session = self._session()
        await self._hub(session).join(session, group)

    async def leave(self, group: str) -> None:
        session = self._session()
        await self._hub(session).leave(session, group)

    def _session(self):
        if self.connection is None:
            raise RuntimeError("this call has no connection (engine called without a Session)")
        return self.connection

    @staticmethod
    def _hub(session):
        hub = getattr(session, "hub", None)
        if hub is None:
            raise RuntimeError("this connection has no group registry (its transport offers no push groups)")
        return hub

    def __repr__(self) -> str:
        return (f"RpcContext(method={self.method!r}, request_id={self.request_id!r}, "
                f"is_notification={self.is_notification})")
