"""WebSockets on both front ends (ASGI and granian's RSGI), behind one ``WebSocket`` API.

    @app.websocket("/rooms/{room:int}")
    async def chat(ws: WebSocket, room: int, name: str = "anon", hub: Hub = ...):
        await ws.accept()
        async for text in ws.iter_text():          # ends when the client closes
            await ws.send_json({"room": room, "from": name, "text": text})

A handler declares a ``WebSocket`` parameter (path, query, header and cookie parameters and DI
dependencies bind as for HTTP).  ``WebSocket`` is a ``Request`` (headers, query, cookies, path_params,
app, state) plus the socket: ``accept``, ``receive*``, ``send*``, ``close``, ``iter_*``.

Lifecycle, the same on every server:

* No route for the path (or a typed path parameter that does not match): the handshake is refused
  with 404.  A handler that raises an ``HTTPException`` before ``accept()`` refuses it with that
  status (a parameter that does not bind: the 4xx an HTTP handler would get; a check of its own: 401,
  403...); ``close()`` before ``accept()``: 403; any other exception before ``accept()``: 500, logged.
  Under ASGI the status and a problem+json body go out when the server has the ASGI
  "websocket.http.response" extension (uvicorn and granian do), else the server answers 403.
* After ``accept()``: receiving on a closed socket raises ``WebSocketDisconnect(code, reason)``; a
  handler that lets it escape ends normally.  A handler that returns without closing: close 1000.
  An ``HTTPException`` below 500: close 1008 (policy violation) with its detail as the reason; any
  other exception: close 1011, logged.  Then background tasks and the request's DI scope teardown
  run (``App._finish``), whatever happened.
* Messages over ``max_message`` bytes (1 MiB unless the app has ``ws_max_message``; a handler may
  set ``ws.max_message`` before ``accept()``; ``None``: no limit but the server's): close 1009.
  ``receive_text`` given a binary message (or ``receive_bytes`` a text one): close 1003;
  ``receive_json`` given malformed JSON: close 1007.  The server reads a whole message before the app
  sees it, so its own limit bounds the memory (uvicorn: ``ws_max_size``, 16 MiB, then 1009; granian:
  64 MiB a message, 16 MiB a frame, then it closes without a code).  Text frames that are not UTF-8
  are the server's job: uvicorn closes 1007, granian closes without a status code.

Receiving is direct: ``receive()`` awaits the server's next message itself, so a handler that
answers what it receives (request/response, echo) pays no task, queue or extra wake-up per message.
A handler that sends twice without receiving in between (a push stream) gets a reader task at its
second send, which moves incoming messages into a small queue (``INBOX_SIZE``) from then on: this is
how a pushing handler learns that the client left - granian accepts sends to a closed peer without an
error - and a later ``send_*`` raises ``WebSocketDisconnect``.  No reader starts while a direct
receive is waiting (two receivers on one channel would split its messages): that receive sees the
close and marks the socket disconnected for the sending task.

What granian 2.8.7 does, verified against the real server.  RSGI: ``proto.accept()`` takes no
subprotocol and no headers (``accept(subprotocol=...)`` is ignored there, with a warning);
``proto.close(status)`` before accept answers that HTTP status with an empty body; after accept it
sends a Close frame *without* a status code (an RSGI client sees 1005 where an ASGI one sees 1009,
1011...), and only once the transport object is freed (a live reference keeps the socket open); an
incoming close message carries no code (the handler sees 1005); a receive on a dead connection raises
``RSGIProtocolClosed`` (seen as 1006).  ASGI: the subprotocol is sent, the accept headers are not.
"""
from __future__ import annotations

import asyncio
import enum
import logging
from typing import Any, Awaitable, NamedTuple

import orjson

from .exceptions import HTTPException, NotFound
from .requests import Request, route_path
from .responses import json_bytes, problem
from .rsgi import asgi_scope

