"""The per-zone tainting queue: `pkg/controller/nodelifecycle/scheduler/rate_limited_queue.go`.

Each zone has one `RateLimitedTimedQueue` of node names waiting for their NoExecute taint. A
pass (every 100 ms in KCM) calls `try_(fn)`: while the head is due and the zone's token bucket
grants a token, `fn(value)` runs; it returns `(done, wait)` and a node that is not done goes
back with `process_at = now + wait`. The bucket has burst 1 and the zone's current rate
(`--node-eviction-rate` normally, `--secondary-node-eviction-rate` or 0 in a partial disruption),
so at most `rate` nodes per second are tainted in a zone however many go down together: a
network partition that cuts off half a zone does not evict half the cluster's pods at once.

Quirks kept from Go, because the rates people tuned assume them:
- `try_` takes a token before it looks at whether the head is due (`TryAccept` first);
- `swap_limiter(qps)` with `qps <= 0` installs a limiter that never accepts (evictions stop);
  when the old bucket had no token left the new one starts empty too, so flapping zone states
  cannot mint extra tokens;
- `add` of a value already queued is refused, keyed by the value (a node name).

The clock is injectable (`now`), and defaults to the running loop's time, so the unit tests run
on a virtual clock.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

EVICTION_RATE_LIMITER_BURST = 1  # Go's scheduler.EvictionRateLimiterBurst


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


class TokenBucketLimiter:
    """client-go's `flowcontrol.NewTokenBucketRateLimiter` reduced to `TryAccept` and `QPS`.

    Starts full (`burst` tokens), refills at `qps` per second; `qps <= 0` never accepts.
    """

    def __init__(
        self, qps: float, burst: int = EVICTION_RATE_LIMITER_BURST, *, now: Callable[[], float] = _loop_time
    ) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._now = now
        self._tokens = float(self.burst)
        self._last: float | None = None

    def _refill(self) -> None:
        now = self._now()
        if self._last is not None and self.qps > 0:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def try_accept(self) -> bool:
        if self.qps <= 0:
            return False
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


@dataclass(order=True, slots=True)
class TimedValue:
    """A queued node: `value` (its name), `uid`, when it was added and when it may be processed."""

    process_at: float
    seq: int
    value: str = field(compare=False)
    uid: str = field(compare=False, default="")
    added_at: float = field(compare=False, default=0.0)


class RateLimitedTimedQueue:
    """A unique queue of node names drained by `try_` under a swappable token bucket."""

    def __init__(self, qps: float, *, now: Callable[[], float] = _loop_time) -> None:
        self._now = now
        self.limiter = TokenBucketLimiter(qps, now=now)
        self._heap: list[TimedValue] = []
        self._live: dict[str, TimedValue] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, value: object) -> bool:
        return value in self._live

    def add(self, value: str, uid: str = "") -> bool:
        """Queue `value` to be processed now (as soon as a token allows); False if already queued."""
        if value in self._live:
            return False
        now = self._now()
        item = TimedValue(now, next(self._seq), value, uid, now)
        self._live[value] = item
        heapq.heappush(self._heap, item)
        return True

    def remove(self, value: str) -> bool:
        """Drop `value` (the node became Ready again, or was deleted); True if it was queued."""
        return self._live.pop(value, None) is not None

    def clear(self) -> None:
        self._heap.clear()
        self._live.clear()

    def _head(self) -> TimedValue | None:
        while self._heap:
            item = self._heap[0]
            if self._live.get(item.value) is item:
                return item
            heapq.heappop(self._heap)
        return None

    def try_(self, fn: Callable[[TimedValue], tuple[bool, float]]) -> int:
        """Process due values while tokens last; returns how many `fn` calls were made."""
        calls = 0
        item = self._head()
        while item is not None:
            if not self.limiter.try_accept():
                break
            now = self._now()
            if now < item.process_at:
                break
            calls += 1
            done, wait = fn(item)
            # The processed entry goes stale (skipped by `_head`) once `_live` no longer points at it.
            if done:
                if self._live.get(item.value) is item:
                    del self._live[item.value]
            elif self._live.get(item.value) is item:
                again = TimedValue(now + wait + 1e-9, next(self._seq), item.value, item.uid, item.added_at)
                self._live[item.value] = again
                heapq.heappush(self._heap, again)
            item = self._head()
        return calls

    def swap_limiter(self, qps: float) -> None:
        """Change the zone's rate; a drained old bucket leaves the new one drained too (Go)."""
        if self.limiter.qps == qps:
            return
        new = TokenBucketLimiter(qps, now=self._now)
        if qps > 0 and not self.limiter.try_accept():
            new.try_accept()
        self.limiter = new
