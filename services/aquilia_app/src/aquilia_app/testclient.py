"""A synchronous in-process client for tests: HTTP through httpx, and WebSockets, against an ASGI app.

    from aquilia_app.testclient import TestClient, WebSocketRejected
    from aquilia_app.websockets import WebSocketDisconnect

    def test_items():
        with TestClient(app) as client:                 # runs the app's start-up, then its shut-down
            r = client.post("/items", json={"name": "x", "price": 1})
            assert r.status_code == 201
            with client.stream("GET", "/events") as r:  # chunks as the app sends them
                first = next(r.iter_lines())
            with client.websocket_connect("/ws/room?x=1", subprotocols=["chat"]) as ws:
                ws.send_json({"hello": 1})
                assert ws.receive_json() == {"echo": 1}

``TestClient`` is an ``httpx.Client``: everything httpx offers works (cookies kept across requests,
``params``/``json``/``files``, ``client.stream``...), with httpx's defaults - redirects are *not*
followed unless ``follow_redirects=True``, and the read timeout (5 s) bounds each wait for the app.
The app runs on an event loop in a background thread, the same loop for the client's whole life (an
app's pools and tasks made at start-up stay usable).  Without ``with`` the app starts on its first
request and never shuts down (``client.close()`` stops the loop).  Responses stream: each chunk reaches the test as the app sends it,
through a small buffer (the app waits when the test does not read); closing a response early tells
the app the client left (``http.disconnect``, and its next send fails as on a real server).

``root_path`` (Starlette's): the ASGI ``root_path`` of every request, as a proxy serving the app
under a prefix would give it (the paths requested stay as they are).

``raise_server_exceptions``: an exception escaping the ASGI app is raised in the test (else: a bare
500).  ``App`` turns a handler's exception into a 500 problem response itself, so that is what a
test of a failing handler sees either way.

``websocket_connect(...)`` returns a session; the handshake happens when its ``with`` block starts:
``WebSocketRejected`` (``status``, ``headers``, ``body``) when the app refuses it, and
``WebSocketDisconnect`` (``code``, ``reason``) from ``receive*`` once the app closed the socket.
Each receive waits at most ``timeout`` seconds (10) for the app, then raises ``TimeoutError``.

Written by hand: httpx's own ``ASGITransport`` is async-only, and runs no lifespan nor WebSockets.
"""
from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import os
import threading
from typing import Any

import httpx
import orjson

from .websockets import WebSocketDisconnect

__all__ = ["TestClient", "WebSocketTestSession", "WebSocketRejected"]

_ASGI = {"version": "3.0", "spec_version": "2.3"}
BUFFER = 16  # response chunks the app may send ahead of the test reading them
APP_EXIT_TIMEOUT = 10.0  # seconds the client waits for the app to finish after a response or socket


class WebSocketRejected(Exception):
    """The app refused the WebSocket handshake with an HTTP ``status`` (403 when it only closed)."""

    def __init__(self, status: int, headers: list | None = None, body: bytes = b""):
        super().__init__(f"WebSocket handshake rejected with HTTP {status}")
        self.status = status
        self.headers = httpx.Headers(headers or [])
        self.body = body

    def json(self) -> Any:
        return orjson.loads(self.body)