__all__ = ["WebSocket", "WebSocketDisconnect", "WebSocketState", "DEFAULT_MAX_MESSAGE", "INBOX_SIZE",
           "WebSocketBridge", "ClientDisconnected", "serve_asgi_websocket", "serve_rsgi_websocket"]

log = logging.getLogger("aquilia_app")

DEFAULT_MAX_MESSAGE = 1 << 20  # bytes of one incoming message
INBOX_SIZE = 16  # received messages waiting for the handler; then the reader waits (backpressure)
_EMPTY: dict = {}
_NOT_TEXT = "expected a text message, got a binary one"
_REASON_MAX = 123  # a Close frame's payload is at most 125 bytes, 2 of them the code


class WebSocketState(enum.Enum):
    CONNECTING = 0
    CONNECTED = 1
    DISCONNECTED = 2


# Module constants: a global lookup is cheaper than an enum member's, and the state is checked per message.
_CONNECTING, _CONNECTED, _DISCONNECTED = WebSocketState.CONNECTING, WebSocketState.CONNECTED, WebSocketState.DISCONNECTED


class WebSocketDisconnect(Exception):
    """The socket is closed (by the client, or by the server after a protocol error): ``code`` is the
    WebSocket close code, ``reason`` its text."""

    def __init__(self, code: int = 1000, reason: str = ""):
        super().__init__(f"WebSocket closed with {code}" + (f": {reason}" if reason else ""))
        self.code = code
        self.reason = reason


def _disconnect(code: int, reason: str = "") -> dict:
    return {"type": "websocket.disconnect", "code": code, "reason": reason}


def _short(reason: str) -> str:
    return reason.encode()[:_REASON_MAX].decode(errors="ignore")


