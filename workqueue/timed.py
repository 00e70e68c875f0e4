"""The timed worker queue: the taint manager's "run this for that key at that time".

NoExecuteTaintManager schedules a pod's deletion for when its shortest toleration runs out and
cancels it if the taint goes away (pkg/controller/tainteviction/timed_workers.go). The Go
version starts one `time.AfterFunc` timer per key; a big cluster losing a zone has hundreds of
thousands of them. Here all scheduled work sits in one heap served by one task (`run()`, to be
started in a task group); due work goes to a ready list drained by at most `concurrency`
worker tasks (64 by default), which exist only while there is due work.

Semantics kept from Go:
- `add_work` for a key that already has work (scheduled, running, or done successfully) is
  ignored: the existing schedule stands.
- The delay is `fire_at - created_at`, counted from the moment of the call (Go's
  `AfterFunc(fireAt.Sub(createdAt))`); callers pass `created_at=now`. A delay <= 0 fires at once.
- After a handler succeeds the key stays, with no work (`get_work` returns None), so a late
  duplicate add does not run it twice; `cancel_work` clears it (and returns False). A handler
  that raises is logged and its key removed, so the work can be added again.
- `cancel_work` returns True if it removed scheduled (or running) work. Unlike Go, due work
  still waiting for a free worker is not run once cancelled.

`shutdown()` stops the queue gracefully: nothing new fires or is accepted, handlers already
running finish, and then `run()` returns (cancelling `run()` instead cancels them too).

Cancelled entries stay in the heap and are skipped when popped; the heap is rebuilt when more
than half of it is dead, so cancel-heavy churn stays bounded.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import anyio
import structlog
from anyio.abc import TaskGroup

log = structlog.get_logger()

K = TypeVar("K", bound=Hashable)

_TICK = time.get_clock_info("monotonic").resolution
_MISSING = object()


@dataclass(slots=True, eq=False)
class TimedWork(Generic[K]):
    """One scheduled piece of work; `due` is the loop time it fires at."""

    key: K
    created_at: float
    fire_at: float
    due: float
    cancelled: bool = field(default=False)
    fired: bool = field(default=False)


class TimedWorkerQueue(Generic[K]):
    """Scheduled work per key on one heap and one task; see the module docstring."""

    def __init__(
        self, handler: Callable[[K], Awaitable[None]], *, name: str = "", concurrency: int = 64
    ) -> None:
        self.name = name
        self._concurrency = max(1, concurrency)
        self._active = 0
        self._handler = handler
        self._works: dict[K, TimedWork[K] | None] = {}
        self._heap: list[tuple[float, int, TimedWork[K]]] = []
        self._dead = 0
        self._ready: deque[TimedWork[K]] = deque()
        self._seq = itertools.count()
        self._wakeup = asyncio.Event()
        self._next_due = math.inf
        self._shutting_down = False

    def add_work(self, key: K, *, created_at: float, fire_at: float) -> None:
        """Run the handler for `key` after `fire_at - created_at` seconds, unless `key` has work."""
        if key in self._works or self._shutting_down:
            return
        delay = fire_at - created_at
        now = asyncio.get_running_loop().time()
        work = TimedWork(key, created_at, fire_at, now + max(delay, 0.0))
        if delay <= 0:
            self._works[key] = None  # Go: fired at once, no timer to cancel
            self._ready.append(work)
            self._wakeup.set()
            return
        self._works[key] = work
        heapq.heappush(self._heap, (work.due, next(self._seq), work))
        if work.due < self._next_due:
            self._wakeup.set()

    def cancel_work(self, key: K) -> bool:
        """Drop `key`'s work; True if scheduled or running work was removed."""
        if key not in self._works:
            return False
        work = self._works.pop(key)
        if work is None:
            return False
        if not work.cancelled:
            work.cancelled = True  # a due work not yet started is skipped too
            if not work.fired:  # still in the heap: it becomes a dead entry
                self._dead += 1
            if self._dead > 1024 and self._dead * 2 > len(self._heap):
                self._compact()
        return True

    def get_work(self, key: K) -> TimedWork[K] | None:
        """The work scheduled for `key`, or None (none, or it already fired at once)."""
        return self._works.get(key)

    def __len__(self) -> int:
        """Scheduled work that has not fired yet."""
        return len(self._heap) - self._dead

    def len(self) -> int:
        """Same as `len(queue)` (the name the contract uses)."""
        return len(self)

    def shutdown(self) -> None:
        """Fire nothing more; `run()` returns once the handlers already running are done."""
        self._shutting_down = True
        self._wakeup.set()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    async def run(self) -> None:
        """Fire work when due until shut down or cancelled; handlers run in this call's task group."""
        async with anyio.create_task_group() as tg:
            while not self._shutting_down:
                self._move_due_to_ready()
                self._dispatch(tg)
                self._next_due = self._head_due()
                self._wakeup.clear()
                with anyio.move_on_at(self._next_due):
                    await self._wakeup.wait()

    def _head_due(self) -> float:
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
            self._dead -= 1
        return heap[0][0] if heap else math.inf

    def _move_due_to_ready(self) -> None:
        now = anyio.current_time() + _TICK
        heap = self._heap
        while heap and heap[0][0] <= now:
            work = heapq.heappop(heap)[2]
            if work.cancelled:
                self._dead -= 1
                continue
            work.fired = True
            self._ready.append(work)

    def _dispatch(self, tg: TaskGroup) -> None:
        # A few workers drain the ready list: a task per running handler would cost ~40 µs per fire.
        spawn = min(len(self._ready), self._concurrency - self._active)
        for _ in range(spawn):
            self._active += 1
            tg.start_soon(self._worker)

    async def _worker(self) -> None:
        try:
            while self._ready and not self._shutting_down:
                work = self._ready.popleft()
                if not work.cancelled:
                    await self._call(work)
        finally:
            self._active -= 1

    async def _call(self, work: TimedWork[K]) -> None:
        key = work.key
        try:
            await self._handler(key)
        except Exception:
            log.exception("timed worker failed", queue=self.name, key=str(key))
            ok = False
        else:
            ok = True
        # Only settle the key if it still belongs to this work (not cancelled and re-added since).
        current = self._works.get(key, _MISSING)
        if current is work or current is None:
            if ok:
                self._works[key] = None  # keep the key: a duplicate add must not run it twice
            else:
                del self._works[key]

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if not entry[2].cancelled]
        heapq.heapify(self._heap)
        self._dead = 0