class _Portal:
    """An event loop in a daemon thread: the app lives there, the test's thread hands it coroutines."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="aquilia-testclient", daemon=True)
        self._thread.start()

    def submit(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro, timeout: float | None = None):
        """Run ``coro`` on the loop and wait for its result (``TimeoutError`` after ``timeout`` s)."""
        fut = self.submit(coro)
        try:
            return fut.result(timeout)
        except TimeoutError:
            fut.cancel()
            raise

    def close(self) -> None:
        if self.loop.is_closed():
            return
        try:
            self.call(self._cancel_rest(), APP_EXIT_TIMEOUT)
        except TimeoutError:  # an app that blocks its loop: the daemon thread is left behind
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(APP_EXIT_TIMEOUT)
        self.loop.close()

    @staticmethod
    async def _cancel_rest() -> None:
        """Cancel what the app left running (a response nobody read to its end)."""
        me = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not me]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)


def _wait_app(task: concurrent.futures.Future) -> None:
    """Let the app finish (background tasks, DI teardown) before the test goes on; stop it after
    ``APP_EXIT_TIMEOUT``.  Its errors were reported through the exchange already."""
    try:
        task.result(APP_EXIT_TIMEOUT)
    except TimeoutError:
        task.cancel()
    except Exception:  # reported through the exchange, or a cancellation (concurrent's CancelledError)
        pass


# -- HTTP ------------------------------------------------------------------------------------------
class _HTTPExchange:
    """One request/response between the test's thread and the app: ASGI ``receive``/``send`` on the
    loop side, an event queue (start, body, end, error) read from the test's side."""

    def __init__(self, body: bytes, head: bool = False):
        self.body = body
        self.head = head  # as a server does, a HEAD response's body is not passed on
        self.events: asyncio.Queue = asyncio.Queue(BUFFER)
        self.done = asyncio.Event()  # the response ended or the client left: receive says disconnect
        self.gone = False
        self.started = False
        self.late_error: Exception | None = None  # raised by the app after the response ended
        self._body_given = False

    async def receive(self) -> dict:
        if not self._body_given:
            self._body_given = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.done.wait()
        return {"type": "http.disconnect"}

    async def send(self, msg: dict) -> None:
        if self.gone:  # as uvicorn's ClientDisconnected
            raise OSError("the test client closed the response")
        t = msg["type"]
        if t == "http.response.start" and not self.started:
            self.started = True
            await self._emit(("start", msg["status"], msg.get("headers") or []))
        elif t == "http.response.body" and self.started and not self.done.is_set():
            if msg.get("body") and not self.head:
                await self._emit(("body", bytes(msg["body"])))
            if not msg.get("more_body", False):
                self.done.set()
                await self._emit(("end",))
        else:
            raise RuntimeError(f"unexpected ASGI message {t!r} (response started: {self.started})")

    async def _emit(self, event: tuple) -> None:
        if not self.gone:  # nobody reads any more
            await self.events.put(event)

    async def run(self, app, scope: dict) -> None:
        try:
            await app(scope, self.receive, self.send)
        except Exception as e:
            if self.done.is_set() and not self.gone:  # after the response's end: nobody reads the queue
                self.late_error = e
            else:
                await self._emit(("error", e))
        else:
            if not self.started:
                await self._emit(("error", RuntimeError("the app returned without sending a response")))
            elif not self.done.is_set():
                await self._emit(("end",))
        self.done.set()

    async def client_gone(self) -> None:
        self.gone = True
        self.done.set()
        while not self.events.empty():  # a send waiting for room goes on, then fails
            self.events.get_nowait()


class _ResponseStream(httpx.SyncByteStream):
    def __init__(self, transport: "_ASGITransport", exchange: _HTTPExchange, task, timeout):
        self._transport = transport
        self._portal = transport.portal
        self._exchange = exchange
        self._task = task
        self._timeout = timeout
        self._closed = False

    def __iter__(self):
        while True:
            event = self._transport.next_event(self._exchange, self._timeout)
            if event[0] == "body":
                yield event[1]
            elif event[0] == "end":
                # as Starlette's TestClient: an exception the app raises after sending the whole
                # response (ServerErrorMiddleware re-raising after its 500, a background task) is raised
                _wait_app(self._task)
                if self._exchange.late_error is not None:
                    self._transport.raise_or_ignore(self._exchange.late_error)
                return
            else:
                self._transport.raise_or_ignore(event[1])
                return

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._portal.loop.is_closed():  # closed after its client: the app was stopped already
            return
        self._portal.call(self._exchange.client_gone())
        _wait_app(self._task)