class WebSocket(Request):
    """One WebSocket connection.  ``receive()`` returns the raw message, ASGI-shaped on both front
    ends: ``{"type": "websocket.receive", "text": str}`` or ``{..., "bytes": bytes}``."""

    __slots__ = ("_io", "_inbox", "_reader", "_final", "_pending_close", "client_state", "application_state",
                 "max_message", "_receiving", "_received", "_text_fits")

    def __init__(self, scope: dict, io, path_params=None, app=None):
        Request.__init__(self, scope, None, path_params, 0, app)  # a handshake has no body
        self._io = io  # _ASGIChannel or _RSGIChannel: the only part that differs per front end
        self._inbox: asyncio.Queue | None = None
        self._reader: asyncio.Task | None = None
        self._final: dict | None = None  # the disconnect message, once seen: every later receive raises it
        self._pending_close: tuple | None = None  # (code, reason) the reader wants sent (a message too big)
        self.client_state = _CONNECTING
        self.application_state = _CONNECTING
        self.max_message = getattr(app, "ws_max_message", DEFAULT_MAX_MESSAGE)
        self._receiving = False  # a direct receive is waiting on the channel
        self._received = True  # no send since the last received message (or the handshake)

    @property
    def method(self) -> str:
        return "GET"

    @property
    def subprotocols(self) -> list[str]:
        """The subprotocols the client offered, in its order of preference."""
        return list(self.scope.get("subprotocols") or ())

    async def body(self) -> bytes:
        return b""

    async def _chunks(self):
        return
        yield  # an empty async generator: the form parser finds no body

    # -- handshake ------------------------------------------------------------------------------
    async def accept(self, subprotocol: str | None = None, headers=None) -> None:
        """Complete the handshake, optionally choosing one of ``subprotocols`` and adding response
        headers (``[(name, value)]`` or a dict; ASGI only)."""
        if self.application_state is not _CONNECTING:
            raise RuntimeError("accept() called on a WebSocket that is already accepted or closed")
        if subprotocol is not None and subprotocol not in self.subprotocols:
            raise ValueError(f"subprotocol {subprotocol!r} was not offered by the client ({self.subprotocols})")
        if isinstance(headers, dict):
            headers = list(headers.items())
        await self._io.accept(subprotocol, headers or ())
        self.application_state = self.client_state = _CONNECTED
        limit = self.max_message  # text of up to limit/4 characters fits even at 4 UTF-8 bytes each
        self._text_fits = -1 if limit is None else limit >> 2

    async def _reject(self, exc: HTTPException) -> None:
        """Refuse the handshake with ``exc``'s status (and problem+json body where the server can)."""
        await self._deny(problem(exc.status, exc.title, exc.detail, errors=exc.errors, headers=exc.headers))

    async def _deny(self, resp) -> None:
        """Refuse the handshake with an HTTP response (``status``, ``raw_headers``, ``body``)."""
        self.application_state = self.client_state = _DISCONNECTED
        try:
            await self._io.reject(resp)
        except Exception:  # the client is gone already
            log.debug("WebSocket rejection not delivered", exc_info=True)

    # -- receiving ------------------------------------------------------------------------------
    async def _from_server(self) -> dict:
        """The server's next message, ASGI-shaped; a failed channel (the connection is gone) as a disconnect."""
        try:
            return await self._io.receive()
        except Exception as e:
            return _disconnect(1006, f"{type(e).__name__}: {e}")

    def _last(self, msg: dict) -> dict | None:
        """None for a message the handler may have; else the disconnect that ends the input: the client
        closed, the channel failed, or the message is too big (the next receive or send closes with 1009)."""
        if msg["type"] != "websocket.receive":
            self.client_state = _DISCONNECTED  # a sending task sees it at its next send
            return self._io.closed(msg)
        if self._too_big(msg):
            self._pending_close = (1009, f"message over {self.max_message} bytes")
            return _disconnect(1009, self._pending_close[1])
        return None

    async def _read_loop(self) -> None:
        """The reader task of a pushing handler: server messages into the inbox until the last one."""
        inbox = self._inbox
        while True:
            msg = await self._from_server()
            last = self._last(msg)
            await inbox.put(msg if last is None else last)
            if last is not None:
                return

    def _start_reader(self) -> None:
        self._inbox = asyncio.Queue(INBOX_SIZE)
        self._reader = asyncio.get_running_loop().create_task(self._read_loop())

    def _too_big(self, msg: dict) -> bool:
        limit = self.max_message
        if limit is None:
            return False
        data = msg.get("bytes")
        if data is not None:
            return len(data) > limit
        text = msg.get("text") or ""
        if len(text) <= limit >> 2:  # fits even at 4 UTF-8 bytes a character: no encoding needed
            return False
        return len(text) > limit or len(text.encode("utf-8", "surrogatepass")) > limit

    # ``receive`` is a slot of Request (the ASGI receive callable) that Request.__init__ assigns: this
    # data descriptor takes the name over, ignores the assignment and gives the method below.
    @property
    def receive(self):
        """``await ws.receive()``: the next message; ``WebSocketDisconnect`` once the socket is closed."""
        return self._receive_message

    @receive.setter
    def receive(self, _value) -> None:
        pass

    async def _receive_message(self) -> dict:
        if (self._inbox is None and not self._receiving and self._final is None
                and self.application_state is _CONNECTED):  # the direct path
            self._receiving = True
            try:
                msg = await self._io.receive()
            except Exception as e:  # the server's channel failed: the connection is gone
                msg = _disconnect(1006, f"{type(e).__name__}: {e}")
            finally:
                self._receiving = False
            if msg["type"] == "websocket.receive":  # the common case, checked without a call
                text = msg.get("text")
                if text is not None and len(text) <= self._text_fits:
                    self._received = True
                    return msg
            last = self._last(msg)
            if last is None:
                self._received = True
                return msg
            return await self._end_input(last)
        if self._final is None:
            if self.application_state is _CONNECTING:
                raise RuntimeError("accept() the WebSocket before receiving")
            if self._inbox is None:
                raise RuntimeError("another task is already receiving on this WebSocket")
            msg = await self._inbox.get()
            if msg["type"] == "websocket.receive":
                self._received = True
                return msg
            return await self._end_input(msg)
        raise WebSocketDisconnect(self._final["code"], self._final["reason"])

    async def _end_input(self, final: dict):
        """The input is over: remember why, send a pending close, raise ``WebSocketDisconnect``."""
        self._final = final
        if self._pending_close is not None:
            await self._close_pending()
        raise WebSocketDisconnect(final["code"], final["reason"])

    async def receive_text(self) -> str:
        msg = await self._receive_message()
        text = msg.get("text")
        if text is None:
            await self._refuse(1003, _NOT_TEXT)
        return text

    async def receive_bytes(self) -> bytes:
        msg = await self._receive_message()
        data = msg.get("bytes")
        if data is None:
            await self._refuse(1003, "expected a binary message, got a text one")
        return data

    async def receive_json(self) -> Any:
        """The next message (text or binary) parsed as JSON; malformed JSON closes with 1007."""
        msg = await self._receive_message()
        data = msg.get("text")
        if data is None:
            data = msg.get("bytes")
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as e:
            await self._refuse(1007, f"malformed JSON: {e}")

    async def _refuse(self, code: int, reason: str):
        """Bad input from the client: close with ``code`` and end the handler's receive loop."""
        await self.close(code, reason)
        self._final = _disconnect(code, reason)
        raise WebSocketDisconnect(code, reason)

    async def iter_text(self):
        receive = self._receive_message  # receive_text inlined: one coroutine less per message
        try:
            while True:
                text = (await receive()).get("text")
                if text is None:
                    await self._refuse(1003, _NOT_TEXT)
                yield text
        except WebSocketDisconnect:
            return

    async def iter_bytes(self):
        try:
            while True:
                yield await self.receive_bytes()
        except WebSocketDisconnect:
            return

    async def iter_json(self):
        try:
            while True:
                yield await self.receive_json()
        except WebSocketDisconnect:
            return

    # -- sending --------------------------------------------------------------------------------
    # Each send_* returns _send's coroutine (one frame less a message than an ``async def`` wrapper).
    def send_text(self, text: str) -> Awaitable[None]:
        return self._send(self._io.send_text, text)

    def send_bytes(self, data: bytes) -> Awaitable[None]:
        return self._send(self._io.send_bytes, bytes(data))

    def send_json(self, obj: Any) -> Awaitable[None]:
        """``obj`` as JSON in a text message (orjson; msgspec Structs too)."""
        return self._send(self._io.send_text, json_bytes(obj).decode())

    async def _send(self, send, data) -> None:
        if (self.application_state is not _CONNECTED or self.client_state is not _CONNECTED
                or self._pending_close is not None):
            await self._refuse_send()
        if not self._received and self._reader is None and not self._receiving and self._final is None:
            self._start_reader()  # a second send in a row: a pushing handler, which must learn of a close
        self._received = False
        try:
            await send(data)
        except (OSError, RuntimeError) as e:  # uvicorn: ClientDisconnected (OSError); granian: RSGIProtocolClosed
            self.client_state = _DISCONNECTED
            raise WebSocketDisconnect(1006, f"{type(e).__name__}: {e}") from None

    async def _refuse_send(self):
        """Why a send cannot go out (always raises): not accepted or closed, a pending close, or gone."""
        if self.application_state is not _CONNECTED:
            raise RuntimeError("send on a WebSocket that is not accepted or already closed")
        if self._pending_close is not None:
            await self._close_pending()
        final = self._final or _disconnect(1006, "the client is gone")
        raise WebSocketDisconnect(final["code"], final["reason"])

    # -- closing --------------------------------------------------------------------------------
    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the socket (before ``accept()``: refuse the handshake with 403).  Closing twice is harmless."""
        if self.application_state is _CONNECTING:
            return await self._reject(HTTPException(403, reason or None))
        if self.application_state is _DISCONNECTED:
            return
        self.application_state = _DISCONNECTED
        await self._stop_reader()
        try:
            await self._io.close(code, _short(reason), self.client_state is _DISCONNECTED)
        except Exception:  # the server already closed the connection
            log.debug("WebSocket close not delivered", exc_info=True)

    async def _close_pending(self) -> None:
        code, reason = self._pending_close
        self._pending_close = None
        self._final = self._final or _disconnect(code, reason)
        await self.close(code, reason)
        self.client_state = _DISCONNECTED
        raise WebSocketDisconnect(code, reason)

    async def _stop_reader(self) -> None:
        reader = self._reader
        self._reader = None
        if reader is not None and not reader.done():
            reader.cancel()
            await asyncio.wait((reader,))  # unlike ``await reader``, keeps a cancellation of our own task


# -- the two front ends' channels ----------------------------------------------------------------
class _ASGIChannel:
    """The socket's I/O over ASGI ``receive``/``send``."""

    __slots__ = ("_receive", "_send", "_denial", "receive")

    def __init__(self, scope: dict, receive, send):
        self._receive = self.receive = receive  # messages go to the handler as the server made them
        self._send = send
        self._denial = "websocket.http.response" in (scope.get("extensions") or _EMPTY)

    async def accept(self, subprotocol, headers) -> None:
        msg = await self._receive()  # websocket.connect comes first
        if msg["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(msg.get("code", 1006), _reason(msg))
        hdrs = [(_b(k).lower(), _b(v)) for k, v in headers]
        await self._send({"type": "websocket.accept", "subprotocol": subprotocol, "headers": hdrs})

    async def reject(self, resp) -> None:
        if not self._denial:  # the server answers a close before accept with 403
            await self._send({"type": "websocket.close", "code": 1008})
            return
        await self._send({"type": "websocket.http.response.start", "status": resp.status, "headers": resp.raw_headers})
        await self._send({"type": "websocket.http.response.body", "body": resp.body})

    @staticmethod
    def closed(msg: dict) -> dict:
        """A server message that ends the input, as this module's disconnect message."""
        return _disconnect(msg.get("code") or 1005, _reason(msg))

    # Plain functions handing back the server's own coroutine: no frame of ours per message.
    def send_text(self, text: str) -> Awaitable[None]:
        return self._send({"type": "websocket.send", "text": text})

    def send_bytes(self, data: bytes) -> Awaitable[None]:
        return self._send({"type": "websocket.send", "bytes": data})

    async def close(self, code: int, reason: str, peer_gone: bool) -> None:
        if not peer_gone:  # after the client's close the server has answered it already
            await self._send({"type": "websocket.close", "code": code, "reason": reason})


class _RSGIChannel:
    """The socket's I/O over granian's RSGI WebSocket protocol (see the module docstring)."""

    __slots__ = ("_proto", "_transport")
    warned = False  # accept() options RSGI cannot honour: said once per process

    def __init__(self, proto):
        self._proto = proto
        self._transport = None

    async def accept(self, subprotocol, headers) -> None:
        if (subprotocol or headers) and not _RSGIChannel.warned:
            _RSGIChannel.warned = True
            log.warning("granian's RSGI cannot send a WebSocket subprotocol or accept headers; serve the app "
                        "over ASGI if the client needs them")
        try:
            self._transport = await self._proto.accept()
        except RuntimeError as e:  # the client left during the handshake
            raise WebSocketDisconnect(1006, str(e)) from None

    async def reject(self, resp) -> None:
        self._proto.close(resp.status)  # granian sends the status with an empty body

    async def receive(self) -> dict:
        try:
            msg = await self._transport.receive()
        except RuntimeError:  # RSGIProtocolClosed: dropped connection, or a frame the server refused
            return _disconnect(1006)
        kind = msg.kind
        if kind == 2:
            return {"type": "websocket.receive", "text": msg.data}
        if kind == 1:
            return {"type": "websocket.receive", "bytes": msg.data}
        return _disconnect(1005)  # the close message carries no code

    @staticmethod
    def closed(msg: dict) -> dict:
        return msg  # receive() made it a disconnect message already

    def send_text(self, text: str) -> Awaitable[None]:
        return self._transport.send_str(text)

    def send_bytes(self, data: bytes) -> Awaitable[None]:
        return self._transport.send_bytes(data)

    async def close(self, code: int, reason: str, peer_gone: bool) -> None:
        self._proto.close(code)  # granian sends the Close frame without the code...
        self._transport = None  # ...once the transport object is freed: a live reference keeps the socket open


def _b(v) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode("latin-1")


def _reason(msg: dict) -> str:
    r = msg.get("reason")
    return r if isinstance(r, str) else ""  # uvicorn's legacy implementation sends an int here


# -- an ASGI app on a WebSocket ------------------------------------------------------------------
class ClientDisconnected(OSError):
    """An ASGI app on a ``WebSocketBridge`` sent to a client that is gone (an ``OSError``, as uvicorn's
    own, which Starlette turns into its ``WebSocketDisconnect``)."""


class _Denial(NamedTuple):
    """An HTTP response refusing a handshake (the ASGI "websocket.http.response" extension)."""
    status: int
    raw_headers: list
    body: bytes


class WebSocketBridge:
    """An ASGI app's ``receive`` and ``send`` for one WebSocket, over ``ws`` (a mounted app; the pure-ASGI
    middleware chain under RSGI): the socket's lifecycle stays the framework's on both front ends."""

    __slots__ = ("ws", "_connected", "_denial")

    def __init__(self, ws: WebSocket):
        self.ws = ws
        self._connected = False  # websocket.connect handed out
        self._denial: tuple | None = None  # (status, headers, body chunks) of a refusal being sent

    async def serve(self, app, root: str | None = None) -> None:
        scope = dict(self.ws.scope)
        if root is not None:
            scope["root_path"] = root
        # A refusal's status reaches the client on every front end (its body where the server can send one)
        scope["extensions"] = {**(scope.get("extensions") or {}), "websocket.http.response": {}}
        await app(scope, self.receive, self.send)

    async def receive(self) -> dict:
        if not self._connected:
            self._connected = True
            return {"type": "websocket.connect"}
        try:
            return await self.ws.receive()
        except WebSocketDisconnect as e:
            return {"type": "websocket.disconnect", "code": e.code, "reason": e.reason}

    async def send(self, msg: dict) -> None:
        kind = msg["type"]
        ws = self.ws
        if kind == "websocket.send":
            text = msg.get("text")
            try:
                await (ws.send_text(text) if text is not None else ws.send_bytes(msg.get("bytes") or b""))
            except WebSocketDisconnect as e:
                raise ClientDisconnected(f"the client is gone ({e.code})") from None
        elif kind == "websocket.accept":
            await ws.accept(msg.get("subprotocol"), msg.get("headers"))
        elif kind == "websocket.close":  # before accept: the handshake is refused with 403
            await ws.close(msg.get("code") or 1000, msg.get("reason") or "")
        elif kind == "websocket.http.response.start" and self._denial is None \
                and ws.application_state is _CONNECTING:
            self._denial = (msg["status"], list(msg.get("headers") or ()), [])
        elif kind == "websocket.http.response.body" and self._denial is not None:
            status, headers, chunks = self._denial
            chunks.append(msg.get("body") or b"")
            if not msg.get("more_body"):
                await ws._deny(_Denial(status, headers, b"".join(chunks)))
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r} on a WebSocket in state "
                               f"{ws.application_state.name}")


