"""Rate limiters with client-go's exact numbers (util/workqueue/default_rate_limiters.go).

A rate limiter answers "how long should this item wait before its next try?" (`when`, which
also records the failure), `forget`s an item once it succeeds, and reports `num_requeues`.

- `ItemExponentialFailureRateLimiter`: base * 2^failures, capped; KCM's controllers use 5 ms to
  1000 s, so the 18th failure waits 655.36 s and every later one 1000 s.
- `BucketRateLimiter`: one token bucket for all items (10 qps, burst 100 by default), so a mass
  failure cannot hammer the API server however many distinct keys fail.
- `ItemFastSlowRateLimiter`: a fast delay for the first attempts, a slow one after.
- `MaxOfRateLimiter`: the worst of several; `default_controller_rate_limiter()` is
  max(exponential 5 ms..1000 s, bucket 10/100), client-go's `DefaultControllerRateLimiter`.
- `WithMaxWaitRateLimiter`: caps another limiter's delay.

The bucket reuses `apiclient.throttle.TokenBucket` (golang.org/x/time/rate's reservation
semantics on the event loop clock), so `when` on a bucket needs a running loop.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Protocol

from apiclient.throttle import TokenBucket


class RateLimiter(Protocol):
    def when(self, item: Hashable) -> float:
        """Seconds `item` should wait now; counts as one more failure for per-item limiters."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking `item` (it succeeded), resetting its backoff."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """How many failures `item` has had since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter:
    """`base_delay * 2**failures`, capped at `max_delay` (and at Go's int64-nanosecond overflow)."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        if exp >= 1023:  # 2**exp overflows a float; Go returns max_delay on int64 overflow
            return self.max_delay
        backoff = self.base_delay * math.ldexp(1.0, exp)
        if backoff * 1e9 > 2**63 - 1:
            return self.max_delay
        return min(backoff, self.max_delay)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class ItemFastSlowRateLimiter:
    """`fast_delay` for the first `max_fast_attempts` failures of an item, then `slow_delay`."""

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self.fast_delay = fast_delay
        self.slow_delay = slow_delay
        self.max_fast_attempts = max_fast_attempts
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        failures = self._failures.get(item, 0) + 1
        self._failures[item] = failures
        return self.fast_delay if failures <= self.max_fast_attempts else self.slow_delay

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """One token bucket shared by all items; `forget` and `num_requeues` are no-ops."""

    def __init__(self, qps: float = 10.0, burst: int = 100) -> None:
        self.bucket = TokenBucket(qps, burst)

    def when(self, item: Hashable) -> float:
        return self.bucket.when()

    def forget(self, item: Hashable) -> None:
        return None

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest delay of all its limiters; `num_requeues` is the largest count.

    Both start from 0, as in client-go: with no limiters at all every delay and count is 0.
    """

    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        # Every limiter must see the failure (and the bucket must reserve), so no short-circuit.
        return max([0.0, *(limiter.when(item) for limiter in self.limiters)])

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max([0, *(limiter.num_requeues(item) for limiter in self.limiters)])


class WithMaxWaitRateLimiter:
    """Another limiter's delay, never more than `max_wait`."""

    def __init__(self, limiter: RateLimiter, max_wait: float) -> None:
        self.limiter = limiter
        self.max_wait = max_wait

    def when(self, item: Hashable) -> float:
        return min(self.limiter.when(item), self.max_wait)

    def forget(self, item: Hashable) -> None:
        self.limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.limiter.num_requeues(item)


def default_controller_rate_limiter() -> MaxOfRateLimiter:
    """client-go's `DefaultControllerRateLimiter`: max(per-item 5 ms..1000 s, bucket 10 qps / 100)."""
    return MaxOfRateLimiter(ItemExponentialFailureRateLimiter(0.005, 1000.0), BucketRateLimiter(10.0, 100))
