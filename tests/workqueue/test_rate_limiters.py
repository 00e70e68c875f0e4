"""client-go's rate limiters, number for number, and the rate-limiting queue on a virtual clock."""

from __future__ import annotations

import asyncio

import pytest

from workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
)

pytestmark = pytest.mark.looptime


def test_exponential_doubles_from_5ms_and_caps_at_1000s() -> None:
    r = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    delays = [r.when("a") for _ in range(25)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[17] == pytest.approx(655.36)  # the 18th failure
    assert delays[18:] == [1000.0] * 7
    assert r.num_requeues("a") == 25
    assert r.when("b") == 0.005  # per item
    r.forget("a")
    assert r.num_requeues("a") == 0
    assert r.when("a") == 0.005


def test_exponential_survives_huge_failure_counts() -> None:
    r = ItemExponentialFailureRateLimiter(0.001, 10.0)
    for _ in range(2000):
        last = r.when("x")
    assert last == 10.0


def test_fast_slow() -> None:
    r = ItemFastSlowRateLimiter(0.001, 10.0, 3)
    assert [r.when("a") for _ in range(5)] == [0.001, 0.001, 0.001, 10.0, 10.0]
    assert r.num_requeues("a") == 5
    r.forget("a")
    assert r.when("a") == 0.001


async def test_bucket_allows_burst_100_then_10_per_second() -> None:
    r = BucketRateLimiter(10.0, 100)
    delays = [r.when(i) for i in range(103)]
    assert delays[:100] == [0.0] * 100
    assert delays[100:] == pytest.approx([0.1, 0.2, 0.3])
    assert r.num_requeues(1) == 0
    await asyncio.sleep(10)  # refills 100 tokens, minus the 3 owed
    assert r.when("z") == 0.0


async def test_default_controller_limiter_is_max_of_exponential_and_bucket() -> None:
    r = default_controller_rate_limiter()
    assert [r.when("a") for _ in range(3)] == [0.005, 0.01, 0.02]
    assert r.num_requeues("a") == 3
    # 97 more distinct items use up the burst; the bucket then dominates the 5 ms backoff.
    for i in range(97):
        assert r.when(i) == 0.005
    assert r.when("late") == pytest.approx(0.1)
    r.forget("a")
    assert r.num_requeues("a") == 0


def test_max_of_reports_the_largest_requeue_count() -> None:
    fast = ItemFastSlowRateLimiter(0.001, 1.0, 1)
    exp = ItemExponentialFailureRateLimiter(0.002, 100.0)
    r = MaxOfRateLimiter(fast, exp)
    assert [r.when("a") for _ in range(3)] == [0.002, 1.0, 1.0]
    exp.forget("a")
    assert r.num_requeues("a") == 3
    r.forget("a")
    assert r.num_requeues("a") == 0


def test_with_max_wait_caps_the_delay() -> None:
    r = WithMaxWaitRateLimiter(ItemExponentialFailureRateLimiter(1.0, 1000.0), 3.0)
    assert [r.when("a") for _ in range(4)] == [1.0, 2.0, 3.0, 3.0]
    assert r.num_requeues("a") == 4


async def test_rate_limited_queue_backs_off_per_item_and_forget_resets() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(1.0, 60.0))
    loop = asyncio.get_running_loop()
    waits = []
    for _ in range(4):
        start = loop.time()
        q.add_rate_limited("a")
        item = await q.get()
        waits.append(round(loop.time() - start, 6))
        q.done(item)
    assert waits == [1.0, 2.0, 4.0, 8.0]
    assert q.num_requeues("a") == 4
    q.forget("a")
    assert q.num_requeues("a") == 0
    assert len(q) == 0


async def test_rate_limiting_queue_defaults_to_the_controller_limiter() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue(name="")
    q.add_rate_limited("a")
    q.add_rate_limited("a")
    assert q.num_requeues("a") == 2
    assert await q.get() == "a"
