"""Shutdown with and without drain, ported from client-go's `util/workqueue/queue_test.go`."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from workqueue import Queue, ShutDown

pytestmark = pytest.mark.looptime


async def _until_shut_down(q: Queue[str]) -> None:
    """Go's `for !shuttingDown { _, shuttingDown = q.Get() }` on a queue with nothing queued."""
    while True:
        try:
            await q.get()
        except ShutDown:
            return


async def test_queue_drainage_using_shutdown_with_drain() -> None:  # TestQueueDrainageUsingShutDownWithDrain
    q: Queue[str] = Queue()
    q.add("foo")
    q.add("bar")
    first = await q.get()
    second = await q.get()
    finished = anyio.Event()

    async def drain() -> None:
        await q.shutdown_with_drain()
        finished.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain)
        await _until_shut_down(q)
        assert not finished.is_set()
        q.done(first)
        assert not finished.is_set()
        q.done(second)
    assert finished.is_set()


async def test_no_queue_drainage_using_shutdown() -> None:  # TestNoQueueDrainageUsingShutDown
    q: Queue[str] = Queue()
    q.add("foo")
    q.add("bar")
    await q.get()
    await q.get()
    q.shutdown()  # returns at once: nothing waits for the two items in work


async def test_force_queue_shutdown_using_shutdown() -> None:  # TestForceQueueShutdownUsingShutDown
    q: Queue[str] = Queue()
    q.add("foo")
    q.add("bar")
    await q.get()
    await q.get()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(q.shutdown_with_drain)
            await _until_shut_down(q)
            q.shutdown()  # a second signal: the drain stops waiting for the items in work


async def test_queue_drainage_with_a_dirty_item() -> (
    None
):  # TestQueueDrainageUsingShutDownWithDrainWithDirtyItem
    q: Queue[str] = Queue()
    q.add("foo")
    gotten = await q.get()
    q.add("foo")
    async with anyio.create_task_group() as tg:
        tg.start_soon(q.shutdown_with_drain)
        await _until_shut_down(q)
        q.done(gotten)  # the dirty item goes back to the queue
        again = await q.get()  # not shut down yet: there is an item
        q.done(again)
        with pytest.raises(ShutDown):  # now we are really done
            await q.get()
        await asyncio.sleep(0)
