"""An asyncio JSON-RPC 2.0 client over WebSocket, for rpc_app or any other JSON-RPC 2.0 server.

```python
from rpc_app.client import connect
from rpc_app.errors import RpcError

async with connect("ws://127.0.0.1:8082/", call_timeout=30.0) as client:
    await client.call("add", 1, 2)                    # params array   -> 3
    await client.call("sleep", seconds=0.1)           # params object
    await client.call_with("echo", {"value": 1}, timeout=2.0)   # explicit params, own timeout
    await client.notify("log", "hi")                  # no id, no answer
    results = await client.batch([("add", [1, 2]), ("nope", None)], notifications=[("log", ["x"])])
    # results == [3, RpcError(-32601, "Method not found")]: errors are returned, not raised
    client.on("tick", lambda params: print(params))   # a push notification from the server
```

* Ids are increasing integers. Many calls may be in flight at once on one connection; each
  response is matched to its call by id, whatever the order the server answers in.
* ``call`` raises ``RpcError`` (code, message, data as sent) for an error response, and
  ``TimeoutError`` after ``call_timeout`` seconds (``call_with(..., timeout=)`` per call;
  ``None`` waits forever). A timed-out call is forgotten: a late answer is dropped.
* Messages without an id are server push notifications: they go to the handler set with
  ``on(method, handler)`` (called with ``params``), or else to ``on_notification(method,
  params)``. Handlers may be plain functions (run in the reader, keep them short) or
  coroutine functions (each call runs as its own task). A handler that raises is logged.
* Anything the client cannot use (bad JSON, an unknown id, a request from the server) is
  logged and dropped; the connection stays up.
* When the connection closes, every pending call fails at once with ``RpcConnectionClosed``
  (a ``ConnectionError``) carrying the close code, and so does every later call.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from typing import Any, Callable, Iterable, Sequence

import orjson
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from .errors import INTERNAL_ERROR, RpcError

__all__ = ["RpcClient", "RpcConnectionClosed", "connect"]

log = logging.getLogger("rpc_app.client")

ABNORMAL_CLOSURE = 1006
_DEFAULT: Any = object()  # "use the client's call_timeout"
_NO_PARAMS: Any = object()

Handler = Callable[..., Any]


class RpcConnectionClosed(ConnectionError):
    """The WebSocket closed: raised by calls pending at that moment and by every later call."""

    def __init__(self, code: int, reason: str = ""):
        self.code = code
        self.reason = reason
        super().__init__(f"JSON-RPC connection closed (code {code}{': ' + reason if reason else ''})")


def _params_of(args: tuple, kwargs: dict):
    if args and kwargs:
        raise TypeError("JSON-RPC params are either positional or named, not both")
    if kwargs:
        return kwargs
    return list(args) if args else _NO_PARAMS


def _message(method: str, params, rid=None) -> dict:
    if not isinstance(method, str):
        raise TypeError(f"method must be a string, not {type(method).__name__}")
    msg: dict = {"jsonrpc": "2.0", "method": method}
    if params is not _NO_PARAMS and params is not None:
        if isinstance(params, tuple):
            params = list(params)
        if not isinstance(params, (list, dict)):
            raise TypeError(f"params must be a list, tuple, dict or None, not {type(params).__name__}")
        msg["params"] = params
    if rid is not None:
        msg["id"] = rid
    return msg


def _error_of(err) -> RpcError:
    """An RpcError from the error member of a response, tolerating a malformed one."""
    if isinstance(err, dict) and isinstance(err.get("code"), int):
        message = err.get("message")
        return RpcError(err["code"], message if isinstance(message, str) else str(message), err.get("data"))
    return RpcError(INTERNAL_ERROR, "malformed error object from the server", err)


class RpcClient:
    """JSON-RPC 2.0 over an open ``websockets`` client connection (see the module docstring).

    Usually made by ``connect()``; build it directly to wrap a connection opened elsewhere.
    It must be created inside a running event loop: it starts the reader task at once, and
    from then on it alone reads the connection (do not call ``ws.recv()`` yourself).
    """

    def __init__(self, ws: ClientConnection, *, on_notification: Handler | None = None,
                 call_timeout: float | None = 30.0):
        self.ws = ws
        self.call_timeout = call_timeout
        self.on_notification = on_notification
        self._handlers: dict[str, Handler] = {}
        self._ids = itertools.count(1)
        self._last_id = 0
        self._pending: dict[int, asyncio.Future] = {}
        self._handler_tasks: set[asyncio.Task] = set()
        self._closed: RpcConnectionClosed | None = None
        self._reader = asyncio.get_running_loop().create_task(self._read())

    # -- public API -------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def close_code(self) -> int | None:
        return self._closed.code if self._closed is not None else None

    def on(self, method: str, handler: Handler | None) -> None:
        """Route push notifications ``method`` to ``handler(params)``; ``None`` removes the route."""
        if handler is None:
            self._handlers.pop(method, None)
        else:
            self._handlers[method] = handler

    async def call(self, method: str, /, *args, **kwargs) -> Any:
        """Call ``method`` with positional (array) or named (object) params; return its result."""
        return await self.call_with(method, _params_of(args, kwargs))

    async def call_with(self, method: str, params: Sequence | dict | None = None, *,
                        timeout: float | None = _DEFAULT) -> Any:
        """Like ``call`` with params given as a list/tuple/dict (or None), and its own timeout."""
        self._check_open()
        rid = self._next_id()
        data = orjson.dumps(_message(method, params, rid))
        fut = self._expect(rid)
        try:
            await self._send(data)
            return await asyncio.wait_for(fut, self._timeout(timeout))
        finally:
            self._forget(rid, fut)

    async def notify(self, method: str, /, *args, **kwargs) -> None:
        """Send a notification: no id, and the server sends nothing back, not even an error."""
        self._check_open()
        await self._send(orjson.dumps(_message(method, _params_of(args, kwargs))))

    async def batch(self, calls: Iterable[tuple[str, Any]], notifications: Iterable[tuple[str, Any]] = (), *,
                    timeout: float | None = _DEFAULT) -> list:
        """Send ``(method, params)`` calls and notifications as one batch.

        Returns one item per call, in the order given: its result, or the ``RpcError`` it got
        (returned, not raised). A timeout or a closed connection raises for the whole batch.
        """
        self._check_open()
        rids, msgs = [], []
        for method, params in calls:
            rids.append(self._next_id())
            msgs.append(_message(method, params, rids[-1]))
        msgs.extend(_message(method, params) for method, params in notifications)
        if not msgs:
            raise ValueError("an empty batch is invalid JSON-RPC")
        data = orjson.dumps(msgs)
        futs = [self._expect(rid) for rid in rids]
        try:
            await self._send(data)
            if not futs:
                return []
            done = await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), self._timeout(timeout))
        finally:
            for rid, fut in zip(rids, futs):
                self._forget(rid, fut)
        for item in done:
            if isinstance(item, RpcConnectionClosed):
                raise item
        return done

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the connection and fail pending calls. Safe to call more than once."""
        self._fail_pending(RpcConnectionClosed(code, reason))
        current = asyncio.current_task()
        for task in list(self._handler_tasks):
            if task is not current:
                task.cancel()
        await self.ws.close(code, reason)
        if self._reader is not current:
            await asyncio.gather(self._reader, return_exceptions=True)

    async def __aenter__(self) -> "RpcClient":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    # -- sending ----------------------------------------------------------------------
    def _next_id(self) -> int:
        self._last_id = next(self._ids)
        return self._last_id

    def _timeout(self, timeout) -> float | None:
        return self.call_timeout if timeout is _DEFAULT else timeout

    def _check_open(self) -> None:
        if self._closed is not None:
            raise self._closed

    def _expect(self, rid: int) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        return fut

    def _forget(self, rid: int, fut: asyncio.Future) -> None:
        self._pending.pop(rid, None)
        if fut.done() and not fut.cancelled():
            fut.exception()  # failed while its send failed: the caller got that error; no "never retrieved" log

    async def _send(self, data: bytes) -> None:
        try:
            await self.ws.send(data, text=True)  # orjson gives bytes; JSON-RPC peers expect text frames
        except ConnectionClosed as exc:
            self._check_open()  # the reader may already know the close code
            raise RpcConnectionClosed(*_close_info(exc)) from None

    # -- receiving --------------------------------------------------------------------
    async def _read(self) -> None:
        closed = RpcConnectionClosed(ABNORMAL_CLOSURE, "reader stopped")
        try:
            while True:
                raw = await self.ws.recv()
                try:
                    self._on_message(raw)
                except Exception:  # never let one odd message stop the reader
                    log.exception("JSON-RPC client: failed to handle a message from the server")
        except ConnectionClosed as exc:
            closed = RpcConnectionClosed(*_close_info(exc))
        except Exception as exc:
            log.exception("JSON-RPC client: the connection failed")
            closed = RpcConnectionClosed(ABNORMAL_CLOSURE, f"{type(exc).__name__}: {exc}")
        finally:
            self._fail_pending(closed)

    def _fail_pending(self, exc: RpcConnectionClosed) -> None:
        if self._closed is None:
            self._closed = exc
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(self._closed)
        self._pending.clear()

    def _on_message(self, raw) -> None:
        try:
            msg = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            log.warning("JSON-RPC client: dropped a message that is not JSON (%s): %.200r", exc, raw)
            return
        if isinstance(msg, list) and msg:  # a batch response: each member stands alone
            for item in msg:
                self._on_object(item)
        else:
            self._on_object(msg)

    def _on_object(self, msg) -> None:
        if not isinstance(msg, dict):
            log.warning("JSON-RPC client: dropped a message that is not an object: %.200r", msg)
        elif "method" in msg:
            if "id" in msg:
                log.warning("JSON-RPC client: dropped a request from the server (not supported): %.200r", msg)
            else:
                self._on_notification(msg.get("method"), msg.get("params"))
        elif "result" in msg or "error" in msg:
            self._on_response(msg)
        else:
            log.warning("JSON-RPC client: dropped a message that is neither a response nor a notification: "
                        "%.200r", msg)

    def _on_response(self, msg: dict) -> None:
        rid = msg.get("id")
        fut = self._pending.get(rid) if isinstance(rid, int) and not isinstance(rid, bool) else None
        if fut is None:
            if isinstance(rid, int) and 0 < rid <= self._last_id:
                log.debug("JSON-RPC client: late answer to call %d (timed out or cancelled)", rid)
            elif rid is None and "error" in msg:
                # the server could not tell which request this is about (e.g. one it could not parse)
                log.warning("JSON-RPC client: error response without an id: %.200r", msg.get("error"))
            else:
                log.warning("JSON-RPC client: dropped a response with an unknown id: %.200r", msg)
            return
        if fut.done():
            return
        if "error" in msg:
            fut.set_exception(_error_of(msg["error"]))
        else:
            fut.set_result(msg["result"])

    def _on_notification(self, method, params) -> None:
        handler = self._handlers.get(method) if isinstance(method, str) else None
        if handler is not None:
            args: tuple = (params,)
        elif self.on_notification is not None:
            handler, args = self.on_notification, (method, params)
        else:
            log.debug("JSON-RPC client: no handler for notification %r", method)
            return
        try:
            out = handler(*args)
        except Exception:
            log.exception("JSON-RPC client: handler for notification %r raised", method)
            return
        if inspect.isawaitable(out):
            # its own task: a handler may itself call the server, whose answer this reader must read
            task = asyncio.ensure_future(out)
            self._handler_tasks.add(task)
            task.add_done_callback(lambda t, m=method: self._handler_done(t, m))

    def _handler_done(self, task: asyncio.Task, method) -> None:
        self._handler_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("JSON-RPC client: handler for notification %r raised", method, exc_info=task.exception())


