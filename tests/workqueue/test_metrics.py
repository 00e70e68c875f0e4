"""Metrics: client-go's names and semantics, no-op for unnamed queues, a replaceable provider."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, generate_latest

from workqueue import DelayingQueue, Queue, metrics
from workqueue.metrics import queue_metrics

pytestmark = pytest.mark.looptime


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def sample(metric: str, name: str) -> float | None:
    return REGISTRY.get_sample_value(metric, {"name": name})


async def test_named_queue_records_adds_depth_latency_and_work_time() -> None:
    clock = FakeClock()
    q: Queue[str] = Queue(name="wq-test-a", metrics=queue_metrics("wq-test-a", clock=clock))
    q.add("a")
    q.add("a")  # deduplicated: not an add
    q.add("b")
    assert sample("workqueue_adds_total", "wq-test-a") == 2
    assert sample("workqueue_depth", "wq-test-a") == 2
    clock.now += 0.5
    item = await q.get()
    assert sample("workqueue_depth", "wq-test-a") == 1
    assert sample("workqueue_queue_duration_seconds_count", "wq-test-a") == 1
    assert sample("workqueue_queue_duration_seconds_sum", "wq-test-a") == pytest.approx(0.5)
    clock.now += 2
    q.done(item)
    assert sample("workqueue_work_duration_seconds_count", "wq-test-a") == 1
    assert sample("workqueue_work_duration_seconds_sum", "wq-test-a") == pytest.approx(2)


async def test_retries_count_every_add_after() -> None:
    q: DelayingQueue[str] = DelayingQueue(name="wq-test-b")
    q.add_after("a", 1)
    q.add_after("a", 0)
    assert sample("workqueue_retries_total", "wq-test-b") == 2
    q.shutdown()


async def test_unfinished_work_is_refreshed_on_scrape() -> None:
    clock = FakeClock()
    q: Queue[str] = Queue(name="wq-test-c", metrics=queue_metrics("wq-test-c", clock=clock))
    q.add("a")
    q.add("b")
    await q.get()
    clock.now += 3
    await q.get()
    clock.now += 4
    text = generate_latest(REGISTRY).decode()
    assert 'workqueue_unfinished_work_seconds{name="wq-test-c"} 11.0' in text
    assert 'workqueue_longest_running_processor_seconds{name="wq-test-c"} 7.0' in text


async def test_unnamed_queue_records_nothing() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    await q.get()
    assert sample("workqueue_adds_total", "") is None
    assert sample("workqueue_depth", "") is None


async def test_exposition_names_help_and_buckets_match_client_go() -> None:
    q: Queue[str] = Queue(name="wq-test-d")
    q.add("a")
    q.done(await q.get())
    text = generate_latest(REGISTRY).decode()
    for line in [
        "# HELP workqueue_depth Current depth of workqueue",
        "# TYPE workqueue_adds_total counter",
        "# HELP workqueue_adds_total Total number of adds handled by workqueue",
        "# HELP workqueue_queue_duration_seconds How long in seconds an item stays in workqueue before being requested.",
        "# HELP workqueue_work_duration_seconds How long in seconds processing an item from workqueue takes.",
        "# TYPE workqueue_unfinished_work_seconds gauge",
        "# HELP workqueue_longest_running_processor_seconds How many seconds has the longest running processor for workqueue been running.",
        "# HELP workqueue_retries_total Total number of retries handled by workqueue",
    ]:
        assert line in text
    bounds = ["1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1", "1.0", "10.0", "100.0", "1000.0", "+Inf"]
    for family in ("workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"):
        for le in bounds:
            assert f'{family}_bucket{{le="{le}",name="wq-test-d"}}' in text


class Recorder:
    """A provider that logs each metric event as (metric, queue name, value)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, float]] = []

    def _metric(self, kind: str, name: str) -> _Recorded:
        return _Recorded(self.events, kind, name)

    def new_depth_metric(self, name: str) -> _Recorded:
        return self._metric("depth", name)

    def new_adds_metric(self, name: str) -> _Recorded:
        return self._metric("adds", name)

    def new_latency_metric(self, name: str) -> _Recorded:
        return self._metric("latency", name)

    def new_work_duration_metric(self, name: str) -> _Recorded:
        return self._metric("work", name)

    def new_unfinished_work_seconds_metric(self, name: str) -> _Recorded:
        return self._metric("unfinished", name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> _Recorded:
        return self._metric("longest", name)

    def new_retries_metric(self, name: str) -> _Recorded:
        return self._metric("retries", name)


class _Recorded:
    def __init__(self, events: list[tuple[str, str, float]], kind: str, name: str) -> None:
        self.events, self.kind, self.name = events, kind, name

    def inc(self) -> None:
        self.events.append((self.kind, self.name, 1))

    def dec(self) -> None:
        self.events.append((self.kind, self.name, -1))

    def set(self, value: float) -> None:
        self.events.append((self.kind, self.name, value))

    def observe(self, value: float) -> None:
        self.events.append((self.kind, self.name, value))


async def test_provider_seam_receives_named_queue_metrics_only() -> None:
    rec = Recorder()
    metrics.set_provider(rec)
    try:
        named: Queue[str] = Queue(name="custom")
        unnamed: Queue[str] = Queue()
        for q in (named, unnamed):
            q.add("x")
            q.done(await q.get())
    finally:
        metrics.set_provider(metrics.PrometheusProvider())
    assert [(kind, name) for kind, name, _ in rec.events] == [
        ("adds", "custom"),
        ("depth", "custom"),
        ("depth", "custom"),
        ("latency", "custom"),
        ("work", "custom"),
    ]
