"""Standalone WebSocket server on ``websockets`` (asyncio implementation).

* One ``Session`` per connection; many calls in flight, bounded, cancelled on disconnect.
* The byte limit is the WebSocket ``max_size``: ``websockets`` refuses a frame whose header
  announces more (close code 1009) before reading its payload.
* permessage-deflate is negotiated when the client offers it and applied only to messages
  of at least ``compress_min_bytes`` (small responses are not worth the CPU).
* Responses over ``fragment_bytes`` are sent as several frames.
* ``GET /metrics`` on the same port answers the Prometheus text format; ``GET /healthz`` says ok.
* Clients that stop reading: writes wait (``write_limit``), reads stop (bounded in-flight),
  and a send blocked for ``send_timeout`` seconds drops the connection (the server stays healthy).
  Silent peers are also caught by the keepalive ping (close code 1011).
* A closed connection cancels its calls at once, even while the connection is at its in-flight bound.
* Origin check (403), connection limits in all and per address (503), TLS, push groups and a
  graceful stop (``stop(grace)``: calls in flight finish, new ones get -32004, then close 1001).
"""

from __future__ import annotations

import asyncio
import http
import logging
from websockets.asyncio.server import ServerConnection, broadcast, serve
from websockets.exceptions import ConnectionClosed
from websockets.extensions.permessage_deflate import PerMessageDeflate, ServerPerMessageDeflateFactory
from websockets.frames import Frame, Opcode

from .concurrency import Session
from .config import ConnectionCounter, ServerConfig
from .engine import Engine
from .metrics import Metrics
from .push import Groups

__all__ = ["RpcServer", "ServerConfig"]

log = logging.getLogger("rpc_app.server")


