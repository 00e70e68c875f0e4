"""The reflector's jittered exponential backoff, as client-go's `NewExponentialBackoffManager`.

800 ms doubling to 30 s, each delay stretched by up to 100% at random so that many informers
failing together (an API server restart) do not come back in lock-step, and reset to the
initial delay once no failure has happened for two minutes. Time is the event loop's clock, so
tests on a virtual clock (looptime) see the same schedule.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import anyio


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0
    reset_after: float = 120.0


class Backoff:
    """Successive delays for one reflector; `next()` is called once per failure."""

    __slots__ = ("_current", "_last", "_policy", "_rng")

    def __init__(
        self, policy: BackoffPolicy | None = None, *, rng: Callable[[], float] = random.random
    ) -> None:
        self._policy = policy or BackoffPolicy()
        self._rng = rng
        self._current = self._policy.initial
        self._last: float | None = None

    def next(self) -> float:
        p = self._policy
        now = anyio.current_time()
        if self._last is not None and now - self._last >= p.reset_after:
            self._current = p.initial
        self._last = now
        delay = self._current
        self._current = min(self._current * p.factor, p.cap)
        return delay + delay * p.jitter * self._rng() if p.jitter > 0 else delay

    async def sleep(self) -> None:
        await anyio.sleep(self.next())
