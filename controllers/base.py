"""What every controller shares: its queue, its worker engine, its lifecycle under the manager.

A controller declares its informers and handlers in `__init__`, handlers only enqueue keys,
and `sync(key)` reconciles from the listers' current state (never from the event). The engine
(`controllers.worker`) serves the controller's queue, and any other queue it has, with KCM's
policy; `run` waits for the caches, starts the workers and any periodic loops, and returns once
`stop()` has shut the queues and in-flight syncs have finished.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, ClassVar, TypeVar

import anyio
import structlog
from anyio.abc import TaskGroup

from controllers.context import ControllerContext
from controllers.worker import (
    MAX_RETRIES,
    Outcome,
    Reconcile,
    RequeueAfter,
    Result,
    TerminalError,
    Worker,
    is_expected_failure,
)
from workqueue import RateLimitingQueue, ShardedQueue

__all__ = ["Controller", "RequeueAfter", "Result", "TerminalError"]

log = structlog.get_logger()

T = TypeVar("T", bound=Hashable)


class Controller(abc.ABC):
    """A controller under the manager.

    Its name and worker count are given by whoever builds it (the manager, from the controller's
    row in `controller_manager.registry`): the row is their only source, so a class cannot drift
    from the `--controllers` and `--concurrent-*-syncs` flags. The name labels the logs, events,
    default queue and the worker metrics.
    """

    max_retries: ClassVar[int] = MAX_RETRIES

    def __init__(self, ctx: ControllerContext, *, name: str, workers: int) -> None:
        self.name = name
        self.workers = max(1, workers)
        self.ctx = ctx
        self.client = ctx.client
        self.recorder = ctx.events.recorder(self.name)
        self.queue: RateLimitingQueue[str] = self.make_queue()
        self.worker: Worker[str] = self.make_worker(self.sync)
        self.log = log.bind(controller=self.name)
        self._also_served: list[tuple[RateLimitingQueue[Any] | ShardedQueue[Any], Worker[Any]]] = []

    def make_queue(self) -> RateLimitingQueue[str]:
        return RateLimitingQueue(name=self.name)

    def make_worker(
        self,
        reconcile: Reconcile[T],
        *,
        describe: Callable[[T], str] = str,
        on_drop: Callable[[T], None] | None = None,
    ) -> Worker[T]:
        """The engine for one of this controller's queues, under the controller's name and retries."""
        return Worker(self.name, reconcile, max_retries=self.max_retries, describe=describe, on_drop=on_drop)

    def serve_also(self, queue: RateLimitingQueue[T] | ShardedQueue[T], worker: Worker[T]) -> None:
        """Another queue of this controller's, with the worker that serves it: its workers start
        after the controller's own (one worker, or one per shard), `stop()` shuts it down after
        the controller's queue, and `healthy()` counts it."""
        self._also_served.append((queue, worker))

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    @abc.abstractmethod
    async def sync(self, key: str) -> Result | None:
        """Bring the object named by `key` to its desired state; raise to retry."""

    async def process(self, key: str) -> Outcome:
        """One reconcile of `key` under the engine's policy (what a worker does with an item)."""
        return await self.worker.process(self.queue, key)

    def healthy(self) -> bool:
        """For `/healthz/<controller>`: the workers are alive (the loop is not wedged)."""
        return not self.queue.shutting_down and not any(q.shutting_down for q, _ in self._also_served)

    async def wait_for_caches(self) -> None:
        synced = await self.ctx.informers.wait_for_cache_sync()
        if not synced:
            raise RuntimeError(f"{self.name}: caches did not sync")

    async def prepare(self) -> None:
        """Once, after the caches synced and before the workers start (e.g. ensure a namespace)."""
        return None

    def start_workers(self, tg: TaskGroup, workers: int) -> None:
        """Serve every queue of the controller; each task returns once `stop()` shut its queue."""
        tg.start_soon(self.worker.run, self.queue, workers)
        for queue, worker in self._also_served:
            if isinstance(queue, ShardedQueue):
                tg.start_soon(worker.run_shards, queue)
            else:
                tg.start_soon(worker.run, queue)

    def start_loops(self, tg: TaskGroup) -> None:
        """Start periodic loops (they run until cancelled, once the workers have returned)."""
        return None

    def stop(self) -> None:
        """Stop taking work (the manager's SIGTERM path): shut the queues down, drop queued keys.

        Syncs already running finish; `run` returns once every worker is idle.
        """
        self.queue.shutdown()
        for queue, _ in self._also_served:
            queue.shutdown()

    async def run(self) -> None:
        """Wait for the informers, then serve the queues until `stop()` (or cancellation)."""
        await self.wait_for_caches()
        await self.prepare()
        self.log.info("starting workers", workers=self.workers)
        try:
            async with anyio.create_task_group() as loops:
                self.start_loops(loops)
                async with anyio.create_task_group() as tg:
                    self.start_workers(tg, self.workers)
                loops.cancel_scope.cancel()  # the workers are done: the loops end with them
        finally:
            self.stop()

    async def every(self, period: float, step: Callable[[], Awaitable[None]], *, what: str) -> None:
        """Run `step` every `period` seconds until cancelled (client-go's `wait.Until`).

        A failing step is logged and the loop goes on: one line for an API or transport error,
        a traceback only for a bug.
        """
        with structlog.contextvars.bound_contextvars(controller=self.name):
            while True:
                try:
                    await step()
                except Exception as exc:
                    log.warning(
                        f"{what} failed",
                        error=str(exc) or type(exc).__name__,
                        error_type=type(exc).__name__,
                        exc_info=not is_expected_failure(exc),
                    )
                await anyio.sleep(period)