class _ThresholdDeflate(PerMessageDeflate):
    """permessage-deflate that leaves messages under ``threshold`` bytes uncompressed (RSV1 unset)."""

    def __init__(self, threshold: int, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.threshold = threshold
        self._skipping = False

    def encode(self, frame: Frame) -> Frame:
        if frame.opcode is Opcode.CONT:
            if self._skipping:
                return frame
        elif frame.opcode is Opcode.TEXT or frame.opcode is Opcode.BINARY:
            self._skipping = frame.fin and len(frame.data) < self.threshold
            if self._skipping:
                return frame
        return super().encode(frame)


class ThresholdDeflateFactory(ServerPerMessageDeflateFactory):
    def __init__(self, threshold: int, **kwargs):
        super().__init__(**kwargs)
        self.threshold = threshold

    def process_request_params(self, params, accepted_extensions):
        response_params, ext = super().process_request_params(params, accepted_extensions)
        # the same negotiated settings, in the subclass that knows the threshold
        ext = _ThresholdDeflate(self.threshold, ext.remote_no_context_takeover, ext.local_no_context_takeover,
                                ext.remote_max_window_bits, ext.local_max_window_bits, self.compress_settings)
        return response_params, ext


class RpcServer:
    def __init__(self, engine: Engine, config: ServerConfig | None = None, metrics: Metrics | None = None):
        self.engine = engine
        self.config = config or ServerConfig()
        self.metrics = metrics if metrics is not None else engine.metrics
        self.sessions: set[Session] = set()
        self.groups = Groups(engine)
        self.counter = ConnectionCounter(self.config)
        self.stopping = False
        self._server = None
        self.port: int | None = None

    def broadcast(self, group: str, method: str, params=None) -> int:
        """Notify every connection in ``group`` (see rpc_app.push); returns how many took the message."""
        return self.groups.broadcast(group, method, params)

    # -- HTTP on the same port ----------------------------------------------------------
    def _process_request(self, connection: ServerConnection, request):
        path = request.path.split("?", 1)[0]
        if path == self.config.metrics_path and self.metrics is not None:
            resp = connection.respond(http.HTTPStatus.OK, "")
            resp.body, content_type = self.metrics.exposition(request.headers.get("Accept"))
            del resp.headers["Content-Type"]
            del resp.headers["Content-Length"]
            resp.headers["Content-Type"] = content_type
            resp.headers["Content-Length"] = str(len(resp.body))
            return resp
        if path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "ok\n")
        if "upgrade" not in request.headers.get("Connection", "").lower():
            return connection.respond(http.HTTPStatus.UPGRADE_REQUIRED, "JSON-RPC 2.0 over WebSocket\n")
        if not self.config.origin_allowed(request.headers.get("Origin"), request.headers.get("Host")):
            return connection.respond(http.HTTPStatus.FORBIDDEN, "origin not allowed\n")
        peer = connection.remote_address
        refusal = "server shutting down" if self.stopping else self.counter.refusal(peer[0] if peer else None)
        if refusal is not None:
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, refusal + "\n")
        return None

    # -- WebSocket ----------------------------------------------------------------------
    async def _handler(self, ws: ServerConnection) -> None:
        cfg = self.config
        frag = cfg.fragment_bytes

        transport = ws.transport
        wlimit = cfg.write_limit
        send_timeout = cfg.send_timeout
        stuck = []

        async def send(data: bytes) -> None:
            if len(data) <= frag and transport.get_write_buffer_size() <= wlimit:
                await ws.send(data, text=True)  # fast path: will not wait for the peer
                return
            # may wait for the peer to read: bounded by send_timeout
            if len(data) > frag:
                view = memoryview(data)
                message = [view[i:i + frag] for i in range(0, len(data), frag)]
            else:
                message = data
            try:
                await asyncio.wait_for(ws.send(message, text=True), send_timeout)
            except asyncio.TimeoutError:
                if not stuck:
                    stuck.append(True)
                    log.warning("peer %s did not read for %.1fs: dropping it", ws.remote_address, send_timeout)
                    transport.abort()
                raise ConnectionError("send timeout") from None

        scope = {"type": "websocket", "path": ws.request.path if ws.request else "/",
                 "client": ws.remote_address, "headers": list(ws.request.headers.raw_items()) if ws.request else []}
        def send_nowait(data: bytes) -> bool:
            # a pushed message written at once when nothing is queued or being sent: no task per subscriber
            if ws.send_in_progress is not None or transport.get_write_buffer_size() > wlimit:
                return False
            try:
                broadcast((ws,), data, raise_exceptions=True, text=True)
            except Exception:
                return False
            return True

        session = Session(self.engine, send, scope=scope, max_in_flight=cfg.max_in_flight, hub=self.groups,
                          send_nowait=send_nowait,
                          on_overflow=lambda: asyncio.ensure_future(ws.close(1008, "too far behind on pushed messages")),
                          max_push_queue=cfg.max_push_queue)
        ip = ws.remote_address[0] if ws.remote_address else None
        self.counter.opened(ip)
        self.sessions.add(session)
        # the reader may be waiting for a free slot: a close must still cancel the calls at once
        watcher = asyncio.ensure_future(ws.wait_closed())
        watcher.add_done_callback(lambda _: session.close())
        m = self.metrics
        if m is not None:
            m.open_connections.inc()
            m.connections_total.inc()
        reason = "normal"
        try:
            feed = session.feed
            async for message in ws:
                await feed(message)
        except ConnectionClosed:
            pass
        finally:
            watcher.cancel()
            cancelled = session.close()
            self.counter.closed(ip)
            self.sessions.discard(session)
            code = ws.close_code
            if stuck:
                reason = "send_timeout"
            elif code not in (1000, 1001):
                reason = str(code if code is not None else 1006)
            if m is not None:
                m.open_connections.dec()
                m.closed(reason)
            if cancelled:
                log.info("connection closed (%s): %d calls cancelled", reason, cancelled)

    async def start(self) -> int:
        cfg = self.config
        extensions = None
        if cfg.compression:
            extensions = [ThresholdDeflateFactory(cfg.compress_min_bytes, server_max_window_bits=15,
                                                  client_max_window_bits=15,
                                                  compress_settings={"memLevel": 8, "level": cfg.compress_level})]
        self._server = await serve(
            self._handler, cfg.host, cfg.port,
            compression=None, extensions=extensions,
            max_size=cfg.limits.max_message_bytes,
            max_queue=cfg.max_queue, write_limit=cfg.write_limit,
            ping_interval=cfg.ping_interval, ping_timeout=cfg.ping_timeout,
            close_timeout=cfg.close_timeout,
            process_request=self._process_request,
            ssl=cfg.ssl,
        )
        sock = next(iter(self._server.sockets))
        self.port = sock.getsockname()[1]
        return self.port

    async def stop(self, grace: float | None = None) -> None:
        """Graceful stop: no new connections; calls in flight run on for up to ``grace`` seconds (new calls
        get -32004); then every connection is closed with 1001 (going away)."""
        self.stopping = True
        if self._server is None:
            return
        grace = self.config.shutdown_grace if grace is None else grace
        sessions = list(self.sessions)
        if sessions:
            await asyncio.gather(*(s.drain(grace) for s in sessions))
        self._server.close(close_connections=True)  # close frames 1001, then the listener
        await self._server.wait_closed()

    async def serve_forever(self) -> None:
        await self._server.serve_forever()
