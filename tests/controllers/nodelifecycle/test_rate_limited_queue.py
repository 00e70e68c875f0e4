"""The per-zone tainting queue, ported from KCM's `scheduler/rate_limited_queue_test.go`.

Go reads the queue's heap and set directly; here `values()` is the queue in processing order and
`in` asks the set (values added and not removed since, processed or not).
"""

from __future__ import annotations

import asyncio

import pytest

from controllers.nodelifecycle.ratelimited import (
    FakeAlwaysRateLimiter,
    FakeNeverRateLimiter,
    RateLimitedTimedQueue,
    TimedValue,
)


class Ticker:
    """A clock that moves `step` seconds at every read (Go's `now` replaced by a counter)."""

    def __init__(self, step: float) -> None:
        self.t = 0.0
        self.step = step

    def __call__(self) -> float:
        t = self.t
        self.t += self.step
        return t


def three(q: RateLimitedTimedQueue) -> RateLimitedTimedQueue:
    q.add("first", "11111")
    q.add("second", "22222")
    q.add("third", "33333")
    return q


def members(q: RateLimitedTimedQueue, *candidates: str) -> set[str]:
    return {v for v in ("first", "second", "third", *candidates) if v in q}


def test_add_node() -> None:  # TestAddNode
    q = three(RateLimitedTimedQueue(FakeAlwaysRateLimiter()))
    assert q.values() == ["first", "second", "third"]
    assert members(q) == {"first", "second", "third"}


@pytest.mark.parametrize(
    ("removed", "left"),
    [("first", ["second", "third"]), ("second", ["first", "third"]), ("third", ["first", "second"])],
)
def test_del_node(removed: str, left: list[str]) -> None:  # TestDelNode
    q = three(RateLimitedTimedQueue(FakeAlwaysRateLimiter(), now=Ticker(1.0)))
    assert q.remove(removed)
    assert q.values() == left
    assert members(q) == set(left)


def test_try() -> None:  # TestTry
    q = three(RateLimitedTimedQueue(FakeAlwaysRateLimiter()))
    q.remove("second")
    deleted: set[str] = set()

    def fn(value: TimedValue) -> tuple[bool, float]:
        deleted.add(value.value)
        return True, 0.0

    q.try_(fn)
    assert deleted == {"first", "third"}


def test_try_ordering() -> None:  # TestTryOrdering
    clock = Ticker(0.001)
    clock.t = 0.001  # the first read is 1 ms
    delay = 0

    def now() -> float:
        nonlocal delay
        if delay > 0:
            delay -= 1
            return clock.t - clock.step
        return clock()

    q = three(RateLimitedTimedQueue(FakeAlwaysRateLimiter(), now=now))
    order: list[str] = []
    count = 0
    queued = False

    def fn(value: TimedValue) -> tuple[bool, float]:
        nonlocal count, queued, delay
        count += 1
        added = {"first": 0.001, "second": 0.002, "third": 0.003}[value.value]
        assert value.added_at == pytest.approx(added)
        if value.value == "second" and not queued:
            queued = True
            delay = 1
            return False, 0.002
        order.append(value.value)
        return True, 0.0

    q.try_(fn)
    assert order == ["first", "third"]
    assert count == 3
    assert q.values() == ["second"]  # due at 7 ms and a nanosecond; the clock read 6 ms


async def test_try_removing_while_try() -> None:  # TestTryRemovingWhileTry
    q = three(RateLimitedTimedQueue(FakeAlwaysRateLimiter(), now=Ticker(0.001)))
    processing = asyncio.Event()
    removed = asyncio.Event()
    order: list[str] = []
    count = 0
    queued = False

    async def remover() -> None:
        await processing.wait()
        q.remove("second")
        removed.set()

    async def fn(value: TimedValue) -> tuple[bool, float]:
        nonlocal count, queued
        count += 1
        if not queued and value.value == "second":
            queued = True
            processing.set()
            await removed.wait()
            return False, 0.001  # not put back: it was removed meanwhile
        order.append(value.value)
        return True, 0.0

    task = asyncio.create_task(remover())
    await q.try_async(fn)
    await task
    assert order == ["first", "third"]
    assert count == 3


def test_clear() -> None:  # TestClear
    q = three(RateLimitedTimedQueue(FakeAlwaysRateLimiter()))
    q.clear()
    assert q.values() == [] and len(q) == 0
    assert members(q) == set()


def test_swap_limiter() -> None:  # TestSwapLimiter
    q = RateLimitedTimedQueue(FakeAlwaysRateLimiter())
    assert q.limiter.qps == FakeAlwaysRateLimiter().qps
    q.swap_limiter(0)
    assert not q.limiter.try_accept()  # a limiter that never accepts, as FakeNeverRateLimiter
    assert not FakeNeverRateLimiter().try_accept()
    q.swap_limiter(5.5)
    assert q.limiter.qps == 5.5


def test_add_after_try() -> None:  # TestAddAfterTry
    q = three(RateLimitedTimedQueue(FakeAlwaysRateLimiter()))
    q.remove("second")
    deleted: set[str] = set()

    def fn(value: TimedValue) -> tuple[bool, float]:
        deleted.add(value.value)
        return True, 0.0

    q.try_(fn)
    assert deleted == {"first", "third"}
    assert not q.add("first", "11111")  # processed, never removed: still a member

    def never(value: TimedValue) -> tuple[bool, float]:
        raise AssertionError("the same value is processed once unless removed explicitly")

    assert q.try_(never) == 0
    assert q.remove("first") and q.add("first", "11111")  # removed: it may come back


def test_an_infinite_rate_accepts_every_time() -> None:
    q = three(RateLimitedTimedQueue(float("inf"), now=lambda: 0.0))
    assert q.try_(lambda v: (True, 0.0)) == 3