# -- serving -------------------------------------------------------------------------------------
async def serve_asgi_websocket(app, scope: dict, receive, send) -> None:
    """An ASGI ``websocket`` scope: route, run the handler, close, tear down."""
    m = app.ws_router.match("GET", route_path(scope))
    ws = WebSocket(scope, _ASGIChannel(scope, receive, send), m.params or _EMPTY, app)
    await _serve(app, ws, m.route)


async def serve_rsgi_websocket(app, rscope, proto, asgi_chain=None) -> None:
    """An RSGI ``ws`` scope: the same, with the scope read into an ASGI-shaped dict once (a socket
    lives long; one dict a connection costs nothing next to it).  An app with pure-ASGI middleware
    passes its ``asgi_chain``: the socket goes through it as under ASGI (a guard there must not be
    bypassed), over a ``WebSocketBridge``, and the chain's innermost app routes it."""
    scope = asgi_scope(rscope, app)
    scope["type"] = "websocket"
    scope["scheme"] = "wss" if scope["scheme"] == "https" else "ws"
    offered = rscope.headers.get("sec-websocket-protocol")
    scope["subprotocols"] = [p.strip() for p in offered.split(",") if p.strip()] if offered else []
    if asgi_chain is not None:
        ws = WebSocket(scope, _RSGIChannel(proto), _EMPTY, app)
        ws.max_message = None  # the app's own WebSocket, inside the chain, applies the limit
        return await _serve_asgi_app(asgi_chain, ws)
    m = app.ws_router.match("GET", rscope.path)
    ws = WebSocket(scope, _RSGIChannel(proto), m.params or _EMPTY, app)
    await _serve(app, ws, m.route)


