"""RpcContext: what a method may ask for by declaring a parameter of this type (or named ``ctx``)."""

from __future__ import annotations

from typing import Any


class RpcContext:
    """Per-call context, built only for methods that asked for it (decided at registration).

    Attributes: ``connection`` (the per-connection Session), ``method``, ``request_id``,
    ``is_notification``, ``scope`` (ASGI scope or the standalone server's connection info)
    and ``user`` (``scope["user"]`` when present, e.g. with Channels' AuthMiddlewareStack).
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

    def __repr__(self) -> str:
        return (f"RpcContext(method={self.method!r}, request_id={self.request_id!r}, "
                f"is_notification={self.is_notification})")
