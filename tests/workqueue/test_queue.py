"""The plain queue: client-go's dirty/processing semantics, waking, shutdown and drain."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from workqueue import Queue, ShutDown

pytestmark = pytest.mark.looptime


async def test_fifo_and_dedup_of_queued_items() -> None:
    q: Queue[str] = Queue()
    for key in ["a", "b", "a", "c", "b"]:
        q.add(key)
    assert len(q) == 3
    assert [await q.get() for _ in range(3)] == ["a", "b", "c"]
    assert len(q) == 0


async def test_item_added_while_processing_is_queued_again_after_done_only() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    item = await q.get()
    q.add("a")
    q.add("a")
    assert len(q) == 0  # never handed to a second worker while in work
    q.done(item)
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_done_without_new_add_does_not_requeue() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    q.done(await q.get())
    q.add("b")
    assert await q.get() == "b"


async def test_get_waits_until_add_wakes_it() -> None:
    q: Queue[str] = Queue()
    got: list[str] = []

    async def worker() -> None:
        got.append(await q.get())

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        tg.start_soon(worker)
        await asyncio.sleep(1)
        assert got == []
        q.add("x")
        q.add("y")
    assert sorted(got) == ["x", "y"]


async def test_cancelled_woken_waiter_passes_the_item_on() -> None:
    q: Queue[str] = Queue()
    got: list[str] = []

    async def worker() -> None:
        got.append(await q.get())

    first = asyncio.create_task(worker())
    await asyncio.sleep(0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        await asyncio.sleep(0)
        q.add("x")  # wakes `first`, which is cancelled before it can take the item
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
    assert got == ["x"]


async def test_shutdown_hands_out_remaining_items_then_raises() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    q.shutdown()
    q.add("b")  # ignored once shutting down
    assert q.shutting_down
    assert await q.get() == "a"
    with pytest.raises(ShutDown):
        await q.get()


async def test_shutdown_wakes_every_waiting_worker() -> None:
    q: Queue[str] = Queue()
    stopped = 0

    async def worker() -> None:
        nonlocal stopped
        with pytest.raises(ShutDown):
            await q.get()
        stopped += 1

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(worker)
        await asyncio.sleep(0.1)
        q.shutdown()
    assert stopped == 3


async def test_shutdown_with_drain_waits_for_in_flight_items() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    item = await q.get()
    drained = False

    async def drain() -> None:
        nonlocal drained
        await q.shutdown_with_drain()
        drained = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain)
        await asyncio.sleep(5)
        assert not drained
        q.done(item)
    assert drained


async def test_plain_shutdown_releases_a_drain() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    await q.get()
    async with anyio.create_task_group() as tg:
        tg.start_soon(q.shutdown_with_drain)
        await asyncio.sleep(1)
        q.shutdown()


async def test_drain_of_idle_queue_returns_at_once() -> None:
    q: Queue[str] = Queue()
    await q.shutdown_with_drain()
    with pytest.raises(ShutDown):
        await q.get()
