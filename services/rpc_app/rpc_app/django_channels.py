"""Django Channels front end: subclass ``AsyncJsonRpcConsumer`` and mark methods with ``@rpc_method``.

    from rpc_app.django_channels import AsyncJsonRpcConsumer, rpc_method

    class Api(AsyncJsonRpcConsumer):
        @rpc_method()
        def add(self, a: int, b: int):
            return a + b

        @rpc_method("orders.mine", permission_required="shop.view_order")
        def my_orders(self, ctx: RpcContext):
            return list(Order.objects.filter(owner=ctx.user).values("id", "total"))

        @rpc_method("rooms.join")
        async def join(self, room: str, ctx: RpcContext):
            await ctx.join(room)           # Channels group; later: await broadcast(room, "rooms.message", {...})

The registry, the signature introspection and the engine are built once per subclass (at class
creation), never per connection or per call. Async calls run concurrently (``rpc_max_in_flight`` per
connection, batch members included) and are cancelled as soon as the client disconnects.

Django's ORM may not run on the event loop: when a database is configured, sync methods (and blocking
ones) run through Channels' ``database_sync_to_async`` (asgiref's thread-sensitive ``sync_to_async``, with
Django's connection clean-up around each call). Without a database they run inline, at no thread cost.

Class attributes to override: ``rpc_limits``, ``rpc_debug``, ``rpc_middleware``, ``rpc_rate_limit``,
``rpc_max_in_flight``, ``rpc_call_timeout``, ``rpc_json_default``, ``rpc_metrics`` (a shared ``Metrics``),
``rpc_sync_in_thread`` and ``rpc_close_old_db_connections`` (None: decided by whether a database is
configured). The byte limit also needs the ASGI server's own frame limit (uvicorn: ``--ws-max-size``);
the engine refuses an over-limit message with -32001 either way.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time

from channels.db import aclose_old_connections, database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer

from . import errors as E
from .concurrency import Session
from .engine import Engine
from .errors import RpcError
from .limits import Limits
from .metrics import Metrics
from .registry import collect_marked
from .registry import rpc_method as _mark

__all__ = ["AsyncJsonRpcConsumer", "rpc_method", "broadcast", "default_metrics"]

default_metrics = Metrics()
PUSH_EVENT = "rpc.push"  # the channel-layer message type of a broadcast (handled by rpc_push below)


def _database_configured() -> bool:
    from django.conf import settings
    try:
        dbs = settings.DATABASES
    except Exception:
        return True
    return any("dummy" not in (cfg.get("ENGINE") or "dummy") for cfg in dbs.values())


def rpc_method(name=None, *, blocking: bool = False, timeout: float | None = None, permission_required=None):
    """Mark a consumer method; ``permission_required``: a permission name or several (all needed), checked
    with ``scope["user"].has_perms`` before each call (-32005 "Permission denied" otherwise)."""
    if callable(name):
        return rpc_method()(name)

    def deco(func):
        if permission_required is not None:
            perms = (permission_required,) if isinstance(permission_required, str) else tuple(permission_required)
            func = _guarded(func, perms)
        return _mark(name, blocking=blocking, timeout=timeout)(func)
    return deco


def _check_perms(consumer, perms: tuple) -> None:
    user = consumer.scope.get("user")
    if user is None or not user.has_perms(perms):
        raise RpcError(E.PERMISSION_DENIED, "Permission denied", {"required": list(perms)})


def _guarded(func, perms: tuple):
    # functools.wraps keeps the signature the registry introspects (inspect follows __wrapped__)
    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def guarded(self, *args, **kwargs):
            await database_sync_to_async(_check_perms)(self, perms)  # has_perms may query the database
            return await func(self, *args, **kwargs)
    else:
        @functools.wraps(func)
        def guarded(self, *args, **kwargs):  # runs where the method runs: in Django's thread with a database
            _check_perms(self, perms)
            return func(self, *args, **kwargs)
    return guarded


async def _run_in_django_thread(func, args, kwargs):
    return await database_sync_to_async(func)(*args, **kwargs)


async def broadcast(group: str, method: str, params=None, *, layer=None) -> None:
    """Send a JSON-RPC notification to every connection that joined ``group`` (through the channel layer;
    the layer's per-channel capacity bounds what waits for a slow client: beyond it, messages are dropped)."""
    layer = layer or get_channel_layer()
    if layer is None:
        raise RuntimeError("broadcast needs a channel layer (settings.CHANNEL_LAYERS)")
    await layer.group_send(group, {"type": PUSH_EVENT, "method": method, "params": params})


class _ChannelsGroups:
    """ctx.join/leave on the adapter: Channels groups of this consumer's channel."""

    def __init__(self, consumer):
        self.consumer = consumer

    def _layer(self):
        if self.consumer.channel_layer is None:
            raise RuntimeError("push groups need a channel layer (settings.CHANNEL_LAYERS)")
        return self.consumer.channel_layer

    async def join(self, session, group: str) -> None:
        await self._layer().group_add(group, self.consumer.channel_name)
        session.groups.add(group)

    async def leave(self, session, group: str) -> None:
        await self._layer().group_discard(group, self.consumer.channel_name)
        session.groups.discard(group)

    async def broadcast(self, group: str, method: str, params=None) -> None:
        await broadcast(group, method, params, layer=self._layer())

    def forget(self, session) -> None:
        pass  # the consumer leaves its groups in websocket_disconnect, where it can await


class AsyncJsonRpcConsumer(AsyncWebsocketConsumer):
    rpc_limits: Limits = Limits()
    rpc_debug: bool = False
    rpc_middleware: tuple = ()
    rpc_rate_limit = None
    rpc_max_in_flight: int = 64
    rpc_call_timeout: float | None = 300.0
    rpc_json_default = None
    rpc_metrics: Metrics | None = default_metrics
    rpc_sync_in_thread: bool | None = None
    # Channels closes stale Django DB connections before every message with a thread hop
    # (sync_to_async(close_old_connections)), which costs more than the whole call here.
    # None (auto): keep that hop only when Django has a database configured; True/False force it.
    rpc_close_old_db_connections: bool | None = None
    # When the hop is kept it runs at most once per this many seconds per connection, not per
    # message: stale connections are those past CONN_MAX_AGE (whole seconds) or marked unusable, so
    # a check a second keeps Django's guarantee while a burst of calls pays for one hop. 0 = every message.
    rpc_db_check_interval: float = 1.0

    # channels-rpc style: ``@AsyncJsonRpcConsumer.rpc_method()``
    rpc_method = staticmethod(rpc_method)

    _rpc_engine: Engine | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._rpc_engine = Engine(collect_marked(cls), limits=cls.rpc_limits, middleware=cls.rpc_middleware,
                                 debug=cls.rpc_debug, metrics=cls.rpc_metrics, rate_limit=cls.rpc_rate_limit,
                                 call_timeout=cls.rpc_call_timeout, default=cls.rpc_json_default,
                                 run_sync=_run_in_django_thread, info={"title": cls.__name__})
        cls._rpc_ready = False

    _rpc_db_checked_at: float = float("-inf")

    async def __call__(self, scope, receive, send):
        # Channels hands messages to dispatch one at a time: while a connection waits at its in-flight
        # bound, its disconnect would wait too. Watching receive() lets a disconnect cancel the calls at once.
        async def watched_receive():
            message = await receive()
            if message.get("type") == "websocket.disconnect":
                session = getattr(self, "_rpc_session", None)
                if session is not None:
                    session.close()
            return message
        await super().__call__(scope, watched_receive, send)

    async def dispatch(self, message):
        if message["type"] == "websocket.receive":
            if self._rpc_db_hop():
                now = time.monotonic()
                if now - self._rpc_db_checked_at >= self.rpc_db_check_interval:
                    await aclose_old_connections()
                    self._rpc_db_checked_at = time.monotonic()
            await self.websocket_receive(message)
            return
        await super().dispatch(message)

    @classmethod
    def _rpc_db_hop(cls) -> bool:
        hop = cls.__dict__.get("_rpc_db_hop_cached")
        if hop is None:
            hop = cls.rpc_close_old_db_connections
            if hop is None:
                hop = _database_configured()
            cls._rpc_db_hop_cached = hop
        return hop

    @classmethod
    def _rpc_prepare(cls) -> Engine:
        """Decisions that need Django's settings, taken at the first connection (settings are not
        necessarily configured when the class is created)."""
        engine = cls._rpc_engine
        if not cls.__dict__.get("_rpc_ready"):
            in_thread = cls.rpc_sync_in_thread
            engine.set_sync_in_thread(_database_configured() if in_thread is None else in_thread)
            cls._rpc_ready = True
        return engine

    async def websocket_connect(self, message):
        if type(self)._rpc_engine is None:
            raise TypeError("subclass AsyncJsonRpcConsumer to declare methods")
        engine = self._rpc_prepare()
        self._rpc_session = Session(engine, self._rpc_send, scope=self.scope, owner=self,
                                    max_in_flight=self.rpc_max_in_flight, hub=_ChannelsGroups(self))
        m = self.rpc_metrics
        if m is not None:
            m.open_connections.inc()
            m.connections_total.inc()
        await super().websocket_connect(message)

    async def websocket_receive(self, message):
        data = message.get("text")
        if data is None:
            data = message.get("bytes")
            if data is None:
                return
        await self._rpc_session.feed(data)

    async def websocket_disconnect(self, message):
        session = getattr(self, "_rpc_session", None)
        if session is not None:
            groups = list(session.groups)
            counted = not getattr(self, "_rpc_disconnect_counted", False)
            self._rpc_disconnect_counted = True
            session.close()
            if groups and self.channel_layer is not None:
                await asyncio.gather(*(self.channel_layer.group_discard(g, self.channel_name) for g in groups))
            m = self.rpc_metrics
            if m is not None and counted:
                m.open_connections.dec()
                code = message.get("code", 1000)
                m.closed("normal" if code in (1000, 1001) else str(code))
        await super().websocket_disconnect(message)

    async def rpc_push(self, event):
        """Channel-layer handler of ``broadcast``: forward the notification to this client."""
        session = getattr(self, "_rpc_session", None)
        if session is not None and not session.closed:
            await session.notify(event["method"], event.get("params"))

    async def _rpc_send(self, data: bytes) -> None:
        await self.base_send({"type": "websocket.send", "text": data.decode()})

    @property
    def rpc_session(self) -> Session:
        return self._rpc_session
