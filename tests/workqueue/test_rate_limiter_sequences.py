"""client-go's rate limiter sequences, ported from `default_rate_limiters_test.go` and
`rate_limiting_queue_test.go`, number for number (Go's durations as seconds)."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from workqueue import (
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
    WithMaxWaitRateLimiter,
)

pytestmark = pytest.mark.looptime

MS = 0.001


def test_item_exponential_failure_rate_limiter() -> None:  # TestItemExponentialFailureRateLimiter
    limiter = ItemExponentialFailureRateLimiter(1 * MS, 1.0)
    assert [limiter.when("one") for _ in range(5)] == [1 * MS, 2 * MS, 4 * MS, 8 * MS, 16 * MS]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == [1 * MS, 2 * MS]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 1 * MS


def test_item_exponential_failure_rate_limiter_overflow() -> None:  # ...RateLimiterOverFlow
    limiter = ItemExponentialFailureRateLimiter(1 * MS, 1000.0)
    for _ in range(5):
        limiter.when("one")
    assert limiter.when("one") == 32 * MS
    for _ in range(1000):
        limiter.when("overflow1")
    assert limiter.when("overflow1") == 1000.0

    limiter = ItemExponentialFailureRateLimiter(60.0, 1000 * 3600.0)
    for _ in range(2):
        limiter.when("two")
    assert limiter.when("two") == 4 * 60.0
    for _ in range(1000):
        limiter.when("overflow2")
    assert limiter.when("overflow2") == 1000 * 3600.0


def test_item_fast_slow_rate_limiter() -> None:  # TestItemFastSlowRateLimiter
    limiter = ItemFastSlowRateLimiter(5 * MS, 10.0, 3)
    assert [limiter.when("one") for _ in range(5)] == [5 * MS, 5 * MS, 5 * MS, 10.0, 10.0]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == [5 * MS, 5 * MS]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 5 * MS


def test_max_of_rate_limiter() -> None:  # TestMaxOfRateLimiter
    limiter = MaxOfRateLimiter(
        ItemFastSlowRateLimiter(5 * MS, 3.0, 3),
        ItemExponentialFailureRateLimiter(1 * MS, 1.0),
    )
    assert [limiter.when("one") for _ in range(5)] == [5 * MS, 5 * MS, 5 * MS, 3.0, 3.0]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == [5 * MS, 5 * MS]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 5 * MS


def test_max_of_no_rate_limiters_is_zero() -> None:  # NewMaxOfRateLimiter() with no limiters
    limiter = MaxOfRateLimiter()
    assert limiter.when("one") == 0
    assert limiter.num_requeues("one") == 0
    limiter.forget("one")


class StepRateLimiter:
    """The test's own limiter: `base_delay` for the first `threshold` calls, `max_delay` after."""

    def __init__(self, base_delay: float, max_delay: float, threshold: int) -> None:
        self.count = 0
        self.base_delay, self.max_delay, self.threshold = base_delay, max_delay, threshold

    def when(self, item: Hashable) -> float:
        self.count += 1
        return self.base_delay if self.count <= self.threshold else self.max_delay

    def forget(self, item: Hashable) -> None:
        return None

    def num_requeues(self, item: Hashable) -> int:
        return 0


def test_with_max_wait_rate_limiter() -> None:  # TestWithMaxWaitRateLimiter
    limiter = WithMaxWaitRateLimiter(StepRateLimiter(5 * MS, 1000.0, 100), 500.0)
    assert [limiter.when(i) for i in range(100)] == [5 * MS] * 100
    assert [limiter.when(i) for i in range(100, 200)] == [500.0] * 100


class RecordingQueue(RateLimitingQueue[str]):
    """Records the delay of each `add_after` (Go reads the waiting entries off its channel)."""

    def __init__(self, limiter: ItemExponentialFailureRateLimiter) -> None:
        super().__init__(limiter)
        self.delays: list[float] = []

    def add_after(self, item: str, seconds: float) -> None:
        self.delays.append(seconds)
        super().add_after(item, seconds)


async def test_rate_limiting_queue() -> None:  # TestRateLimitingQueue
    q = RecordingQueue(ItemExponentialFailureRateLimiter(1 * MS, 1.0))
    q.add_rate_limited("one")
    q.add_rate_limited("one")
    assert q.delays == [1 * MS, 2 * MS]
    assert q.num_requeues("one") == 2
    q.add_rate_limited("two")
    q.add_rate_limited("two")
    assert q.delays[2:] == [1 * MS, 2 * MS]
    q.forget("one")
    assert q.num_requeues("one") == 0
    q.add_rate_limited("one")
    assert q.delays[4:] == [1 * MS]
    q.shutdown()
