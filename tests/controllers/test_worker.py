"""The worker engine on every kind of queue: KCM's retry policy, controller-runtime's metrics, a fair loop.

All on a virtual clock (looptime): fifteen retries with client-go's backoff take ~164 s of loop
time and no real time. Each test uses its own controller name, so the process-wide counters are
read as deltas of that name only.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from typing import Any, cast

import aiohttp
import anyio
import anyio.lowlevel
import orjson
import pytest
import structlog

from apiclient import ApiError, KubeClient
from controller_manager import logging as manager_logging
from controllers import metrics
from controllers.base import Controller
from controllers.context import ControllerContext
from controllers.worker import (
    MAX_RETRIES,
    Outcome,
    RequeueAfter,
    Result,
    TerminalError,
    Worker,
    is_expected_failure,
    with_backoff,
)
from informers import SharedInformerFactory
from tests.manager.logcapture import CapturedStream, restore_logging  # noqa: F401 - autouse fixture
from workqueue import DelayingQueue, ItemExponentialFailureRateLimiter, Queue, RateLimitingQueue, ShardedQueue

pytestmark = pytest.mark.looptime

_names = itertools.count()


def _name() -> str:
    return f"engine-test-{next(_names)}"


def _count(counter: Any, *labels: str) -> float:
    return float(counter.labels(*labels)._value.get())


class Calls:
    """A reconcile that records (item, loop time) and does what `behaviour` says for each call."""

    def __init__(self, behaviour: Callable[[str, int], Result | BaseException | None]) -> None:
        self.behaviour = behaviour
        self.calls: list[tuple[str, float]] = []

    def times(self, item: str) -> list[float]:
        return [t for i, t in self.calls if i == item]

    async def __call__(self, item: str) -> Result | None:
        self.calls.append((item, anyio.current_time()))
        outcome = self.behaviour(item, len(self.times(item)))
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


@asynccontextmanager
async def serving(
    run: Callable[[], Coroutine[Any, Any, None]], stop: Callable[[], None]
) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        yield
        stop()


def _server_error() -> ApiError:
    return ApiError(500, {"reason": "InternalError", "message": "etcd is sad"})


# -- the policy on a rate-limiting queue -------------------------------------------------------


QUEUE_KINDS: dict[str, Callable[[], Queue[str]]] = {
    "plain": Queue,
    "delaying": DelayingQueue,
    "rate-limiting": RateLimitingQueue,
}


@pytest.mark.parametrize("kind", QUEUE_KINDS)
async def test_success_forgets_the_backoff_and_counts_success(kind: str) -> None:
    name = _name()
    calls = Calls(lambda _item, n: _server_error() if n <= 2 else None)
    worker: Worker[str] = Worker(name, calls)
    queue = with_backoff(QUEUE_KINDS[kind]())
    async with serving(lambda: worker.run(queue), queue_of(queue).shutdown):
        queue_of(queue).add("a")
        await anyio.sleep(1)
    start = calls.times("a")[0]
    assert [round(t - start, 6) for t in calls.times("a")] == [0, 0.005, 0.015]  # 5 ms, then 10 ms
    assert queue.num_requeues("a") == 0  # the success forgot the two failures
    assert _count(metrics.RECONCILE_TOTAL, name, "success") == 1
    assert _count(metrics.RECONCILE_TOTAL, name, "error") == 2
    assert _count(metrics.RECONCILE_ERRORS, name) == 2


@pytest.mark.parametrize("kind", QUEUE_KINDS)
async def test_an_error_is_retried_fifteen_times_then_dropped_until_the_next_add(kind: str) -> None:
    name = _name()
    calls = Calls(lambda _item, _n: _server_error())
    worker: Worker[str] = Worker(name, calls)
    queue = with_backoff(QUEUE_KINDS[kind]())
    plain = queue_of(queue)
    async with serving(lambda: worker.run(queue), plain.shutdown):
        plain.add("a")
        await anyio.sleep(600)  # far beyond the last retry (~164 s)
        assert len(calls.times("a")) == 1 + MAX_RETRIES == 16
        assert queue.num_requeues("a") == 0  # dropped: its backoff forgotten
        assert len(plain) == 0
        plain.add("a")  # the next event starts afresh
        await anyio.sleep(0.001)
        assert len(calls.times("a")) == 17
    times = calls.times("a")
    gaps = [round(b - a, 6) for a, b in itertools.pairwise(times[:16])]
    assert gaps == [round(0.005 * 2**i, 6) for i in range(15)]  # client-go's per-item backoff
    assert _count(metrics.RECONCILE_ERRORS, name) == 17
    assert _count(metrics.RECONCILE_PANICS, name) == 0


async def test_a_plain_queue_is_served_directly_with_the_controller_backoff() -> None:
    calls = Calls(lambda _item, n: _server_error() if n == 1 else None)
    worker: Worker[str] = Worker(_name(), calls)
    queue: Queue[str] = Queue()
    async with serving(lambda: worker.run(queue), queue.shutdown):
        queue.add("a")
        await anyio.sleep(1)
    first, second = calls.times("a")
    assert round(second - first, 6) == 0.005


def queue_of(queue: object) -> Queue[str]:
    """The queue itself behind what `with_backoff` returned (to add items and shut it down)."""
    inner = getattr(queue, "queue", queue)
    assert isinstance(inner, Queue)
    return inner


async def test_requeue_after_looks_again_later_without_counting_a_failure() -> None:
    name = _name()

    def behaviour(item: str, n: int) -> Result | BaseException | None:
        if n > 1:
            return None
        return Result(requeue_after=30) if item == "result" else RequeueAfter(30)

    calls = Calls(behaviour)
    worker: Worker[str] = Worker(name, calls)
    queue: RateLimitingQueue[str] = RateLimitingQueue()
    async with serving(lambda: worker.run(queue), queue.shutdown):
        queue.add("result")
        queue.add("raised")
        await anyio.sleep(60)
    for item in ("result", "raised"):
        first, second = calls.times(item)
        assert round(second - first, 6) == 30
    assert _count(metrics.RECONCILE_TOTAL, name, "requeue_after") == 2
    assert _count(metrics.RECONCILE_TOTAL, name, "success") == 2
    assert _count(metrics.RECONCILE_ERRORS, name) == 0


async def test_a_requeue_now_goes_through_the_rate_limiter_never_a_busy_loop() -> None:
    name = _name()
    calls = Calls(lambda item, _n: Result(requeue=True) if item == "now" else RequeueAfter(0))
    worker: Worker[str] = Worker(name, calls)
    queue: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(1.0, 1000.0))
    async with serving(lambda: worker.run(queue), queue.shutdown):
        queue.add("now")
        queue.add("zero")
        await anyio.sleep(10)
    for item in ("now", "zero"):
        start = calls.times(item)[0]
        assert [round(t - start, 6) for t in calls.times(item)] == [0, 1, 3, 7]  # 1 s doubling
    assert _count(metrics.RECONCILE_TOTAL, name, "requeue") == 8


async def test_a_terminal_error_is_counted_and_never_retried() -> None:
    name = _name()
    calls = Calls(lambda _item, _n: TerminalError("spec.selector is invalid"))
    worker: Worker[str] = Worker(name, calls)
    queue: RateLimitingQueue[str] = RateLimitingQueue()
    async with serving(lambda: worker.run(queue), queue.shutdown):
        queue.add("a")
        await anyio.sleep(60)
    assert len(calls.calls) == 1
    assert _count(metrics.TERMINAL_RECONCILE_ERRORS, name) == 1
    assert _count(metrics.RECONCILE_ERRORS, name) == 1
    assert _count(metrics.RECONCILE_TOTAL, name, "error") == 1
    assert _count(metrics.RECONCILE_PANICS, name) == 0


async def test_a_conflict_is_requeued_but_not_counted_as_an_error() -> None:
    name = _name()
    conflict = ApiError(409, {"reason": "Conflict", "message": "the object has been modified"})
    calls = Calls(lambda _item, n: conflict if n == 1 else None)
    worker: Worker[str] = Worker(name, calls)
    queue: RateLimitingQueue[str] = RateLimitingQueue()
    async with serving(lambda: worker.run(queue), queue.shutdown):
        queue.add("a")
        await anyio.sleep(1)
    assert len(calls.times("a")) == 2
    assert _count(metrics.RECONCILE_TOTAL, name, "conflict") == 1
    assert _count(metrics.RECONCILE_TOTAL, name, "success") == 1
    assert _count(metrics.RECONCILE_TOTAL, name, "error") == 0
    assert _count(metrics.RECONCILE_ERRORS, name) == 0


# -- logs: bound context, one line for an expected failure, a traceback only for a bug ---------------


@pytest.fixture
def json_logs() -> Iterator[Callable[[], list[dict[str, Any]]]]:
    stream = CapturedStream()
    manager_logging.configure(log_format="json", verbosity=10, stream=stream)

    def lines() -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in stream.everything().splitlines() if line.strip()]

    yield lines


async def test_a_bug_is_a_panic_with_one_traceback_a_transport_error_one_plain_line(
    json_logs: Callable[[], list[dict[str, Any]]],
) -> None:
    name = _name()

    async def reconcile(item: str) -> None:
        structlog.get_logger().info("reconciling")
        if item == "bug":
            raise KeyError("metadata")
        raise aiohttp.ClientConnectionError("Connection reset by peer")

    worker: Worker[str] = Worker(name, reconcile)
    queue: RateLimitingQueue[str] = RateLimitingQueue()
    assert await worker.process(queue, "bug") is Outcome.RETRYING
    assert await worker.process(queue, "transport") is Outcome.RETRYING
    assert _count(metrics.RECONCILE_PANICS, name) == 1
    assert _count(metrics.RECONCILE_ERRORS, name) == 2
    lines = json_logs()
    assert all(line.get("controller") == name for line in lines)  # bound in every line, ours and the sync's
    by_key = {key: [line for line in lines if line.get("key") == key] for key in ("bug", "transport")}
    assert [line["event"] for line in by_key["bug"]] == ["reconciling", "sync failed, requeueing"]
    assert [line["event"] for line in by_key["transport"]] == ["reconciling", "sync failed, requeueing"]
    assert "exception" in by_key["bug"][1]  # the traceback of the bug
    assert "exception" not in by_key["transport"][1]  # a dropped connection: one line
    assert by_key["transport"][1]["error_type"] == "ClientConnectionError"


async def test_a_periodic_loop_goes_on_after_failures_with_a_traceback_only_for_a_bug(
    json_logs: Callable[[], list[dict[str, Any]]],
) -> None:
    class Periodic(Controller):
        async def sync(self, key: str) -> None:
            return None

    client = cast(KubeClient, None)
    controller = Periodic(
        ControllerContext(client=client, informers=SharedInformerFactory(client)),
        name="engine-periodic",
        workers=1,
    )
    failures: list[Exception] = [aiohttp.ClientConnectionError("Connection refused"), KeyError("status")]
    steps: list[float] = []

    async def step() -> None:
        steps.append(anyio.current_time())
        if failures:
            raise failures.pop(0)

    async with anyio.create_task_group() as tg:
        start = anyio.current_time()
        tg.start_soon(functools.partial(controller.every, 5.0, step, what="probing"))
        await anyio.sleep(12)
        tg.cancel_scope.cancel()
    assert [round(t - start, 6) for t in steps] == [0, 5, 10]  # the loop went on after both failures
    failed = [line for line in json_logs() if line["event"] == "probing failed"]
    assert [line["error_type"] for line in failed] == ["ClientConnectionError", "KeyError"]
    assert all(line["controller"] == "engine-periodic" for line in failed)
    assert ["exception" in line for line in failed] == [False, True]


def test_what_counts_as_a_bug() -> None:
    expected = [
        ApiError(503),
        aiohttp.ServerDisconnectedError(),
        ConnectionResetError(),
        TimeoutError(),
        ExceptionGroup("writes", [ApiError(500), aiohttp.ClientConnectionError()]),
    ]
    bugs = [
        KeyError("spec"),
        TypeError("NoneType"),
        ExceptionGroup("writes", [ApiError(500), ValueError("x")]),
    ]
    assert all(is_expected_failure(exc) for exc in expected)
    assert not any(is_expected_failure(exc) for exc in bugs)


# -- a fair loop: a reconcile that never suspends still lets everything else run -------------


async def test_a_sync_that_never_awaits_yields_to_the_loop_after_every_item() -> None:
    ticks = 0
    seen: list[int] = []

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    all_done = anyio.Event()

    async def reconcile(item: str) -> None:
        seen.append(ticks)  # no await: everything from the cache
        if len(seen) == 200:
            all_done.set()

    worker: Worker[str] = Worker(_name(), reconcile)
    queue: RateLimitingQueue[str] = RateLimitingQueue()
    for i in range(200):
        queue.add(f"k{i}")
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)  # always ready: the virtual clock stands still, so wait on events only
        async with serving(lambda: worker.run(queue), queue.shutdown):
            await all_done.wait()
        tg.cancel_scope.cancel()
    assert len(seen) == 200
    assert all(b > a for a, b in itertools.pairwise(seen))  # the other task ran between every two items


# -- each kind of queue ----------------------------------------------------------------------


async def test_each_shard_of_a_sharded_queue_gets_its_worker_and_the_policy() -> None:
    name = _name()
    calls = Calls(lambda item, n: _server_error() if item == "node-3" and n == 1 else None)
    worker: Worker[str] = Worker(name, calls)
    queue: ShardedQueue[str] = ShardedQueue(4, shard_key=lambda node: node)
    nodes = [f"node-{i}" for i in range(12)]
    assert len({queue.shard_for(n) for n in nodes}) == 4
    async with serving(lambda: worker.run_shards(queue), queue.shutdown):
        for node in nodes:
            queue.add(node)
        await anyio.sleep(1)
    assert sorted({item for item, _ in calls.calls}) == sorted(nodes)
    assert len(calls.times("node-3")) == 2  # retried on its own shard
    assert queue.num_requeues("node-3") == 0
    assert _count(metrics.RECONCILE_TOTAL, name, "success") == 12


async def test_one_slow_shard_does_not_hold_the_others() -> None:
    calls: list[str] = []
    release = anyio.Event()

    async def reconcile(node: str) -> None:
        if node == "slow":
            await release.wait()
        calls.append(node)

    name = _name()
    worker: Worker[str] = Worker(name, reconcile)
    queue: ShardedQueue[str] = ShardedQueue(2, shard_key=lambda node: node)
    other = next(n for n in (f"n{i}" for i in range(20)) if queue.shard_for(n) != queue.shard_for("slow"))
    async with serving(lambda: worker.run_shards(queue), queue.shutdown):
        queue.add("slow")
        queue.add(other)
        await anyio.sleep(1)
        assert calls == [other]
        assert _count(metrics.ACTIVE_WORKERS, name) == 1  # the slow one
        assert _count(metrics.MAX_CONCURRENT_RECONCILES, name) == 2  # a worker per shard
        release.set()
        await anyio.sleep(1)
    assert calls == [other, "slow"]
    assert _count(metrics.ACTIVE_WORKERS, name) == 0
    assert _count(metrics.MAX_CONCURRENT_RECONCILES, name) == 0


async def test_the_timed_queue_retries_failed_work_with_backoff_then_releases_the_key() -> None:
    name = _name()
    dropped: list[str] = []
    calls = Calls(lambda item, n: _server_error() if item == "always" or n <= 2 else None)
    worker: Worker[str] = Worker(name, calls, on_drop=dropped.append)
    queue = worker.timed_queue(name="")
    async with serving(queue.run, queue.shutdown):
        now = anyio.current_time()
        queue.add_work("twice", created_at=now, fire_at=now + 10)
        queue.add_work("always", created_at=now, fire_at=now + 10)
        await anyio.sleep(600)
        assert [round(t - now, 6) for t in calls.times("twice")] == [10, 10.005, 10.015]
        assert queue.get_work("twice") is None and len(queue) == 0  # done: the key stays, as Go's
        now = anyio.current_time()
        queue.add_work("twice", created_at=now, fire_at=now + 1)
        assert len(queue) == 0  # a duplicate of work that succeeded is ignored
        assert len(calls.times("always")) == 16
        assert dropped == ["always"]
        queue.add_work("always", created_at=now, fire_at=now + 1)  # released: schedulable again
        assert len(queue) == 1
        await anyio.sleep(2)
        assert round(calls.times("always")[16] - now, 6) == 1  # and it ran, backoff starting afresh
    assert _count(metrics.RECONCILE_TOTAL, name, "success") == 1


# -- shutdown --------------------------------------------------------------------------------


async def test_shutdown_lets_the_item_in_work_finish_and_drops_the_queued_ones() -> None:
    started = anyio.Event()
    finished: list[str] = []

    async def reconcile(item: str) -> None:
        started.set()
        await anyio.sleep(5)
        finished.append(item)

    worker: Worker[str] = Worker(_name(), reconcile)
    queue: RateLimitingQueue[str] = RateLimitingQueue()
    for item in ("a", "b", "c"):
        queue.add(item)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, queue)
            await started.wait()
            queue.shutdown()
    assert finished == ["a"]  # run returned after "a" finished; "b" and "c" were dropped


async def test_the_timed_queue_shutdown_lets_running_work_finish() -> None:
    finished: list[str] = []

    async def reconcile(item: str) -> None:
        await anyio.sleep(5)
        finished.append(item)

    worker: Worker[str] = Worker(_name(), reconcile)
    queue = worker.timed_queue()
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(queue.run)
            now = anyio.current_time()
            queue.add_work("running", created_at=now, fire_at=now)
            queue.add_work("later", created_at=now, fire_at=now + 30)
            await anyio.sleep(1)
            queue.shutdown()
    assert finished == ["running"]
    assert anyio.current_time() - now == pytest.approx(5)
