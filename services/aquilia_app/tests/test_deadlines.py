"""aquilia_app.deadlines: the coarse body-read deadlines (one sweeping timer per loop)."""
import asyncio
import gc
import time
import weakref

import pytest
import uvloop

from aquilia_app import deadlines
from aquilia_app.deadlines import TICK, deadline


def run(coro):
    return uvloop.run(coro)


def test_an_expired_block_raises_timeout_error_within_a_tick():
    async def main():
        t = time.monotonic()
        with pytest.raises(TimeoutError, match="within 0.3 s"):
            with deadline(0.3):
                await asyncio.sleep(10)
        return time.monotonic() - t
    waited = run(main())
    assert 0.3 <= waited < 0.3 + TICK + 0.2, waited


def test_a_block_done_in_time_leaves_the_task_uncancelled():
    async def main():
        with deadline(0.05):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)  # several sweeps later: no stray cancellation arrives
        task = asyncio.current_task()
        return task.cancelling()
    assert run(main()) == 0


async def _task_inside_a_deadline() -> asyncio.Task:
    """A task waiting inside a 10 s deadline block, returned once it is in."""
    entered = asyncio.Event()

    async def victim():
        with deadline(10):
            entered.set()
            await asyncio.sleep(10)
    task = asyncio.create_task(victim())
    await entered.wait()
    return task


def test_a_cancellation_from_elsewhere_propagates_as_cancelled_error():
    async def main():
        task = await _task_inside_a_deadline()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    run(main())


def test_an_outside_cancellation_on_top_of_an_expiry_is_not_swallowed():
    """The deadline fired and someone else cancelled the task too: the caller must see the
    cancellation, not a timeout it could answer and carry on from."""
    async def main():
        task = await _task_inside_a_deadline()
        loop = asyncio.get_running_loop()
        watcher = deadlines._WATCHERS[loop]
        (d,) = watcher.entries
        d.at = 0.0  # due: the sweep below cancels the task...
        watcher.sweep(loop)
        assert d.expired and task.cancelling() == 1
        task.cancel()  # ...and before the task runs again, so does someone else
        with pytest.raises(asyncio.CancelledError):
            await task
    run(main())


def test_nested_blocks_each_answer_for_their_own_limit():
    async def main():
        with deadline(5):
            with pytest.raises(TimeoutError):
                with deadline(0.1):
                    await asyncio.sleep(10)
            await asyncio.sleep(0.01)  # the outer block goes on
        return "outer done"
    assert run(main()) == "outer done"


def test_the_timer_stops_when_nothing_is_watched_and_the_loop_is_not_kept():
    async def main():
        with deadline(1):
            await asyncio.sleep(0)
        watcher = deadlines._WATCHERS[asyncio.get_running_loop()]
        assert watcher.timer is not None and not watcher.entries
        await asyncio.sleep(TICK + 0.1)
        return watcher.timer
    assert run(main()) is None

    loop = asyncio.new_event_loop()
    loop.run_until_complete(main())
    ref = weakref.ref(loop)
    loop.close()
    del loop
    gc.collect()
    assert ref() is None and ref not in deadlines._WATCHERS


def test_no_limit_is_a_block_that_does_nothing():
    async def main():
        with deadline(None):
            await asyncio.sleep(0.01)
        return "ok"
    assert run(main()) == "ok"


def test_outside_a_task_it_is_a_clear_error():
    async def main():
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def in_a_callback():
            try:
                deadline(1).__enter__()
            except RuntimeError as e:
                fut.set_result(str(e))
        loop.call_soon(in_a_callback)
        return await fut
    assert "running task" in run(main())
