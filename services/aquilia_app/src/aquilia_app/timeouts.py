"""A time limit for handling a request, as native middleware: ``TimeoutMiddleware(seconds)`` cancels
whatever runs inside it (inner middleware, routing, reading the body, the handler) after ``seconds``
and answers 504 (problem+json).

What it bounds: the time until a response *object* exists.  A ``StreamingResponse`` (or SSE, or a
file) is returned quickly and its body is produced afterwards, outside the limit - bound a stream
inside its own generator.  The cancelled handler sees ``CancelledError`` at its current ``await``
(its ``finally`` blocks run); the request's DI scope is then closed as failed (``request.exc`` is
the ``TimeoutError``), so a transaction it opened is rolled back, not committed, and the background
tasks it added are dropped (as for a handler that raises).
"""
from __future__ import annotations

import asyncio

from .middleware import Middleware
from .responses import problem

__all__ = ["TimeoutMiddleware"]


class TimeoutMiddleware(Middleware):
    """See the module docstring."""

    def __init__(self, seconds: float):
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < 86400 * 365:
            raise ValueError(f"seconds must be a number > 0, not {seconds!r}")
        self.seconds = float(seconds)

    async def __call__(self, request, call_next):
        limit = asyncio.timeout(self.seconds)
        try:
            async with limit:
                return await call_next(request)
        except TimeoutError as e:
            if not limit.expired():  # a TimeoutError of the code inside, not our limit: not ours to answer
                raise
            if request.exc is None:
                request.exc = e
            # the handler did not return: the background tasks it added are dropped, as for a
            # handler that raises (they would act on work whose transaction was rolled back)
            request.background = None
            return problem(504, "Gateway Timeout", f"the request was not handled within {self.seconds:g} s")
