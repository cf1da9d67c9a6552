"""Call deadlines at a fraction of asyncio.timeout()'s cost.

asyncio.timeout() schedules and cancels a timer handle per call, which cost more than a whole small call
here (measured with bench/bench_engine.py). Calls with the same limit expire in the order they started,
so one ordered dict per distinct limit, with one timer armed for its oldest entry, tracks them all:
starting and ending a call is an insertion and a removal. When the timer finds a call past its limit,
it cancels that call's task and remembers that the cancellation is a deadline (``expired``).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict


class Deadlines:
    __slots__ = ("_queues", "_timers", "_expired")

    def __init__(self):
        self._queues: dict[float, OrderedDict] = {}
        self._timers: dict[float, asyncio.TimerHandle] = {}
        self._expired: set = set()

    def start(self, task: asyncio.Task, limit: float, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        queue = self._queues.get(limit)
        if queue is None:
            queue = self._queues[limit] = OrderedDict()
        queue[task] = now + limit
        if limit not in self._timers:
            self._timers[limit] = loop.call_at(now + limit, self._fire, limit, loop)

    def end(self, task: asyncio.Task, limit: float) -> bool:
        """Forget the call; True when it was cancelled by its deadline."""
        self._queues[limit].pop(task, None)
        if self._expired and task in self._expired:
            self._expired.discard(task)
            return True
        return False

    def _fire(self, limit: float, loop: asyncio.AbstractEventLoop) -> None:
        queue = self._queues[limit]
        now = loop.time()
        while queue:
            task, expiry = next(iter(queue.items()))
            if expiry > now:
                self._timers[limit] = loop.call_at(expiry, self._fire, limit, loop)
                return
            queue.popitem(last=False)
            if not task.done():
                self._expired.add(task)
                task.cancel()
        del self._timers[limit]
