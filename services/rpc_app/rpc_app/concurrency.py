"""Per-connection state: many calls in flight, a bound with backpressure, push, cancel on close.

A transport gives each incoming message to ``Session.feed`` (or, for a callback-driven transport that
cannot await, checks ``Session.at_limit`` and queues while it is true) and sends what it returns:

* a sync call is answered inline (no task);
* an async call becomes a task. At most ``max_in_flight`` calls run at once per connection: each async
  call, alone or a member of a batch, holds one of the ``slots`` while it runs, and while
  ``max_in_flight`` tasks exist ``feed`` waits, so the transport stops reading (nothing is dropped:
  the WebSocket library's receive buffer and TCP flow control push back on the client);
* ``close()`` cancels every call still in flight (client gone: nobody to answer) and wakes a waiting
  ``feed``; ``draining`` makes new calls answer -32004 during a graceful shutdown.

Responses of async calls are sent as they complete, in any order, matched by id. Server push
(``notify``) goes through the same ``send``; broadcast messages queue per connection, bounded.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Awaitable, Callable

log = logging.getLogger("rpc_app")


class Slots:
    """A counting semaphore whose uncontended take is a plain method call (asyncio.Semaphore.acquire is a
    coroutine: an await per call). A released slot goes straight to the oldest waiter."""

    __slots__ = ("free", "_waiters")

    def __init__(self, n: int):
        self.free = n
        self._waiters: deque = deque()

    def try_take(self) -> bool:
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # handed a slot just as it was cancelled: pass it on
            else:
                self._waiters.remove(fut)
            raise

    def release(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self.free += 1


class Session:
    __slots__ = ("engine", "send", "send_nowait", "on_overflow", "scope", "owner", "rate", "inflight_ids", "tasks",
                 "max_in_flight", "slots", "_slot_free", "closed", "draining", "hub", "groups", "push_queue",
                 "max_push_queue", "_pusher", "loop", "__weakref__")

    def __init__(self, engine, send: Callable[[bytes], Awaitable[Any]], *, scope: dict | None = None,
                 owner: Any = None, max_in_flight: int = 64, hub=None, send_nowait=None, on_overflow=None,
                 max_push_queue: int = 1024):
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self.engine = engine
        self.send = send
        self.send_nowait = send_nowait  # optional: bool(data) -> sent now without waiting
        self.on_overflow = on_overflow  # called when a subscriber's push queue is full (drop it)
        self.scope = scope if scope is not None else {}
        self.owner = owner
        self.rate = engine.rate_limit.bucket() if engine.rate_limit is not None else None
        self.inflight_ids: dict = {}
        self.tasks: set[asyncio.Task] = set()
        self.max_in_flight = max_in_flight
        self.slots = Slots(max_in_flight)
        self._slot_free: asyncio.Event | None = None
        self.closed = False
        self.draining = False
        self.hub = hub
        self.groups: set[str] = set()
        self.push_queue: deque = deque()
        self.max_push_queue = max_push_queue
        self._pusher: asyncio.Task | None = None
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:  # created outside a loop (tests, tools): looked up per call instead
            self.loop = None

    # -- calls ------------------------------------------------------------------------
    @property
    def at_limit(self) -> bool:
        return len(self.tasks) >= self.max_in_flight

    async def feed(self, data) -> None:
        if self.closed:
            return
        out = self.engine.handle(data, self)
        if out is None:
            return
        if type(out) is bytes:
            await self.send(out)
            return
        try:
            while self.at_limit:  # backpressure: wait for a task to end (or the connection to close)
                if self._slot_free is None:
                    self._slot_free = asyncio.Event()
                self._slot_free.clear()
                await self._slot_free.wait()
                if self.closed:
                    raise asyncio.CancelledError
        except BaseException:
            out.close()
            raise
        self.start(out)

    def start(self, coro) -> asyncio.Task:
        """Run an async call's coroutine as a task of this connection; its answer is sent when it ends."""
        task = asyncio.get_running_loop().create_task(self._run(coro))
        self.tasks.add(task)
        task.add_done_callback(self._done)
        return task

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

    async def drain(self, timeout: float | None = None) -> int:
        """Stop taking calls (-32004) and wait up to ``timeout`` s for those in flight; returns how many are left."""
        self.draining = True
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=timeout)
        return len(self.tasks)

    def close(self) -> int:
        """Cancel every call in flight, leave every group; returns how many calls were cancelled."""
        self.closed = True
        n = 0
        for task in list(self.tasks):
            if not task.done():
                task.cancel()
                n += 1
        self.inflight_ids.clear()
        if self._slot_free is not None:
            self._slot_free.set()
        if self._pusher is not None:
            self._pusher.cancel()
        self.push_queue.clear()
        if self.hub is not None:
            self.hub.forget(self)
        return n

    # -- push -------------------------------------------------------------------------
    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification to this client (waits while the client is not reading)."""
        if not self.closed:
            await self.send(self.engine.encode_notification(method, params))

    def push(self, data: bytes) -> bool:
        """Queue an encoded broadcast message without waiting; False when this subscriber was dropped."""
        if self.closed:
            return False
        if not self.push_queue and self.send_nowait is not None and self.send_nowait(data):
            return True
        if len(self.push_queue) >= self.max_push_queue:
            log.warning("subscriber is %d push messages behind: dropping it", len(self.push_queue))
            if self.on_overflow is not None:
                self.on_overflow()
            self.close()
            return False
        self.push_queue.append(data)
        if self._pusher is None:
            self._pusher = asyncio.get_running_loop().create_task(self._push_all())
        return True

    async def _push_all(self) -> None:
        try:
            while self.push_queue and not self.closed:
                await self.send(self.push_queue.popleft())
        except Exception as exc:
            if not _is_disconnect(exc):
                log.error("pushing to a subscriber failed", exc_info=exc)
        finally:
            self._pusher = None


def _is_disconnect(exc: BaseException) -> bool:
    name = type(exc).__name__
    return name.startswith("ConnectionClosed") or isinstance(exc, (ConnectionError, OSError))
