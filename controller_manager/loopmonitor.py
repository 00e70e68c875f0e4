"""Event-loop health: how late the loop runs a timer, as a histogram and as a liveness check.

Everything in the manager shares one event loop, so a code path that never suspends (a busy
requeue, a huge synchronous copy) stalls every controller, the informers, the health endpoints
and SIGTERM handling at once. A ticker that asks to wake every `interval` measures how late it
actually wakes: that lateness is the loop's lag, exported as `aiokcm_event_loop_lag_seconds`.

The `event-loop` check fails when the ticker has not run for `stall_threshold` (the loop is
stuck right now: a probe answered at the end of a stall sees it) or when a stall that long ended
less than `recent` ago, so a kubelet's liveness probe restarts a manager that keeps wedging
even though each probe happens to land between stalls. A loop wedged for good answers no probe
at all, and the probe's own timeout does the rest.
"""

from __future__ import annotations

import anyio
from prometheus_client import Histogram

LOOP_LAG = Histogram(
    "aiokcm_event_loop_lag_seconds",
    "How late the event loop ran a timer: time no task could run.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)


class LoopMonitor:
    def __init__(
        self, *, interval: float = 0.25, stall_threshold: float = 10.0, recent: float = 60.0
    ) -> None:
        self.interval = interval
        self.stall_threshold = stall_threshold
        self.recent = recent
        self._last_tick: float | None = None
        self._last_stall: float | None = None
        self.max_lag = 0.0

    async def run(self) -> None:
        """Tick until cancelled; run it in the manager's task group."""
        self._last_tick = anyio.current_time()
        while True:
            await anyio.sleep(self.interval)
            now = anyio.current_time()
            lag = max(0.0, now - self._last_tick - self.interval)
            self._last_tick = now
            LOOP_LAG.observe(lag)
            self.max_lag = max(self.max_lag, lag)
            if lag >= self.stall_threshold:
                self._last_stall = now

    def healthy(self) -> bool:
        if self._last_tick is None:
            return True
        now = anyio.current_time()
        if now - self._last_tick >= self.stall_threshold + self.interval:
            return False
        return self._last_stall is None or now - self._last_stall >= self.recent
