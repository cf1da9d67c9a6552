"""Django Channels front end: subclass ``AsyncJsonRpcConsumer`` and mark methods with ``@rpc_method``.

    from rpc_app.django_channels import AsyncJsonRpcConsumer, rpc_method

    class Api(AsyncJsonRpcConsumer):
        @rpc_method()
        def add(self, a: int, b: int):
            return a + b

        @rpc_method("users.me")
        async def me(self, ctx: RpcContext):
            return str(ctx.user)

The registry, the signature introspection and the engine are built once per subclass
(at class creation), never per connection or per call. Messages go straight from the
ASGI event to the engine (text or bytes, parsed by orjson) and responses are sent as
text frames. Async calls run concurrently (``rpc_max_in_flight`` per connection, with
backpressure) and are cancelled when the client disconnects. In-flight request ids are
tracked in a dict bounded by ``rpc_max_in_flight`` (O(1) per call, no time window to scan).

Class attributes to override: ``rpc_limits``, ``rpc_debug``, ``rpc_middleware``,
``rpc_rate_limit``, ``rpc_max_in_flight``, ``rpc_metrics`` (a shared ``Metrics``).
The byte limit also needs the ASGI server's own frame limit (daphne's
``--websocket_max_message_size`` is not available; uvicorn: ``--ws-max-size``); the
engine refuses an over-limit message with -32001 either way.
"""

from __future__ import annotations

import time

from channels.db import aclose_old_connections
from channels.generic.websocket import AsyncWebsocketConsumer

from .concurrency import Session
from .engine import Engine
from .limits import Limits
from .metrics import Metrics
from .registry import collect_marked, rpc_method

__all__ = ["AsyncJsonRpcConsumer", "rpc_method", "default_metrics"]

default_metrics = Metrics()


def _database_configured() -> bool:
    from django.conf import settings
    try:
        dbs = settings.DATABASES
    except Exception:
        return True
    return any("dummy" not in (cfg.get("ENGINE") or "dummy") for cfg in dbs.values())


class AsyncJsonRpcConsumer(AsyncWebsocketConsumer):
    rpc_limits: Limits = Limits()
    rpc_debug: bool = False
    rpc_middleware: tuple = ()
    rpc_rate_limit = None
    rpc_max_in_flight: int = 64
    rpc_metrics: Metrics | None = default_metrics
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
                                 debug=cls.rpc_debug, metrics=cls.rpc_metrics, rate_limit=cls.rpc_rate_limit)

    _rpc_db_checked_at: float = float("-inf")

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

    async def websocket_connect(self, message):
        engine = type(self)._rpc_engine
        if engine is None:
            raise TypeError("subclass AsyncJsonRpcConsumer to declare methods")
        self._rpc_session = Session(engine, self._rpc_send, scope=self.scope, owner=self,
                                    max_in_flight=self.rpc_max_in_flight)
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
        if session is not None and not session.closed:
            session.close()
            m = self.rpc_metrics
            if m is not None:
                m.open_connections.dec()
                code = message.get("code", 1000)
                m.closed("normal" if code in (1000, 1001) else str(code))
        await super().websocket_disconnect(message)

    async def _rpc_send(self, data: bytes) -> None:
        await self.base_send({"type": "websocket.send", "text": data.decode()})

    @property
    def rpc_session(self) -> Session:
        return self._rpc_session
