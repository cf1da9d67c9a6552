"""Deadlines (-32003 only for the engine's own expiry) and the per-connection slots, in-process."""

import asyncio

import orjson
import pytest

from rpc_app import Engine, Registry, Session
from rpc_app.concurrency import Slots

pytestmark = pytest.mark.asyncio


async def _noop(_):
    return None


def registry(events):
    reg = Registry()

    @reg.method(timeout=0.05)
    async def hang():
        try:
            await asyncio.sleep(10)
        finally:
            events.append("hang cleaned up")

    @reg.method()
    async def own_timeout():
        await asyncio.wait_for(asyncio.sleep(10), 0.01)  # the method's own TimeoutError: not a deadline

    @reg.method()
    async def quick():
        return "ok"

    return reg


async def call(engine, session, method, rid=1):
    out = engine.handle(orjson.dumps({"jsonrpc": "2.0", "method": method, "id": rid}), session)
    return orjson.loads(await out if not isinstance(out, bytes) else out)


async def test_per_method_deadline_cancels_the_call():
    events = []
    engine = Engine(registry(events), call_timeout=30)
    session = Session(engine, _noop)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    r = await call(engine, session, "hang")
    assert r["error"] == {"code": -32003, "message": "Call timed out", "data": {"timeout": 0.05}}
    assert loop.time() - t0 < 1 and events == ["hang cleaned up"]
    assert (await call(engine, session, "quick", 2))["result"] == "ok"  # the task was uncancelled


async def test_a_methods_own_timeout_error_is_an_internal_error():
    engine = Engine(registry([]), call_timeout=30)
    r = await call(engine, Session(engine, _noop), "own_timeout")
    assert r["error"]["code"] == -32603


async def test_engine_default_deadline_and_none():
    reg = Registry()

    @reg.method()
    async def slow():
        await asyncio.sleep(0.3)
        return "done"

    assert (await call(Engine(reg, call_timeout=0.05), None, "slow"))["error"]["code"] == -32003
    assert (await call(Engine(reg, call_timeout=None), None, "slow"))["result"] == "done"
    with pytest.raises(ValueError):
        Engine(reg, call_timeout=0)


async def test_deadline_in_a_disconnect_is_still_a_cancellation():
    engine = Engine(registry([]), call_timeout=30)
    session = Session(engine, _noop)
    task = asyncio.ensure_future(call(engine, session, "hang"))
    await asyncio.sleep(0.01)
    task.cancel()  # the connection went before the deadline
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_slots_hand_over_in_order_and_survive_cancelled_waiters():
    slots = Slots(1)
    assert slots.try_take() and not slots.try_take()
    order = []

    async def waiter(name):
        await slots.take()
        order.append(name)

    a = asyncio.ensure_future(waiter("a"))
    b = asyncio.ensure_future(waiter("b"))
    c = asyncio.ensure_future(waiter("c"))
    await asyncio.sleep(0)
    b.cancel()
    await asyncio.sleep(0)
    slots.release()  # to a
    await asyncio.sleep(0)
    slots.release()  # b was cancelled: to c
    await asyncio.gather(a, c)
    assert order == ["a", "c"] and slots.free == 0
    slots.release()
    assert slots.free == 1 and slots.try_take()


async def test_slot_handed_to_a_waiter_cancelled_at_that_moment_is_passed_on():
    slots = Slots(1)
    assert slots.try_take()
    first = asyncio.ensure_future(slots.take())
    second = asyncio.ensure_future(slots.take())
    await asyncio.sleep(0)
    slots.release()   # first's future gets the slot...
    first.cancel()    # ...but first is cancelled before it runs
    await asyncio.sleep(0)
    await asyncio.wait_for(second, 1)  # the slot went on to second
    assert slots.free == 0
