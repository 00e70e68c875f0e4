"""The worker loop every controller shares, as KCM's controllers write it by hand.

A controller declares its informers and handlers in `__init__`, handlers only enqueue keys,
and `sync(key)` reconciles from the listers' current state (never from the event). Errors are
handled as KCM does: success forgets the key's backoff; a failure is retried with the rate
limiter up to `max_retries` (15) times, then logged and dropped until the next event.
"""

from __future__ import annotations

import abc
import time
from typing import Any, ClassVar

import aiohttp
import anyio
import structlog

from apiclient import ApiError
from controllers import metrics
from controllers.context import ControllerContext
from workqueue import RateLimitingQueue, ShutDown

log = structlog.get_logger()


class RequeueAfter(Exception):  # a control-flow signal, not an error
    """Raise from `sync` to check the key again after `seconds` without counting a failure."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"requeue after {seconds:.3f}s")
        self.seconds = seconds


class Controller(abc.ABC):
    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    required_gates: ClassVar[tuple[str, ...]] = ()
    disabled_by_default: ClassVar[bool] = False
    default_workers: ClassVar[int] = 5
    max_retries: ClassVar[int] = 15
    _stopping: bool = False  # set by stop(): queued keys are dropped, in-flight syncs finish

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.client = ctx.client
        self.recorder = ctx.events.recorder(self.name)
        self.queue: RateLimitingQueue[str] = self.make_queue()
        self.log = log.bind(controller=self.name)
        self._last_sync_ok = time.monotonic()

    def make_queue(self) -> RateLimitingQueue[str]:
        return RateLimitingQueue(name=self.name)

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    @abc.abstractmethod
    async def sync(self, key: str) -> None:
        """Bring the object named by `key` to its desired state; raise to retry."""

    def healthy(self) -> bool:
        """For `/healthz/<controller>`: the workers are alive (the loop is not wedged)."""
        return not self.queue.shutting_down

    async def wait_for_caches(self) -> None:
        synced = await self.ctx.informers.wait_for_cache_sync()
        if not synced:
            raise RuntimeError(f"{self.name}: caches did not sync")

    def stop(self) -> None:
        """Stop taking work (the manager's SIGTERM path): shut the queue down, drop queued keys.

        Syncs already running finish; `run` returns once every worker is idle. Controllers
        with extra queues of their own extend this.
        """
        self._stopping = True
        self.queue.shutdown()

    async def run(self, workers: int | None = None) -> None:
        """Wait for the informers, then run `workers` workers until cancelled."""
        count = workers if workers is not None else self.ctx.options.workers(self.name, self.default_workers)
        await self.wait_for_caches()
        self.log.info("starting workers", workers=count)
        try:
            async with anyio.create_task_group() as tg:
                for _ in range(max(1, count)):
                    tg.start_soon(self._worker)
        finally:
            self.queue.shutdown()

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            if self._stopping:
                self.queue.done(key)
                return
            try:
                await self.process(key)
            finally:
                self.queue.done(key)

    async def process(self, key: str) -> None:
        """One reconcile with KCM's error handling; `structlog` gets `controller` and `key` bound."""
        start = time.perf_counter()
        with structlog.contextvars.bound_contextvars(controller=self.name, key=key):
            try:
                await self.sync(key)
            except RequeueAfter as req:
                self.queue.forget(key)
                self.queue.add_after(key, req.seconds)
                metrics.RECONCILE_TOTAL.labels(self.name, "requeue_after").inc()
            except Exception as exc:
                self.handle_error(key, exc)
            else:
                self.queue.forget(key)
                metrics.RECONCILE_TOTAL.labels(self.name, "success").inc()
            finally:
                metrics.RECONCILE_TIME.labels(self.name).observe(time.perf_counter() - start)

    def handle_error(self, key: str, exc: BaseException) -> None:
        metrics.RECONCILE_ERRORS.labels(self.name).inc()
        metrics.RECONCILE_TOTAL.labels(self.name, "error").inc()
        # An API refusal or a transport failure (a dropped connection, a server restarting, a
        # timeout) is an ordinary error: one line, no traceback. Anything else is a bug.
        bug = not isinstance(exc, ApiError | aiohttp.ClientError | OSError | TimeoutError)
        if bug:
            metrics.RECONCILE_PANICS.labels(self.name).inc()
        retries = self.queue.num_requeues(key)
        fields: dict[str, Any] = {"retries": retries, "error": str(exc) or type(exc).__name__,
                                  "error_type": type(exc).__name__}
        if retries < self.max_retries:
            if isinstance(exc, ApiError) and exc.conflict:
                self.log.debug("conflict, requeueing", **fields)
            else:
                self.log.warning("sync failed, requeueing", exc_info=bug, **fields)
            self.queue.add_rate_limited(key)
        else:
            self.log.error("dropping key out of the queue after too many retries", **fields)
            self.queue.forget(key)
