"""Background tasks: work a handler schedules to run after its response has been sent.

    @app.post("/signup")
    async def signup(body: SignUp, tasks: BackgroundTasks):
        tasks.add(send_welcome_mail, body.email)
        return {"ok": True}

A handler gets the request's ``BackgroundTasks`` by annotating a parameter with it.  The tasks run in
order once the response is out (on both front ends), before the request's DI scope is torn down, so
they may still use request-scoped dependencies.  A plain function runs in a worker thread (it may
block); a failing task is logged and does not stop the ones after it.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Callable

__all__ = ["BackgroundTasks"]

log = logging.getLogger("aquilia_app")


class BackgroundTasks:
    __slots__ = ("tasks",)

    def __init__(self):
        self.tasks: list[tuple[Callable, tuple, dict]] = []

    def add(self, fn: Callable, /, *args: Any, **kwargs: Any) -> None:
        if not callable(fn):
            raise TypeError(f"background task {fn!r} is not callable")
        self.tasks.append((fn, args, kwargs))

    add_task = add  # the name Starlette and FastAPI users know

    def __len__(self) -> int:
        return len(self.tasks)

    async def run(self) -> None:
        tasks, self.tasks = self.tasks, []
        for fn, args, kwargs in tasks:
            try:
                if inspect.iscoroutinefunction(fn):
                    await fn(*args, **kwargs)
                else:
                    r = await asyncio.to_thread(fn, *args, **kwargs)
                    if inspect.isawaitable(r):
                        await r
            except Exception:
                log.exception("background task %s failed", getattr(fn, "__qualname__", fn))
