"""Coarse deadlines for reading request bodies: one timer per event loop, not one per request.

    try:
        with deadline(30.0):                 # the current task, cancelled once 30 s have passed
            body = await read_it()
    except TimeoutError:
        ...                                  # answer 408

    deadline(None)                           # no limit: a context manager that does nothing

``asyncio.timeout`` arms a loop timer per use; under uvloop arming and cancelling one costs about
8 microseconds, a tenth of a whole ``POST`` with a small JSON body.  Body deadlines are long (seconds)
and almost never expire, so precision to the millisecond buys nothing: here a deadline is an entry in
the loop's watch list (a dict insert and delete), and a single timer sweeps the list every ``TICK``
seconds while it is not empty.  A deadline therefore fires between its time and ``TICK`` later.

The cancellation works as ``asyncio.timeout``'s does: the task is cancelled, and leaving the block
with the ``CancelledError`` of an expired deadline takes the cancellation back (``Task.uncancel``) and
raises ``TimeoutError`` instead; a cancellation that came from elsewhere propagates.  The block is
left synchronously (``with``, not ``async with``), so a cancellation can only land inside it.

``TimeoutMiddleware`` keeps ``asyncio.timeout``: a time limit the app sets on handling is meant to be
exact, and it is opt-in, not on every request.
"""
from __future__ import annotations

import asyncio
import weakref
from asyncio import current_task as _current_task
from asyncio import get_running_loop as _get_running_loop

__all__ = ["Deadline", "deadline", "TICK"]

TICK = 0.25  # seconds between sweeps: how late a deadline may fire

_WATCHERS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watcher]" = weakref.WeakKeyDictionary()
_last: "tuple[weakref.ref, _Watcher | None]" = (lambda: None, None)  # the loop seen last and its watcher


class Deadline:
    """A ``with`` block of one task that may last ``seconds`` (see the module docstring)."""

    __slots__ = ("seconds", "task", "at", "expired", "_cancelling", "_watcher")

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False

    def __enter__(self) -> "Deadline":  # per request: inlined, no calls of ours
        loop = _get_running_loop()
        ref, watcher = _last
        if ref() is not loop:
            watcher = _watcher(loop)
        task = self.task = _current_task(loop)
        if task is None:
            raise RuntimeError("a deadline needs a running task")
        self.at = loop.time() + self.seconds
        self._cancelling = task.cancelling()  # cancellations already requested before the block
        self._watcher = watcher
        watcher.entries[self] = None
        if watcher.timer is None:
            watcher.timer = loop.call_later(TICK, watcher.sweep, loop)
        return self

    def __exit__(self, et, e, tb) -> None:
        self._watcher.entries.pop(self, None)
        # An expired deadline's own cancellation (and no other pending one) becomes a TimeoutError.
        if self.expired and et is asyncio.CancelledError and self.task.uncancel() <= self._cancelling:
            raise TimeoutError(f"not done within {self.seconds:g} s") from None


class _NoDeadline:
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, et, e, tb) -> None:
        return None


_NO_DEADLINE = _NoDeadline()


class _Watcher:
    """The watch list of one event loop and its sweeping timer."""

    __slots__ = ("entries", "timer")  # no reference to the loop: it is the key of _WATCHERS

    def __init__(self):
        self.entries: dict[Deadline, None] = {}  # insertion-ordered; a dict deletes in O(1)
        self.timer: asyncio.TimerHandle | None = None

    def sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self.timer = None
        now = loop.time()
        due = [d for d in self.entries if d.at <= now]
        for d in due:
            del self.entries[d]
            d.expired = True
            d.task.cancel()
        if self.entries:
            self.timer = loop.call_later(TICK, self.sweep, loop)


def deadline(seconds: float | None) -> "Deadline | _NoDeadline":
    """A ``with`` block cancelled between ``seconds`` and ``seconds + TICK`` after it starts, which then
    raises ``TimeoutError``; ``None``: no limit."""
    return _NO_DEADLINE if seconds is None else Deadline(seconds)


def _watcher(loop: asyncio.AbstractEventLoop) -> _Watcher:
    """The loop's watcher, remembered as the last one seen (a server runs one loop: this runs once)."""
    global _last
    watcher = _WATCHERS.get(loop)
    if watcher is None:
        watcher = _WATCHERS[loop] = _Watcher()
    _last = (weakref.ref(loop), watcher)
    return watcher
