"""The worker engine: every queue of every controller is served by this one loop and one policy.

A controller hands the engine a reconcile (`item -> Result | None`) and a queue; the engine runs
get -> reconcile -> done with the error policy KCM's controllers write by hand and
controller-runtime's `reconcileHandler` writes once (pkg/internal/controller/controller.go):

- success forgets the item's backoff;
- `Result(requeue_after=s)` (or raising `RequeueAfter(s)` from deep inside a sync) forgets the
  backoff and looks again after `s` seconds; a requeue "now" goes through the rate limiter, so a
  reconcile can never requeue itself in a busy loop;
- an error is requeued rate-limited up to `max_retries` (15) times, then logged and dropped until
  the next event (KCM's `handleErr`);
- a `TerminalError` is counted and logged but never retried (controller-runtime's
  `reconcile.TerminalError`): retrying cannot help;
- a 409 conflict is requeued like an error but counted apart (`result="conflict"`), not in the
  errors total: losing an optimistic-concurrency race is routine, and error alerts must not
  fire on it;
- only a real bug counts as a panic and is logged with its traceback; an API refusal, a dropped
  connection or a timeout is one log line.

Metrics keep controller-runtime's names (`controllers.metrics`), including its active and maximum
worker gauges. `controller` and `key` are bound
in structlog's contextvars for every log line a reconcile writes. After each item the worker
yields to the event loop, so a reconcile that never suspends (everything in the cache) cannot
keep health checks, informers or SIGTERM from running.

Queues: a rate-limiting queue (`run`; a plain or delaying one gets a rate limiter beside it for
its retries), each shard of a `ShardedQueue` (`run_shards`), and the `TimedWorkerQueue`, whose own
tasks call the engine (`timed_queue`). Shutting a queue down stops
its workers: items still queued are dropped, items in work finish.
"""

from __future__ import annotations

import abc
import asyncio
import enum
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import aiohttp
import anyio
import anyio.lowlevel
import structlog
from structlog.contextvars import bind_contextvars, reset_contextvars

from apiclient import ApiError
from controllers import metrics
from workqueue import (
    DelayingQueue,
    Queue,
    RateLimiter,
    RateLimitingQueue,
    ShardedQueue,
    ShutDown,
    TimedWorkerQueue,
    default_controller_rate_limiter,
)

log = structlog.get_logger()

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)