class _ASGITransport(httpx.BaseTransport):
    """Runs each request through the ASGI app on the client's loop thread."""

    def __init__(self, app, raise_server_exceptions: bool, client: tuple, root_path: str = ""):
        self.app = app
        self.root_path = root_path
        self.raise_server_exceptions = raise_server_exceptions
        self.client = client
        self._portal: _Portal | None = None
        self._lock = threading.Lock()
        self.app_state: dict = {}  # the lifespan scope's state: each request's scope["state"] is a copy

    @property
    def portal(self) -> _Portal:
        with self._lock:
            if self._portal is None:
                self._portal = _Portal()
            return self._portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        scope = _scope(request, "http", self.client)
        scope["root_path"] = self.root_path
        scope["method"] = request.method
        scope["state"] = self.app_state.copy()
        exchange = _HTTPExchange(request.read(), head=request.method == "HEAD")
        task = self.portal.submit(exchange.run(self.app, scope))
        timeout = (request.extensions.get("timeout") or {}).get("read")
        try:
            event = self.next_event(exchange, timeout)
        except httpx.ReadTimeout:  # the client gives up: so does the app
            self.portal.call(exchange.client_gone())
            task.cancel()
            raise
        if event[0] != "start":
            _wait_app(task)
            self.raise_or_ignore(event[1])
            return httpx.Response(500, headers=[(b"content-type", b"text/plain")], content=b"Internal Server Error")
        stream = _ResponseStream(self, exchange, task, timeout)
        return httpx.Response(event[1], headers=event[2], stream=stream, extensions={"http_version": b"HTTP/1.1"})

    def next_event(self, exchange: _HTTPExchange, timeout: float | None) -> tuple:
        try:
            return self.portal.call(exchange.events.get(), timeout)
        except TimeoutError:
            raise httpx.ReadTimeout(f"the app sent nothing for {timeout} s") from None

    def raise_or_ignore(self, exc: BaseException) -> None:
        if self.raise_server_exceptions:
            raise exc

    def close(self) -> None:
        with self._lock:
            portal, self._portal = self._portal, None
        if portal is not None:
            portal.close()


