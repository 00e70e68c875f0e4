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
- `add` is keyed by the value (a node name) and refused while the value is a member: queued, or
  processed successfully and not `remove`d since (Go's `UniqueQueue` keeps processed values in its
  set), so a tainted node is not queued again until it is Ready again, deleted, or found lacking
  its taint;
- a value removed while `fn` runs on it is not put back, whatever `fn` returns.

One difference: the never-accepting limiter reports `qps == 0` (Go's fake reports 1), so a zone
stopped and then set back to exactly 1 node/s gets a working bucket again.

The clock is injectable (`now`), and defaults to the running loop's time (the monotonic clock
outside a loop), so the unit tests run on a virtual clock.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

EVICTION_RATE_LIMITER_BURST = 1  # Go's scheduler.EvictionRateLimiterBurst


def _loop_time() -> float:
    """The running loop's clock (virtual under looptime); the monotonic clock it reads otherwise."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


class RateLimiter(Protocol):
    """What the queue asks of its limiter: client-go's `flowcontrol.RateLimiter` `TryAccept` and `QPS`."""

    @property
    def qps(self) -> float: ...

    def try_accept(self) -> bool: ...


class TokenBucketLimiter:
    """client-go's `flowcontrol.NewTokenBucketRateLimiter` reduced to `TryAccept` and `QPS`.

    Starts full (`burst` tokens), refills at `qps` per second; `qps <= 0` never accepts and an
    infinite `qps` always does. A clock
    that steps back mints nothing (golang.org/x/time/rate counts from the earlier instant).
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
            elapsed = max(0.0, now - self._last)
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
        self._last = now

    def try_accept(self) -> bool:
        if self.qps <= 0:
            return False
        if math.isinf(self.qps):
            return True  # rate.Inf: no limit at all
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class FakeAlwaysRateLimiter:
    """client-go's `flowcontrol.NewFakeAlwaysRateLimiter`: accepts every time, reports 1 QPS."""

    qps = 1.0

    def try_accept(self) -> bool:
        return True


class FakeNeverRateLimiter:
    """client-go's `flowcontrol.NewFakeNeverRateLimiter`: never accepts, reports 1 QPS."""

    qps = 1.0

    def try_accept(self) -> bool:
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
    """A unique queue of node names drained by `try_` under a swappable limiter; see the module docstring.

    `limiter` is the zone's rate in nodes per second (a burst-1 token bucket on the queue's
    clock), or any `RateLimiter`.
    """

    def __init__(self, limiter: float | RateLimiter, *, now: Callable[[], float] = _loop_time) -> None:
        self._now = now
        self.limiter: RateLimiter = (
            TokenBucketLimiter(float(limiter), now=now) if isinstance(limiter, int | float) else limiter
        )
        self._heap: list[TimedValue] = []
        self._queued: dict[str, TimedValue] = {}  # value -> its live heap entry
        self._members: set[str] = set()  # added and not removed since, processed or not
        self._seq = itertools.count()

    def __len__(self) -> int:
        """Values waiting in the queue (processed ones are not, though they stay members)."""
        return len(self._queued)

    def __contains__(self, value: object) -> bool:
        """Whether `value` was added and not removed since: `add` refuses it until `remove`."""
        return value in self._members

    def queued(self, value: str) -> bool:
        """Whether `value` is waiting in the queue (not yet processed successfully)."""
        return value in self._queued

    def values(self) -> list[str]:
        """The waiting values, in the order `try_` would hand them out."""
        return [v.value for v in sorted(self._queued.values())]

    def add(self, value: str, uid: str = "") -> bool:
        """Queue `value` to be processed now (as soon as a token allows).

        Refused (False) while `value` is a member: queued, or processed and not removed since.
        """
        if value in self._members:
            return False
        now = self._now()
        self._push(TimedValue(now, next(self._seq), value, uid, now))
        self._members.add(value)
        return True

    def remove(self, value: str) -> bool:
        """Drop `value` and let it be added again (the node became Ready, or was deleted).

        True if it was a member, queued or already processed.
        """
        if value not in self._members:
            return False
        self._members.discard(value)
        self._queued.pop(value, None)
        return True

    def clear(self) -> None:
        """Drop every value, and with them the memory of the processed ones."""
        self._heap.clear()
        self._queued.clear()
        self._members.clear()

    def _push(self, item: TimedValue) -> None:
        self._queued[item.value] = item
        heapq.heappush(self._heap, item)

    def _head(self) -> TimedValue | None:
        while self._heap:
            item = self._heap[0]
            if self._queued.get(item.value) is item:
                return item
            heapq.heappop(self._heap)  # removed, replaced or processed: stale
        return None

    def _settle(self, item: TimedValue, done: bool, wait: float, now: float) -> None:
        """Go's `RemoveFromQueue` (done) or `Replace` (retry at `now + wait`), each a no-op for a
        value removed while it was being processed."""
        if self._queued.get(item.value) is not item:
            return
        if done:
            del self._queued[item.value]  # still a member: not added again until removed
        else:
            self._push(TimedValue(now + wait + 1e-9, next(self._seq), item.value, item.uid, item.added_at))

    def _next_due(self) -> tuple[TimedValue, float] | None:
        """The head and the time now, when the limiter lets one through and the head is due."""
        item = self._head()
        if item is None or not self.limiter.try_accept():
            return None
        now = self._now()
        return None if now < item.process_at else (item, now)

    def try_(self, fn: Callable[[TimedValue], tuple[bool, float]]) -> int:
        """Process due values while the limiter accepts; returns how many `fn` calls were made.

        `fn` returns `(done, wait)`: a value not done is processed again `wait` seconds later.
        """
        calls = 0
        while (due := self._next_due()) is not None:
            item, now = due
            calls += 1
            done, wait = fn(item)
            self._settle(item, done, wait, now)
        return calls

    async def try_async(self, fn: Callable[[TimedValue], Awaitable[tuple[bool, float]]]) -> int:
        """`try_` with a coroutine `fn` (one that writes the taint itself)."""
        calls = 0
        while (due := self._next_due()) is not None:
            item, now = due
            calls += 1
            done, wait = await fn(item)
            self._settle(item, done, wait, now)
        return calls

    def swap_limiter(self, qps: float) -> None:
        """Change the zone's rate; a drained old bucket leaves the new one drained too (Go)."""
        if self.limiter.qps == qps:
            return
        new = TokenBucketLimiter(qps, now=self._now)
        if qps > 0 and not self.limiter.try_accept():
            new.try_accept()
        self.limiter = new
