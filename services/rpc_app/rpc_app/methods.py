"""Example methods served by ``python -m rpc_app``: arithmetic, echo, sleep, big results, errors, push."""

from __future__ import annotations

import asyncio

from .context import RpcContext
from .errors import RpcError
from .registry import Registry

MAX_SLEEP = 60.0
MAX_BIG_KB = 16 * 1024


def build_registry() -> Registry:
    reg = Registry()

    @reg.method()
    def add(a: float, b: float):
        """Sum of two numbers."""
        return a + b

    @reg.method()
    async def add_async(a: float, b: float):
        return a + b

    @reg.method()
    def echo(value=None):
        """Return the value given."""
        return value

    @reg.method()
    async def sleep(seconds: float, ctx: RpcContext = None):
        """Sleep (asynchronously) then return the seconds slept and the request id."""
        if seconds < 0 or seconds > MAX_SLEEP:
            raise RpcError(-32602, "Invalid params", f"seconds must be within 0..{MAX_SLEEP:g}")
        await asyncio.sleep(seconds)
        return {"slept": seconds, "id": ctx.request_id}

    @reg.method()
    def big(n: int):
        """A string of n KB (n * 1024 ASCII characters)."""
        if n < 0 or n > MAX_BIG_KB:
            raise RpcError(-32602, "Invalid params", f"n must be within 0..{MAX_BIG_KB}")
        block = "0123456789abcdef" * 64  # 1 KB
        return block * n

    @reg.method()
    def fail(message: str = "boom"):
        """Raise an unexpected exception (answered as -32603, traceback only in debug mode)."""
        raise ValueError(message)

    @reg.method()
    def fail_rpc(code: int = -32050, message: str = "application error"):
        """Raise an RpcError with a given code (answered as is)."""
        raise RpcError(code, message, {"why": "asked to"})

    @reg.method(blocking=True)
    def blocking_sleep(seconds: float):
        """A blocking (time.sleep) method, run in the thread pool."""
        import time
        if seconds < 0 or seconds > MAX_SLEEP:
            raise RpcError(-32602, "Invalid params", f"seconds must be within 0..{MAX_SLEEP:g}")
        time.sleep(seconds)
        return seconds

    @reg.method()
    async def subscribe(group: str, ctx: RpcContext):
        """Join a broadcast group: later ``publish`` calls to it arrive as notifications."""
        await ctx.join(group)
        return True

    @reg.method()
    async def unsubscribe(group: str, ctx: RpcContext):
        await ctx.leave(group)
        return True

    @reg.method()
    async def publish(group: str, message=None, ctx: RpcContext = None):
        """Notify every member of a group (method "message", params {"group", "message"}); returns how many."""
        return await ctx.broadcast(group, "message", {"group": group, "message": message})

    @reg.method()
    async def countdown(n: int, ctx: RpcContext):
        """Push n notifications ("tick", {"n": k}) to the caller, then answer n."""
        if n < 0 or n > 10_000:
            raise RpcError(-32602, "Invalid params", "n must be within 0..10000")
        for k in range(n, 0, -1):
            await ctx.notify("tick", {"n": k})
        return n

    return reg