def _close_info(exc: ConnectionClosed) -> tuple[int, str]:
    frame = exc.rcvd or exc.sent
    return (frame.code, frame.reason) if frame is not None else (ABNORMAL_CLOSURE, "")


class _Connecting:
    """What ``connect()`` returns: ``await`` it for a client, or use it with ``async with``."""

    def __init__(self, uri: str, client_options: dict, ws_options: dict):
        self._uri = uri
        self._client_options = client_options
        self._ws_options = ws_options
        self._client: RpcClient | None = None

    async def _open(self) -> RpcClient:
        ws = await ws_connect(self._uri, **self._ws_options)
        return RpcClient(ws, **self._client_options)

    def __await__(self):
        return self._open().__await__()

    async def __aenter__(self) -> RpcClient:
        self._client = await self._open()
        return self._client

    async def __aexit__(self, *exc_info) -> None:
        await self._client.close()


def connect(uri: str, *, on_notification: Handler | None = None, call_timeout: float | None = 30.0,
            ssl=None, origin: str | None = None, additional_headers=None, max_size: int | None = 2 ** 20,
            compression: str | None = "deflate", **ws_options) -> _Connecting:
    """Open a JSON-RPC client on ``uri`` (``ws://`` or ``wss://``).

    ``ssl``, ``origin``, ``additional_headers``, ``max_size`` (bytes per incoming message; None
    for no limit) and ``compression`` (``"deflate"`` or None) go to
    ``websockets.asyncio.client.connect``, as does any other keyword (``open_timeout``,
    ``ping_interval``, ``proxy``...).
    """
    options = dict(origin=origin, additional_headers=additional_headers, max_size=max_size,
                   compression=compression, **ws_options)
    if ssl is not None:  # websockets picks a default TLS context for wss:// only when ssl is absent
        options["ssl"] = ssl
    return _Connecting(uri, {"on_notification": on_notification, "call_timeout": call_timeout}, options)