async def _serve_asgi_app(asgi_app, ws: WebSocket) -> None:
    """``ws`` handed to an ASGI app, with a handler's lifecycle around it."""
    try:
        await WebSocketBridge(ws).serve(asgi_app)
    except WebSocketDisconnect:
        pass
    except Exception as e:
        await _after_error(ws, e)
    finally:
        await _end(ws)


async def _serve(app, ws: WebSocket, route) -> None:
    exc = None
    try:
        for hook in app._ws_hooks:  # app-wide native middleware that sees handshakes
            await hook(ws)
        if route is None:
            raise NotFound("no WebSocket route matches this path")
        ws.route = route
        if route.meta and "max_message" in route.meta:  # a per-route limit, once App.websocket() takes one
            ws.max_message = route.meta["max_message"]
        await route.endpoint.call(ws, None)
    except WebSocketDisconnect:
        pass
    except Exception as e:
        exc = e
        await _after_error(ws, e)
    finally:
        await _end(ws)
        await app._finish(ws, exc)


async def _after_error(ws: WebSocket, e: Exception) -> None:
    """What the client gets for a handler's exception (see the module docstring)."""
    http = isinstance(e, HTTPException)
    if not (http and e.status < 500):  # a client's mistake is not the server's error
        log.exception("error in WebSocket handler %s", ws.route.pattern if ws.route else ws.path, exc_info=e)
    if ws.application_state is _CONNECTING:
        debug = getattr(ws.app, "debug", False)
        await ws._reject(e if http else HTTPException(500, f"{type(e).__name__}: {e}" if debug else None))
    elif http and e.status < 500:
        await ws.close(1008, e.detail or e.title)
    else:
        await ws.close(1011, "internal error")


async def _end(ws: WebSocket) -> None:
    """After the handler: refuse a handshake it never answered, close a socket it left open."""
    try:
        if ws.application_state is _CONNECTING:
            await ws._reject(HTTPException(403, "the handler did not accept the connection"))
        elif ws._pending_close is not None:
            code, reason = ws._pending_close
            ws._pending_close = None
            await ws.close(code, reason)
        else:
            await ws.close(1000)
    except Exception:
        log.exception("error while closing a WebSocket")
