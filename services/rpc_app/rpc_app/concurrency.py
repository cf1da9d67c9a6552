"""Per-connection state: many calls in flight, a bound with backpressure, cancel on close.

A transport feeds each incoming message to ``Session.feed`` and awaits it:

* a sync call is answered inline (no task);
* an async call becomes a task; when ``max_in_flight`` tasks are running, ``feed``
  waits for one to finish, so the transport stops reading (nothing is dropped:
  the WebSocket library's receive buffer and TCP flow control push back on the client);
* ``close()`` cancels every call still in flight (client gone: nobody to answer).

Responses of async calls are sent as they complete, in any order, matched by id.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

log = logging.getLogger("rpc_app")


class Session:
    __slots__ = ("engine", "send", "scope", "owner", "rate", "inflight_ids", "tasks",
                 "max_in_flight", "_slot_free", "closed", "__weakref__")

    def __init__(self, engine, send: Callable[[bytes], Awaitable[Any]], *, scope: dict | None = None,
                 owner: Any = None, max_in_flight: int = 64):
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self.engine = engine
        self.send = send
        self.scope = scope if scope is not None else {}
        self.owner = owner
        self.rate = engine.rate_limit.bucket() if engine.rate_limit is not None else None
        self.inflight_ids: dict = {}
        self.tasks: set[asyncio.Task] = set()
        self.max_in_flight = max_in_flight
        self._slot_free: asyncio.Event | None = None
        self.closed = False

    async def feed(self, data) -> None:
        if self.closed:
            return
        out = self.engine.handle(data, self)
        if out is None:
            return
        if type(out) is bytes:
            await self.send(out)
            return
        # async call: wait for a free slot (backpressure), then run it as a task
        try:
            while len(self.tasks) >= self.max_in_flight:
                if self._slot_free is None:
                    self._slot_free = asyncio.Event()
                self._slot_free.clear()
                await self._slot_free.wait()
                if self.closed:
                    raise asyncio.CancelledError
        except BaseException:
            out.close()
            raise
        task = asyncio.get_running_loop().create_task(self._run(out))
        self.tasks.add(task)
        task.add_done_callback(self._done)

    async def _run(self, coro) -> None:
        out = await coro
        if out is not None and not self.closed:
            await self.send(out)

    def _done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if self._slot_free is not None:
            self._slot_free.set()
        if not task.cancelled():
            exc = task.exception()
            if exc is not None and not _is_disconnect(exc):
                log.error("sending a response failed", exc_info=exc)

    @property
    def in_flight(self) -> int:
        return len(self.tasks)

    def close(self) -> int:
        """Cancel every call in flight; returns how many were cancelled."""
        self.closed = True
        n = 0
        for task in list(self.tasks):
            if not task.done():
                task.cancel()
                n += 1
        self.inflight_ids.clear()
        if self._slot_free is not None:
            self._slot_free.set()
        return n

    async def drain(self) -> None:
        """Wait for every call in flight (used on graceful shutdown)."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)


def _is_disconnect(exc: BaseException) -> bool:
    name = type(exc).__name__
    return name.startswith("ConnectionClosed") or isinstance(exc, (ConnectionError, OSError))
