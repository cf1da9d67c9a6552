"""Iterating what a handler returns for a streamed body: async iterables on the event loop, sync ones
(a generator may sleep or read a file) one ``next`` at a time in the default thread pool, so the loop
never waits on them; a list or tuple is already in memory and is walked inline.  Whatever happens -
the end, an error, the client leaving - the source is closed (``aclose`` / ``close``), so its
``finally`` blocks run.
"""
from __future__ import annotations

import asyncio
import contextvars
from contextlib import aclosing
from typing import Any, AsyncIterator

__all__ = ["aiterate", "close_source"]

_END = object()  # what next() returns for an exhausted sync iterator


async def aiterate(source) -> AsyncIterator[Any]:
    """The items of ``source`` (async or sync iterable); close the generator (``aclose``) when done
    early - ``contextlib.aclosing`` - and the source is closed with it."""
    if hasattr(source, "__aiter__"):
        it = source.__aiter__()
        try:
            async for item in it:
                yield item
        finally:
            await close_source(it)
    elif isinstance(source, (list, tuple)):
        for item in source:
            yield item
    else:
        async with aclosing(_in_thread_pool(iter(source))) as items:  # closed with us, not when collected
            async for item in items:
                yield item


async def _in_thread_pool(it) -> AsyncIterator[Any]:
    """Each ``next(it)`` in the default thread pool.  When the consumer stops during a ``next``, that
    call cannot be stopped: the close follows when it returns (a running generator cannot be closed)."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()  # as asyncio.to_thread: the source sees the request's context
    pending = None
    try:
        while True:
            pending = loop.run_in_executor(None, ctx.run, next, it, _END)
            item = await asyncio.shield(pending)  # shielded: the future must report when next() returns
            if item is _END:
                return
            yield item
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            if pending is None or pending.done():
                close()
            else:
                pending.add_done_callback(lambda f: (f.cancelled() or f.exception(), close()))


async def close_source(source) -> None:
    """``aclose()`` an async source, ``close()`` a sync one (a generator), if it has one."""
    aclose = getattr(source, "aclose", None)
    if aclose is not None:
        await aclose()
        return
    close = getattr(source, "close", None)
    if close is not None:
        close()
