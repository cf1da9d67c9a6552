"""Server-sent events (the ``text/event-stream`` format of the WHATWG HTML standard, section 9.2).

``ServerSentEvent`` encodes one event; ``EventSourceResponse(source)`` streams an iterable of events
(``ServerSentEvent``, ``str`` data, or a ``dict``/``list`` sent as JSON data) on both front ends.  The
source is an async iterable, a list/tuple, or any other sync iterable (a generator): each ``next`` of
the latter runs in the default thread pool, so a blocking one does not stall the event loop.  While
the source is idle a comment line (``: ping``) goes out every ``ping`` seconds, so proxies and
browsers keep the connection.  When the client leaves (ASGI ``http.disconnect``; RSGI
``proto.client_disconnect()`` or a transport that refuses to send) the source is cancelled and
closed (``aclose``, or ``close`` for a sync generator: its ``finally`` runs) and no task is left
behind.

The stream listens for the disconnect on the ASGI ``receive`` channel, so the source must not read
the request body (read it in the handler, before returning the response).
"""
from __future__ import annotations

import asyncio
import re
from contextlib import aclosing

from .responses import PerRequestResponse, _encode_headers, json_bytes, wait_for_disconnect
from .sync_iteration import aiterate

__all__ = ["ServerSentEvent", "EventSourceResponse", "PING"]

PING = b": ping\n\n"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the format's line ends (str.splitlines knows more)
_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no")]  # nginx: pass every event on at once


def _single_line(name: str, value) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"event {name} must be a str, not {type(value).__name__}")
    if "\r" in value or "\n" in value or (name == "id" and "\x00" in value):
        raise ValueError(f"event {name} {value!r} must be one line (no CR or LF{', no NUL' if name == 'id' else ''})")
    return value


def _data_text(data) -> str | None:
    if data is None or isinstance(data, str):
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("event data bytes must be UTF-8 (the stream is UTF-8 text)") from None
    return json_bytes(data).decode()  # dicts, lists, numbers, msgspec Structs: JSON on one line


class ServerSentEvent:
    """One event.  ``data`` (str, UTF-8 bytes or a JSON-able object) may span lines: each becomes a
    ``data:`` line and the client joins them with LF.  ``event`` and ``id`` must be single lines
    (``id`` without NUL, which clients ignore), ``retry`` is the client's reconnection delay in
    milliseconds, ``comment`` is sent as ``:`` lines (clients ignore them)."""

    __slots__ = ("data", "event", "id", "retry", "comment")

    def __init__(self, data=None, event: str | None = None, id: str | None = None, retry: int | None = None,
                 comment: str | None = None):
        if retry is not None and (isinstance(retry, bool) or not isinstance(retry, int) or retry < 0):
            raise ValueError(f"event retry must be an int >= 0 (milliseconds), not {retry!r}")
        if comment is not None and not isinstance(comment, str):
            raise TypeError("event comment must be a str")
        self.data = _data_text(data)
        self.event = _single_line("event", event)
        self.id = _single_line("id", id)
        self.retry = retry
        self.comment = comment
        if data is None and event is None and id is None and retry is None and comment is None:
            raise ValueError("an event needs at least one of data, event, id, retry, comment")

    def encode(self) -> bytes:
        out = []
        if self.comment is not None:
            out.extend(f": {line}\n" if line else ":\n" for line in _LINE_BREAK.split(self.comment))
        if self.event is not None:
            out.append(f"event: {self.event}\n")
        if self.id is not None:
            out.append(f"id: {self.id}\n")
        if self.retry is not None:
            out.append(f"retry: {self.retry}\n")
        if self.data is not None:
            out.extend(f"data: {line}\n" for line in _LINE_BREAK.split(self.data))
        out.append("\n")
        return "".join(out).encode()


def encode_item(item) -> bytes:
    """The bytes of one item of an event source."""
    if isinstance(item, ServerSentEvent):
        return item.encode()
    if item is None:
        raise TypeError("an event source yielded None; yield a ServerSentEvent, str or dict")
    return ServerSentEvent(item).encode()


class _ClientGone(Exception):
    """The server refused a write: the client has left."""


class EventSourceResponse(PerRequestResponse):
    """Stream the events of ``source`` (an async or sync iterable) as ``text/event-stream``; see the module
    docstring.  ``ping``: seconds of silence before a ``: ping`` comment (None: never)."""

    __slots__ = ("source", "ping")

    def __init__(self, source, ping: float | None = 15.0, headers=None, status: int = 200):
        if isinstance(source, (str, bytes)) or not (hasattr(source, "__aiter__") or hasattr(source, "__iter__")):
            raise TypeError(f"an event source is an iterable of events (async or not), not {type(source).__name__}")
        if ping is not None and not ping > 0:
            raise ValueError(f"ping must be > 0 seconds or None, not {ping!r}")
        self.source = source
        self.ping = ping
        self.status = status
        extra = _encode_headers(headers) if headers else []
        # a header the caller gives replaces the default of that name (one Cache-Control, not two)
        names = {k for k, _ in extra}
        self.raw_headers = [h for h in _HEADERS if h[0] not in names] + extra

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.raw_headers})

        async def write(data: bytes) -> None:
            try:
                await send({"type": "http.response.body", "body": data, "more_body": True})
            except OSError as e:  # ASGI 2.4: a send to a client that left raises
                raise _ClientGone from e

        if await self._run(write, lambda: wait_for_disconnect(receive)):
            await send({"type": "http.response.body", "body": b""})

    async def send_rsgi(self, proto) -> None:
        transport = proto.response_stream(self.status, self.rsgi_headers())

        async def write(data: bytes) -> None:
            try:
                await transport.send_bytes(data)
            except RuntimeError as e:  # granian's RSGIProtocolClosed: the client left
                raise _ClientGone from e

        async def client_gone() -> None:
            # awaited inside a coroutine: granian's awaitable looks like an asyncio future to
            # ensure_future but lacks what asyncio.gather reads from one
            await proto.client_disconnect()

        await self._run(write, client_gone)

    async def _run(self, write, wait_gone) -> bool:
        """Send the events (and pings) until the source ends (True) or the client leaves (False).
        The source's own errors propagate, after it was closed."""
        loop = asyncio.get_running_loop()
        lock = asyncio.Lock()  # the pinger and the producer never interleave inside a send
        last = [loop.time()]

        async def emit(data: bytes) -> None:
            async with lock:
                await write(data)
            last[0] = loop.time()

        produce = asyncio.ensure_future(self._produce(emit))
        tasks = [produce, asyncio.ensure_future(wait_gone())]
        if self.ping is not None:
            tasks.append(asyncio.ensure_future(self._pinger(emit, last, loop)))
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if produce.cancelled():
            return False
        exc = produce.exception()
        if exc is None:
            return True
        if isinstance(exc, _ClientGone):
            return False
        raise exc

    async def _produce(self, emit) -> None:
        async with aclosing(aiterate(self.source)) as items:  # a sync source: next() in the thread pool
            async for item in items:
                await emit(encode_item(item))

    async def _pinger(self, emit, last: list, loop) -> None:
        while True:
            idle = loop.time() - last[0]
            if idle < self.ping:
                await asyncio.sleep(self.ping - idle)
            else:
                await emit(PING)
