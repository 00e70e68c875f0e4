"""The delaying queue: `add_after(item, seconds)` on the event loop's own timer.

client-go keeps waiting items in a heap ordered by ready time, plus a map from item to its heap
entry so that adding an item that is already waiting keeps the *earlier* ready time
(util/workqueue/delaying_queue.go). One goroutine sleeps until the heap's head is due.

Here the "goroutine" is a single `loop.call_at` timer handle for the heap's head: not a task,
so nothing has to own or cancel it, and a queue used outside any task group leaks nothing.
When it fires, every due item is added to the queue in ready-time order and the handle is
re-armed for the new head. Re-adding an item earlier leaves a stale heap entry that is skipped
when popped (cheaper than a heap fix-up). Times come from `loop.time()`, so a virtual clock
(looptime) drives delays in tests.

As in client-go, `len()` counts only ready items, and `shutdown` drops the waiting ones.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from typing import Any, Unpack

from workqueue.queue import Queue, QueueOptions, T

# asyncio runs a timer up to one clock tick early; items due within it are due now.
_TICK = time.get_clock_info("monotonic").resolution


class DelayingQueue(Queue[T]):
    """A `Queue` with `add_after`; see the module docstring."""

    def __init__(self, **options: Unpack[QueueOptions[T]]) -> None:
        super().__init__(**options)
        # Heap entries are [ready_at, seq, item, live]; seq keeps items from ever being compared.
        self._waiting: list[list[Any]] = []
        self._known: dict[T, list[Any]] = {}
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    def add_after(self, item: T, seconds: float) -> None:
        """Add `item` once `seconds` have passed; an earlier pending ready time wins."""
        if self._shutting_down:
            return
        if self._metrics is not None:
            self._metrics.retry()
        if seconds <= 0:
            self.add(item)
            return
        loop = asyncio.get_running_loop()
        ready_at = loop.time() + seconds
        old = self._known.get(item)
        if old is not None:
            if old[0] <= ready_at:
                return
            old[3] = False
        entry = [ready_at, next(self._seq), item, True]
        self._known[item] = entry
        heapq.heappush(self._waiting, entry)
        if ready_at < self._timer_at:
            self._arm(loop, ready_at)

    @property
    def waiting(self) -> int:
        """Items waiting for their ready time (not yet in `len()`)."""
        return len(self._known)

    def _begin_shutdown(self, *, drain: bool) -> None:
        self._stop_waiting()
        super()._begin_shutdown(drain=drain)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(when, self._fire, loop, when)
        self._timer_at = when

    def _fire(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        self._timer = None
        self._timer_at = math.inf
        now = max(loop.time() + _TICK, when)
        heap = self._waiting
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            if entry[3]:
                del self._known[entry[2]]
                self.add(entry[2])
        while heap and not heap[0][3]:
            heapq.heappop(heap)
        if heap:
            self._arm(loop, heap[0][0])

    def _stop_waiting(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = math.inf
        self._waiting.clear()
        self._known.clear()