MAX_RETRIES = 15  # KCM's maxRetries: 5 ms doubling, the last retry ~82 s after the first failure


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile asks for next (controller-runtime's `reconcile.Result`).

    `requeue_after > 0`: look again after that many seconds, backoff reset. `requeue`: look again
    through the rate limiter (a requeue with no delay is never immediate). Neither: done.
    """

    requeue_after: float = 0.0
    requeue: bool = False


class Outcome(enum.Enum):
    """What the policy did with an item (for the caller's bookkeeping and for tests)."""

    DONE = "done"
    REQUEUED = "requeued"  # a later look was asked for
    RETRYING = "retrying"  # failed, requeued rate-limited
    DROPPED = "dropped"  # failed for the last time, or terminally


class RequeueAfter(Exception):  # a control-flow signal, not an error
    """Raise from a reconcile to look at the item again after `seconds` without counting a failure."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"requeue after {seconds:.3f}s")
        self.seconds = seconds


class TerminalError(Exception):
    """An error retrying cannot fix (an invalid object, say): counted and logged, never requeued."""


class Requeuer(Protocol[T_contra]):
    """The part of a rate-limiting queue the policy uses."""

    def forget(self, item: T_contra) -> None: ...
    def add_rate_limited(self, item: T_contra) -> None: ...
    def add_after(self, item: T_contra, seconds: float) -> None: ...
    def num_requeues(self, item: T_contra) -> int: ...


class WorkQueue(Requeuer[T], Protocol[T]):
    """A queue the engine's workers drain (`RateLimitingQueue`, or one shard of a `ShardedQueue`)."""

    async def get(self) -> T: ...
    def done(self, item: T) -> None: ...
    @property
    def shutting_down(self) -> bool: ...


Reconcile = Callable[[T], Awaitable[Result | None]]


def is_expected_failure(exc: BaseException) -> bool:
    """An API refusal, a dropped connection, a server restarting, a timeout: not a bug.

    A task group's exception group is expected when everything in it is (parallel writes that
    all met the same restarting server).
    """
    if isinstance(exc, BaseExceptionGroup):
        return all(is_expected_failure(inner) for inner in exc.exceptions)
    return isinstance(exc, ApiError | aiohttp.ClientError | OSError | TimeoutError | TerminalError)


def _is_conflict(exc: BaseException) -> bool:
    return isinstance(exc, ApiError) and exc.conflict


class Worker(Generic[T]):
    """One controller's reconcile with KCM's policy, servable on any of its queues."""

    def __init__(
        self,
        controller: str,
        reconcile: Reconcile[T],
        *,
        max_retries: int = MAX_RETRIES,
        describe: Callable[[T], str] = str,
        on_drop: Callable[[T], None] | None = None,
    ) -> None:
        self.controller = controller
        self.reconcile = reconcile
        self.max_retries = max_retries
        self.describe = describe
        self.on_drop = on_drop
        self._total = {
            result: metrics.RECONCILE_TOTAL.labels(controller, result)
            for result in ("success", "error", "requeue", "requeue_after", "conflict")
        }
        self._errors = metrics.RECONCILE_ERRORS.labels(controller)
        self._terminal = metrics.TERMINAL_RECONCILE_ERRORS.labels(controller)
        self._panics = metrics.RECONCILE_PANICS.labels(controller)
        self._time = metrics.RECONCILE_TIME.labels(controller)
        self._active = metrics.ACTIVE_WORKERS.labels(controller)
        self._max_concurrent = metrics.MAX_CONCURRENT_RECONCILES.labels(controller)

    # -- the loops -------------------------------------------------------------------------

    async def run(self, queue: WorkQueue[T] | Queue[T], workers: int = 1) -> None:
        """Serve `queue` with `workers` workers until it is shut down; in-flight items finish.

        A plain or delaying queue gets the controller rate limiter for its retries.
        """
        served: WorkQueue[T] = queue if isinstance(queue, RateLimitingQueue) else with_backoff(queue)
        count = max(1, workers)
        self._max_concurrent.inc(count)
        try:
            async with anyio.create_task_group() as tg:
                for _ in range(count):
                    tg.start_soon(self._serve, served)
        finally:
            self._max_concurrent.dec(count)

    async def run_shards(self, queue: ShardedQueue[T]) -> None:
        """One worker per shard, so all work for one shard key stays serialized."""
        self._max_concurrent.inc(queue.shards)
        try:
            async with anyio.create_task_group() as tg:
                for shard in range(queue.shards):
                    tg.start_soon(self._serve, queue.shard(shard))
        finally:
            self._max_concurrent.dec(queue.shards)

    def timed_queue(
        self, *, name: str = "", concurrency: int = 64, rate_limiter: RateLimiter | None = None
    ) -> TimedWorkerQueue[T]:
        """A `TimedWorkerQueue` whose fired work is reconciled under this policy.

        A retry re-schedules the key after the rate limiter's delay; a drop (retries exhausted,
        terminal error) releases the key so a later `add_work` schedules it again.
        """
        requeuer: _TimedRequeuer[T]

        async def handler(item: T) -> None:
            if await self.process(requeuer, item) is Outcome.DROPPED:
                queue.cancel_work(item)  # release the key: the next add_work schedules it afresh

        queue: TimedWorkerQueue[T] = TimedWorkerQueue(handler, name=name, concurrency=concurrency)
        requeuer = _TimedRequeuer(queue, rate_limiter or default_controller_rate_limiter())
        return queue

    async def _serve(self, queue: WorkQueue[T]) -> None:
        while True:
            try:
                item = await queue.get()
            except ShutDown:
                return
            try:
                if queue.shutting_down:
                    return  # stopping: what is still queued is dropped, as KCM's workers exit
                await self.process(queue, item)
            finally:
                queue.done(item)

    # -- one item --------------------------------------------------------------------------

    async def process(self, queue: Requeuer[T], item: T) -> Outcome:
        """Reconcile `item` once and apply the policy; always yields to the event loop once."""
        # bind/reset rather than `bound_contextvars`: the same effect at half the cost per item
        tokens = bind_contextvars(controller=self.controller, key=self.describe(item))
        self._active.inc()
        start = time.perf_counter()
        try:
            result = await self.reconcile(item)
        except RequeueAfter as req:
            outcome = self._requeue(queue, item, req.seconds)
        except Exception as exc:
            outcome = self._failed(queue, item, exc)
        else:
            if result is not None and (result.requeue_after > 0 or result.requeue):
                outcome = self._requeue(queue, item, result.requeue_after)
            else:
                queue.forget(item)
                self._total["success"].inc()
                outcome = Outcome.DONE
        finally:
            self._time.observe(time.perf_counter() - start)
            self._active.dec()
            reset_contextvars(**tokens)
        await anyio.lowlevel.checkpoint()
        return outcome

    def _requeue(self, queue: Requeuer[T], item: T, seconds: float) -> Outcome:
        if seconds > 0:
            queue.forget(item)
            queue.add_after(item, seconds)
            self._total["requeue_after"].inc()
        else:
            queue.add_rate_limited(item)
            self._total["requeue"].inc()
        return Outcome.REQUEUED

    def _failed(self, queue: Requeuer[T], item: T, exc: Exception) -> Outcome:
        fields: dict[str, Any] = {"error": str(exc) or type(exc).__name__, "error_type": type(exc).__name__}
        if isinstance(exc, TerminalError):
            self._errors.inc()
            self._terminal.inc()
            self._total["error"].inc()
            log.error("sync failed with a terminal error, not retrying", **fields)
            return self._drop(queue, item)
        conflict = _is_conflict(exc)
        bug = not is_expected_failure(exc)
        if conflict:
            self._total["conflict"].inc()
        else:
            self._errors.inc()
            self._total["error"].inc()
        if bug:
            self._panics.inc()
        retries = queue.num_requeues(item)
        fields["retries"] = retries
        if retries >= self.max_retries:
            log.error("dropping key out of the queue after too many retries", exc_info=bug, **fields)
            return self._drop(queue, item)
        if conflict:
            log.debug("conflict, requeueing", **fields)
        else:
            log.warning("sync failed, requeueing", exc_info=bug, **fields)
        queue.add_rate_limited(item)
        return Outcome.RETRYING

    def _drop(self, queue: Requeuer[T], item: T) -> Outcome:
        queue.forget(item)
        if self.on_drop is not None:
            self.on_drop(item)
        return Outcome.DROPPED


def with_backoff(queue: WorkQueue[T] | Queue[T], rate_limiter: RateLimiter | None = None) -> WorkQueue[T]:
    """`queue` as the engine serves it: a plain or delaying queue gains a rate limiter for its retries."""
    if isinstance(queue, Queue) and not isinstance(queue, RateLimitingQueue):
        return _Backoff(queue, rate_limiter or default_controller_rate_limiter())
    return queue


class _RateLimited(abc.ABC, Generic[T]):
    """The rate-limiting half every requeuer shares: backoff per item, requeue after it."""

    rate_limiter: RateLimiter

    def forget(self, item: T) -> None:
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.rate_limiter.num_requeues(item)

    def add_rate_limited(self, item: T) -> None:
        self.add_after(item, self.rate_limiter.when(item))

    @abc.abstractmethod
    def add_after(self, item: T, seconds: float) -> None: ...


class _Backoff(_RateLimited[T]):
    """A plain or delaying queue with a rate limiter beside it (client-go's rate-limiting layer)."""

    def __init__(self, queue: Queue[T], rate_limiter: RateLimiter) -> None:
        self.queue = queue
        self.rate_limiter = rate_limiter

    async def get(self) -> T:
        return await self.queue.get()

    def done(self, item: T) -> None:
        self.queue.done(item)

    @property
    def shutting_down(self) -> bool:
        return self.queue.shutting_down

    def add_after(self, item: T, seconds: float) -> None:
        if isinstance(self.queue, DelayingQueue):
            self.queue.add_after(item, seconds)
        elif seconds <= 0:
            self.queue.add(item)
        else:  # a timer handle, like the delaying queue's own: nothing to own or cancel
            asyncio.get_running_loop().call_later(seconds, self.queue.add, item)


class _TimedRequeuer(_RateLimited[T]):
    """The policy's requeues on a `TimedWorkerQueue`: a retry is new work for the key."""

    def __init__(self, queue: TimedWorkerQueue[T], rate_limiter: RateLimiter) -> None:
        self.queue = queue
        self.rate_limiter = rate_limiter

    def add_after(self, item: T, seconds: float) -> None:
        # Called from the key's own handler: replacing its work leaves the new schedule standing.
        self.queue.cancel_work(item)
        now = anyio.current_time()
        self.queue.add_work(item, created_at=now, fire_at=now + seconds)