def _scope(request: httpx.Request, kind: str, client: tuple) -> dict:
    """The ASGI scope (http or websocket) of an httpx request."""
    url = request.url
    port = url.port or {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(url.scheme, 80)
    return {
        "type": kind,
        "asgi": _ASGI,
        "http_version": "1.1",
        "scheme": url.scheme,
        "path": url.path,  # httpx's path is percent-decoded already: decoding again read "%2520" as " "
        "raw_path": url.raw_path.split(b"?", 1)[0],
        "query_string": url.query,
        "root_path": "",
        "headers": [(k.lower(), v) for k, v in request.headers.raw],
        "client": client,
        "server": (url.host, port),
        "extensions": {},
    }


# -- lifespan ----------------------------------------------------------------------------------------
class _Lifespan:
    """The ASGI lifespan of one ``with TestClient(app)`` block."""

    def __init__(self, app):
        self.app = app
        self.to_app: asyncio.Queue = asyncio.Queue()
        self.from_app: asyncio.Queue = asyncio.Queue()
        self.supported = True
        self.state: dict = {}

    async def run(self) -> None:
        scope = {"type": "lifespan", "asgi": _ASGI, "state": self.state}
        try:
            await self.app(scope, self.to_app.get, self.from_app.put)
        except Exception as e:
            await self.from_app.put({"type": "error", "exc": e})
        else:
            await self.from_app.put({"type": "returned"})

    async def step(self, what: str) -> dict:
        await self.to_app.put({"type": f"lifespan.{what}"})
        return await self.from_app.get()

    def check(self, what: str, reply: dict) -> None:
        t = reply["type"]
        if t == "error":
            raise reply["exc"]
        if t == "returned":  # an app without lifespan support
            self.supported = False
        elif t == f"lifespan.{what}.failed":
            raise RuntimeError(f"the app's {what} failed: {reply.get('message', '')}")


# -- WebSockets --------------------------------------------------------------------------------------
class WebSocketTestSession:
    """The test's end of one WebSocket (see the module docstring)."""

    def __init__(self, transport: _ASGITransport, scope: dict, timeout: float | None):
        self._transport = transport
        self._portal = transport.portal
        self._scope = scope
        self._timeout = timeout
        self._to_app: asyncio.Queue = asyncio.Queue()
        self._from_app: asyncio.Queue = asyncio.Queue()
        self._task = None
        self._client_closed = False
        self._server_close: tuple | None = None  # (code, reason) once the app closed
        self.subprotocol: str | None = None
        self.headers = httpx.Headers()

    # the app's side (on the loop)
    async def _receive(self) -> dict:
        return await self._to_app.get()

    async def _send(self, msg: dict) -> None:
        if self._client_closed and msg["type"] == "websocket.send":
            raise OSError("the test client closed the WebSocket")  # as uvicorn's ClientDisconnected
        if msg["type"] == "websocket.close" and not self._client_closed:  # what a server tells the app
            await self._to_app.put({"type": "websocket.disconnect", "code": msg.get("code") or 1000,
                                    "reason": msg.get("reason") or ""})
        await self._from_app.put(msg)

    async def _run(self) -> None:
        try:
            await self._transport.app(self._scope, self._receive, self._send)
        except Exception as e:
            await self._from_app.put({"type": "error", "exc": e})
        else:
            await self._from_app.put({"type": "returned"})

    # the test's side
    def __enter__(self) -> "WebSocketTestSession":
        self._put({"type": "websocket.connect"})
        self._task = self._portal.submit(self._run())
        msg = self._next()
        if msg["type"] == "websocket.accept":
            self.subprotocol = msg.get("subprotocol")
            self.headers = httpx.Headers(msg.get("headers") or [])
            return self
        _wait_app(self._task)
        if msg["type"] == "websocket.http.response.start":
            raise WebSocketRejected(msg["status"], msg.get("headers"), self._denial_body())
        if msg["type"] == "error" and self._transport.raise_server_exceptions:
            raise msg["exc"]
        raise WebSocketRejected(403 if msg["type"] == "websocket.close" else 500)

    def _denial_body(self) -> bytes:
        body = b""
        while True:
            msg = self._next()
            if msg["type"] != "websocket.http.response.body":
                return body
            body += msg.get("body", b"")
            if not msg.get("more_body", False):
                return body

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()
        _wait_app(self._task)
        for msg in self._portal.call(self._unread()):
            if msg["type"] == "error" and exc_type is None:
                self._transport.raise_or_ignore(msg["exc"])

    async def _unread(self) -> list:
        """What the app sent that the test did not read (an exception among it is raised at exit)."""
        out = []
        while not self._from_app.empty():
            out.append(self._from_app.get_nowait())
        return out

    def _put(self, msg: dict) -> None:
        self._portal.call(self._to_app.put(msg))

    def _next(self) -> dict:
        try:
            return self._portal.call(self._from_app.get(), self._timeout)
        except TimeoutError:
            raise TimeoutError(f"the app sent nothing on the WebSocket for {self._timeout} s") from None

    def send_text(self, text: str) -> None:
        self._put({"type": "websocket.receive", "text": text})

    def send_bytes(self, data: bytes) -> None:
        self._put({"type": "websocket.receive", "bytes": bytes(data)})

    def send(self, message: dict) -> None:
        """An ASGI message as the app receives it (``{"type": "websocket.receive", "text": ...}``)."""
        self._put(message)

    def send_json(self, obj: Any, mode: str = "text") -> None:
        """``obj`` as JSON in a text frame, or a binary one with ``mode="binary"`` (Starlette's)."""
        if mode not in ("text", "binary"):
            raise ValueError('mode is "text" or "binary"')
        data = orjson.dumps(obj)
        if mode == "text":
            self.send_text(data.decode())
        else:
            self.send_bytes(data)

    def receive(self) -> dict:
        """The app's next message (``{"type": "websocket.send", "text": ...}`` or ``"bytes"``);
        ``WebSocketDisconnect`` once the app closed the socket."""
        if self._server_close is None:
            msg = self._next()
            if msg["type"] == "websocket.send":
                return msg
            if msg["type"] == "websocket.close":
                self._server_close = (msg.get("code") or 1000, msg.get("reason") or "")
            elif msg["type"] == "error":
                self._transport.raise_or_ignore(msg["exc"])
                self._server_close = (1011, f"{type(msg['exc']).__name__}: {msg['exc']}")
            else:  # the app returned without closing: the connection just ends
                self._server_close = (1006, "the app returned without closing the socket")
        raise WebSocketDisconnect(*self._server_close)

    def receive_text(self) -> str:
        text = self.receive().get("text")
        if text is None:
            raise TypeError("the app sent a binary message, not text")
        return text

    def receive_bytes(self) -> bytes:
        data = self.receive().get("bytes")
        if data is None:
            raise TypeError("the app sent a text message, not binary")
        return data

    def receive_json(self, mode: str = "text") -> Any:
        """The next message as JSON: a text one, or a binary one with ``mode="binary"`` (Starlette's)."""
        if mode not in ("text", "binary"):
            raise ValueError('mode is "text" or "binary"')
        if mode == "binary":
            return orjson.loads(self.receive_bytes())
        msg = self.receive()  # text mode also reads a binary message, as before
        return orjson.loads(msg["text"] if msg.get("text") is not None else msg["bytes"])

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Close from the client's side (the app's next receive gets this code)."""
        if not self._client_closed:
            self._client_closed = True
            self._put({"type": "websocket.disconnect", "code": code, "reason": reason})


# -- the client ------------------------------------------------------------------------------------
class TestClient(httpx.Client):
    """See the module docstring."""

    __test__ = False  # not a pytest test class

    def __init__(self, app, base_url: str = "http://testserver", *, raise_server_exceptions: bool = True,
                 client: tuple = ("testclient", 50000), root_path: str = "", **httpx_options):
        self.app = app
        self._asgi = _ASGITransport(app, raise_server_exceptions, client, root_path)
        self._lifespan: _Lifespan | None = None
        super().__init__(base_url=base_url, transport=self._asgi, **httpx_options)

    # ``with`` does not open or close the httpx client (as Starlette's TestClient): a client may run several
    # ``with`` blocks in turn (a module-level client under a per-test fixture), and serves requests between
    # and after them (without start-up); ``close()`` ends it for good.
    def __enter__(self) -> "TestClient":
        if self._lifespan is not None:
            raise RuntimeError("this TestClient's with block is already open")
        lifespan = _Lifespan(self.app)
        portal = self._asgi.portal
        self._asgi.app_state = lifespan.state  # as Starlette's TestClient: requests see the lifespan state
        portal.submit(lifespan.run())
        try:
            lifespan.check("startup", portal.call(lifespan.step("startup"), APP_EXIT_TIMEOUT))
        except BaseException:
            self._asgi.close()
            raise
        self._lifespan = lifespan
        return self

    def __exit__(self, exc_type=None, exc=None, tb=None) -> None:
        lifespan, self._lifespan = self._lifespan, None
        try:
            if lifespan is not None and lifespan.supported:
                reply = self._asgi.portal.call(lifespan.step("shutdown"), APP_EXIT_TIMEOUT)
                lifespan.check("shutdown", reply)
        finally:
            self._asgi.close()  # this run's event loop: the next block (or request) gets a new one

    def websocket_connect(self, url: str, subprotocols=None, headers=None,
                          timeout: float | None = 10.0, *, params=None, cookies=None) -> WebSocketTestSession:
        """A WebSocket session to ``url`` (relative to ``base_url``); cookies and default headers are
        sent as with HTTP, and ``params`` / ``cookies`` added as httpx adds them to a request (as Starlette's
        ``websocket_connect(url, **kwargs)``).  ``timeout``: seconds each receive waits for the app."""
        request = self.build_request("GET", url, headers=headers, params=params, cookies=cookies)
        request.headers.update({"connection": "upgrade", "upgrade": "websocket", "sec-websocket-version": "13",
                                "sec-websocket-key": base64.b64encode(os.urandom(16)).decode()})
        if subprotocols:
            request.headers["sec-websocket-protocol"] = ", ".join(subprotocols)
        scope = _scope(request, "websocket", self._asgi.client)
        scope["root_path"] = self._asgi.root_path
        scope["scheme"] = "wss" if request.url.scheme == "https" else "ws"
        scope["subprotocols"] = list(subprotocols or ())
        scope["extensions"] = {"websocket.http.response": {}}
        scope["state"] = self._asgi.app_state.copy()
        return WebSocketTestSession(self._asgi, scope, timeout)
