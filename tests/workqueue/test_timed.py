"""TimedWorkerQueue: the taint manager's scheduled evictions, one heap and one task."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest

from workqueue import TimedWorkerQueue

pytestmark = pytest.mark.looptime


def _now() -> float:
    return asyncio.get_running_loop().time()


@asynccontextmanager
async def running(
    handler: Callable[[str], object] | None = None,
) -> AsyncIterator[tuple[TimedWorkerQueue[str], list[tuple[str, float]]]]:
    fired: list[tuple[str, float]] = []

    async def record(key: str) -> None:
        fired.append((key, _now()))
        if handler is not None:
            handler(key)

    q: TimedWorkerQueue[str] = TimedWorkerQueue(record, name="t")
    async with anyio.create_task_group() as tg:
        tg.start_soon(q.run)
        yield q, fired
        tg.cancel_scope.cancel()


async def test_work_fires_at_its_time_in_order() -> None:
    async with running() as (q, fired):
        t0 = _now()
        q.add_work("late", created_at=t0, fire_at=t0 + 30)
        q.add_work("soon", created_at=t0, fire_at=t0 + 10)
        assert len(q) == 2
        await asyncio.sleep(40)
    assert [(k, round(t - t0, 6)) for k, t in fired] == [("soon", 10), ("late", 30)]
    assert len(q) == 0


async def test_adding_existing_work_keeps_its_schedule() -> None:
    async with running() as (q, fired):
        t0 = _now()
        q.add_work("p", created_at=t0, fire_at=t0 + 10)
        q.add_work("p", created_at=t0, fire_at=t0 + 2)
        work = q.get_work("p")
        assert work is not None
        assert work.fire_at == t0 + 10
        await asyncio.sleep(20)
    assert [(k, round(t - t0, 6)) for k, t in fired] == [("p", 10)]


async def test_cancel_stops_scheduled_work() -> None:
    async with running() as (q, fired):
        t0 = _now()
        q.add_work("p", created_at=t0, fire_at=t0 + 10)
        await asyncio.sleep(5)
        assert q.cancel_work("p") is True
        assert q.cancel_work("p") is False
        assert q.get_work("p") is None
        assert len(q) == 0
        await asyncio.sleep(20)
    assert fired == []


async def test_done_work_blocks_duplicates_until_cancelled() -> None:
    async with running() as (q, fired):
        t0 = _now()
        q.add_work("p", created_at=t0, fire_at=t0 + 1)
        await asyncio.sleep(2)
        q.add_work("p", created_at=_now(), fire_at=_now() + 1)  # already done: ignored
        await asyncio.sleep(2)
        assert len(fired) == 1
        assert q.cancel_work("p") is False  # nothing left to cancel, but the key is cleared
        q.add_work("p", created_at=_now(), fire_at=_now() + 1)
        await asyncio.sleep(2)
    assert [k for k, _ in fired] == ["p", "p"]


async def test_failed_work_can_be_added_again() -> None:
    def boom(key: str) -> None:
        raise RuntimeError("eviction failed")

    async with running(boom) as (q, fired):
        t0 = _now()
        q.add_work("p", created_at=t0, fire_at=t0 + 1)
        await asyncio.sleep(2)
        q.add_work("p", created_at=_now(), fire_at=_now() + 1)
        await asyncio.sleep(2)
    assert len(fired) == 2


async def test_past_due_work_fires_at_once() -> None:
    async with running() as (q, fired):
        t0 = _now()
        q.add_work("p", created_at=t0, fire_at=t0 - 5)
        await asyncio.sleep(0.01)
        assert [k for k, _ in fired] == ["p"]
        assert q.get_work("p") is None


async def test_earlier_work_added_while_waiting_fires_first() -> None:
    async with running() as (q, fired):
        t0 = _now()
        q.add_work("late", created_at=t0, fire_at=t0 + 100)
        await asyncio.sleep(1)
        q.add_work("early", created_at=_now(), fire_at=_now() + 1)
        await asyncio.sleep(2)
        assert [(k, round(t - t0, 6)) for k, t in fired] == [("early", 2)]
        q.cancel_work("late")


async def test_150k_scheduled_items_without_a_task_each() -> None:
    async with running() as (q, fired):
        t0 = _now()
        tasks = len(asyncio.all_tasks())
        for i in range(150_000):
            q.add_work(f"pod-{i}", created_at=t0, fire_at=t0 + 1 + (i % 300))
        assert len(q) == 150_000
        assert len(asyncio.all_tasks()) == tasks
        for i in range(0, 150_000, 2):
            assert q.cancel_work(f"pod-{i}")
        assert len(q) == 75_000
        await asyncio.sleep(301)
    assert len(fired) == 75_000
    assert {k for k, _ in fired} == {f"pod-{i}" for i in range(1, 150_000, 2)}
    assert all(round(t - t0, 6) == 1 + (int(k[4:]) % 300) for k, t in fired)


async def test_concurrency_bounds_running_handlers_and_cancel_skips_waiting_work() -> None:
    running_now = 0
    peak = 0
    ran: list[str] = []

    async def slow(key: str) -> None:
        nonlocal running_now, peak
        running_now += 1
        peak = max(peak, running_now)
        await asyncio.sleep(10)
        ran.append(key)
        running_now -= 1

    q: TimedWorkerQueue[str] = TimedWorkerQueue(slow, concurrency=2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(q.run)
        t0 = _now()
        for key in ["a", "b", "c", "d"]:
            q.add_work(key, created_at=t0, fire_at=t0 + 1)
        await asyncio.sleep(2)  # a and b run; c and d are due and waiting for a worker
        assert q.cancel_work("c") is True
        await asyncio.sleep(30)
        tg.cancel_scope.cancel()
    assert peak == 2
    assert sorted(ran) == ["a", "b", "d"]
