"""Client-side rate limiting: client-go's token bucket in front of every API request.

KCM builds its clients with `--kube-api-qps` (20) and `--kube-api-burst` (30); a request
waits for a token, and the wait is recorded as `rest_client_rate_limiter_duration_seconds`.
The bucket is computed lazily from the event loop clock (no refill task), so it works on a
virtual clock in tests.
"""

from __future__ import annotations

import asyncio
import math


class TokenBucket:
    """A token bucket that hands out tokens in FIFO order of reservation.

    Reservations may drive the token count negative: each waiter sleeps exactly until its
    token would have been minted, like golang.org/x/time/rate's `Reserve`.
    """

    def __init__(self, qps: float, burst: int) -> None:
        if qps <= 0 or math.isinf(qps):
            self._unlimited = True
        else:
            self._unlimited = False
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._last: float | None = None

    @property
    def unlimited(self) -> bool:
        return self._unlimited

    def _advance(self, now: float) -> None:
        if self._last is None:
            self._last = now
            return
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
            self._last = now

    def reserve(self) -> float:
        """Take one token now and return how long the caller must wait before using it."""
        if self._unlimited:
            return 0.0
        now = asyncio.get_running_loop().time()
        self._advance(now)
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    def when(self) -> float:
        """Like `reserve` but for callers that only need the delay (the workqueue's bucket limiter)."""
        return self.reserve()

    async def acquire(self) -> float:
        """Wait for a token; return the seconds waited."""
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)
        return delay
