"""add_after on the loop clock (virtual, via looptime): ready times, dedup, shutdown."""

from __future__ import annotations

import asyncio

import pytest

from workqueue import DelayingQueue, Queue, ShutDown

pytestmark = pytest.mark.looptime


async def _get_at(q: Queue[str]) -> tuple[str, float]:
    item = await q.get()
    return item, asyncio.get_running_loop().time()


async def test_item_becomes_ready_after_its_delay() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    start = asyncio.get_running_loop().time()
    q.add_after("a", 2.5)
    assert len(q) == 0
    assert q.waiting == 1
    item, at = await _get_at(q)
    assert item == "a"
    assert at - start == pytest.approx(2.5)
    assert q.waiting == 0


async def test_items_come_out_in_ready_time_order() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    start = asyncio.get_running_loop().time()
    q.add_after("slow", 3)
    q.add_after("fast", 1)
    q.add_after("mid", 2)
    got = [await _get_at(q) for _ in range(3)]
    assert [(k, round(t - start, 6)) for k, t in got] == [("fast", 1), ("mid", 2), ("slow", 3)]


async def test_re_adding_a_waiting_item_keeps_the_earlier_time() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    start = asyncio.get_running_loop().time()
    q.add_after("a", 5)
    q.add_after("a", 10)  # later: ignored
    q.add_after("a", 2)  # earlier: wins
    assert q.waiting == 1
    item, at = await _get_at(q)
    assert item == "a"
    assert at - start == pytest.approx(2)
    await asyncio.sleep(20)
    assert len(q) == 0  # the stale entries never fire


async def test_non_positive_delay_adds_at_once() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert len(q) == 2


async def test_ready_item_that_is_already_queued_is_not_duplicated() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("a", 1)
    q.add("a")
    await asyncio.sleep(2)
    assert len(q) == 1


async def test_ready_item_in_processing_is_requeued_after_done() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add("a")
    item = await q.get()
    q.add_after("a", 1)
    await asyncio.sleep(2)
    assert len(q) == 0
    q.done(item)
    assert await q.get() == "a"


async def test_shutdown_drops_waiting_items() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("a", 1)
    q.shutdown()
    q.add_after("b", 1)
    await asyncio.sleep(2)
    assert q.waiting == 0
    with pytest.raises(ShutDown):
        await q.get()


async def test_many_waiting_items_need_no_task_each() -> None:
    q: DelayingQueue[int] = DelayingQueue()
    tasks_before = len(asyncio.all_tasks())
    for i in range(10_000):
        q.add_after(i, 1 + (i % 100) / 10)
    assert len(asyncio.all_tasks()) == tasks_before
    await asyncio.sleep(11)
    assert len(q) == 10_000
