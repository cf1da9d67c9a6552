"""Example methods served by ``python -m rpc_app``: add, echo, sleep, big, fail."""

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

    return reg
