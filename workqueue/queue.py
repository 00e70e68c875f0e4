"""The plain work queue: client-go's `dirty` / `processing` semantics on one event loop.

Three sets decide everything (kubernetes/client-go util/workqueue/queue.go):

- `dirty`: items that need processing. Adding an item that is already dirty is a no-op, so a
  burst of events for one key costs one sync.
- `processing`: items a worker holds between `get` and `done`. An item added while it is
  processing is marked dirty but *not* queued, so no two workers ever hold the same item;
  `done` queues it again, so the update that arrived mid-work is never lost.
- the queue itself: the order in which dirty, non-processing items are handed out (FIFO, or
  by priority for the sharded queue).

`get` is a coroutine that returns at once when an item is ready (no suspension at all on the
fast path) and otherwise parks on a future that `add` resolves: one waiter is woken per queued
item, like `sync.Cond.Signal`, and nobody polls. Shutting down wakes everyone; `get` keeps
handing out what is left and raises `ShutDown` once the queue is empty, as client-go does.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypedDict, TypeVar

from workqueue.metrics import QueueMetrics, queue_metrics

T = TypeVar("T", bound=Hashable)


class QueueOptions(TypedDict, Generic[T], total=False):
    """`Queue`'s keyword arguments, which the delaying and rate-limiting queues pass on unchanged."""

    name: str
    priority: Callable[[T], int] | None
    metrics: QueueMetrics | None


class ShutDown(Exception):
    """Raised by `get` once the queue is shutting down and has nothing left to hand out."""


class _Store(Protocol[T]):
    def append(self, item: T, /) -> None: ...
    def popleft(self) -> T: ...
    def __len__(self) -> int: ...


class PriorityFifo(Generic[T]):
    """Lowest `priority(item)` first, FIFO among equals: node items before pod items in a shard."""

    __slots__ = ("_heap", "_priority", "_seq")

    def __init__(self, priority: Callable[[T], int]) -> None:
        self._priority = priority
        self._heap: list[tuple[int, int, T]] = []
        self._seq = itertools.count()

    def append(self, item: T, /) -> None:
        heapq.heappush(self._heap, (self._priority(item), next(self._seq), item))

    def popleft(self) -> T:
        return heapq.heappop(self._heap)[2]

    def __len__(self) -> int:
        return len(self._heap)


class Queue(Generic[T]):
    """A work queue of hashable items; see the module docstring for the semantics."""

    def __init__(
        self,
        *,
        name: str = "",
        priority: Callable[[T], int] | None = None,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self.name = name
        self._queue: _Store[T] = deque() if priority is None else PriorityFifo(priority)
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._drainers: list[asyncio.Future[None]] = []
        self._shutting_down = False
        self._drain = False
        self._metrics = metrics if metrics is not None else queue_metrics(name)

    def add(self, item: T) -> None:
        """Mark `item` as needing processing; queue it unless it is already queued or in work."""
        if self._shutting_down or item in self._dirty:
            return
        if self._metrics is not None:
            self._metrics.add(item)
        self._dirty.add(item)
        if item in self._processing:
            return
        self._queue.append(item)
        if self._waiters:
            self._wake_one()

    def __len__(self) -> int:
        """Items queued and ready (not the ones in work, nor, for the delaying queue, waiting)."""
        return len(self._queue)

    async def get(self) -> T:
        """Take the next item; the caller must call `done(item)` when finished with it."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDown
            await self._wait()
        item = self._queue.popleft()
        if self._metrics is not None:
            self._metrics.get(item)
        self._processing.add(item)
        self._dirty.discard(item)
        return item

    def done(self, item: T) -> None:
        """Finish work on `item`; if it was added meanwhile, queue it again."""
        if self._metrics is not None:
            self._metrics.done(item)
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.append(item)
            if self._waiters:
                self._wake_one()
        if not self._processing and self._drainers:
            self._wake_drainers()

    def shutdown(self) -> None:
        """Stop accepting items; workers drain what is queued, then `get` raises `ShutDown`."""
        self._begin_shutdown(drain=False)

    async def shutdown_with_drain(self) -> None:
        """Shut down, then wait until every item handed out has been marked done.

        A plain `shutdown()` meanwhile stops the wait, as in client-go.
        """
        self._begin_shutdown(drain=True)
        await self._wait_drained()

    def _begin_shutdown(self, *, drain: bool) -> None:
        self._drain = drain
        self._shutting_down = True
        if self._metrics is not None:
            self._metrics.stop()
        self._wake_all()
        if not drain:
            self._wake_drainers()

    async def _wait_drained(self) -> None:
        loop = asyncio.get_running_loop()
        while self._processing and self._drain:
            fut: asyncio.Future[None] = loop.create_future()
            self._drainers.append(fut)
            await fut

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    async def _wait(self) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                # Woken for an item but cancelled before running: hand the wake-up on.
                self._wake_one()
            raise

    def _wake_one(self) -> None:
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def _wake_all(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)

    def _wake_drainers(self) -> None:
        drainers, self._drainers = self._drainers, []
        for fut in drainers:
            if not fut.done():
                fut.set_result(None)
