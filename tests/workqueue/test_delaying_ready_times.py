"""`add_after` ready times on the loop's virtual clock, ported from client-go's `delaying_queue_test.go`.

Go steps a fake clock and polls `Len()`; here the loop's clock is virtual (looptime), so a sleep
is the step.
"""

from __future__ import annotations

import asyncio

import pytest

from workqueue import DelayingQueue

pytestmark = pytest.mark.looptime


async def test_simple_queue() -> None:  # TestSimpleQueue
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("foo", 0.050)
    assert len(q) == 0
    await asyncio.sleep(0.060)
    assert len(q) == 1
    q.done(await q.get())
    await asyncio.sleep(10)  # past the next heartbeat: nothing more is added
    assert len(q) == 0


async def test_deduping() -> None:  # TestDeduping
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("foo", 0.050)
    q.add_after("foo", 0.070)
    assert len(q) == 0
    await asyncio.sleep(0.060)  # past the first: it fires
    assert len(q) == 1
    q.done(await q.get())
    await asyncio.sleep(0.020)  # past the second: deduplicated, nothing
    assert len(q) == 0

    q.add_after("foo", 0.050)  # this time the earlier one wins
    q.add_after("foo", 0.030)
    assert len(q) == 0
    await asyncio.sleep(0.040)
    assert len(q) == 1
    q.done(await q.get())
    await asyncio.sleep(0.020)
    assert len(q) == 0


async def test_add_two_fire_early() -> None:  # TestAddTwoFireEarly
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("foo", 1)
    q.add_after("bar", 0.050)
    assert len(q) == 0
    await asyncio.sleep(0.060)
    assert len(q) == 1
    assert await q.get() == "bar"
    q.add_after("baz", 2)
    await asyncio.sleep(1)
    assert len(q) == 1
    assert await q.get() == "foo"
    await asyncio.sleep(2)
    assert len(q) == 1
    assert await q.get() == "baz"


async def test_copy_shifting() -> None:  # TestCopyShifting
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("foo", 1)
    q.add_after("bar", 0.5)
    q.add_after("baz", 0.25)
    assert len(q) == 0
    await asyncio.sleep(2)
    assert len(q) == 3
    assert [await q.get() for _ in range(3)] == ["baz", "bar", "foo"]
