"""Workqueue metrics: client-go's names byte for byte, behind a provider seam.

client-go's queues never talk to Prometheus directly: a queue asks the process-wide
`MetricsProvider` for seven metrics labelled with its `name`, and a queue without a name gets
no metrics at all (`queue_metrics("")` returns None, so the hot path pays one `is None` check).
The default provider is Prometheus, as KCM wires it by importing component-base's workqueue
package; the metric families are created and registered exactly once, here, at import, so two
queues with the same name (or a reloaded controller) never hit prometheus' duplicate
registration error.

`workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds` are
refreshed by a goroutine every 500 ms in client-go. We keep no background task: a small
collector registered just before those families refreshes every live queue's figures when the
registry is scraped (prometheus' registry collects in registration order). As in client-go, a
queue that is shutting down is refreshed no more.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Hashable, Iterable
from typing import Protocol

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector


class GaugeMetric(Protocol):
    def inc(self) -> None: ...
    def dec(self) -> None: ...


class SettableGaugeMetric(Protocol):
    def set(self, value: float) -> None: ...


class CounterMetric(Protocol):
    def inc(self) -> None: ...


class HistogramMetric(Protocol):
    def observe(self, value: float) -> None: ...


class MetricsProvider(Protocol):
    """client-go's `workqueue.MetricsProvider`: one factory method per metric, keyed by queue name."""

    def new_depth_metric(self, name: str) -> GaugeMetric: ...
    def new_adds_metric(self, name: str) -> CounterMetric: ...
    def new_latency_metric(self, name: str) -> HistogramMetric: ...
    def new_work_duration_metric(self, name: str) -> HistogramMetric: ...
    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric: ...
    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric: ...
    def new_retries_metric(self, name: str) -> CounterMetric: ...


class QueueMetrics:
    """What one named queue records (client-go's `defaultQueueMetrics`).

    `add` stamps the first time an item is queued, `get` observes how long it waited and stamps
    the start of work, `done` observes the work time. The sharded queue shares one instance
    between its shards, which is sound because an item lives in exactly one shard.
    """

    __slots__ = (
        "__weakref__",
        "_add_times",
        "_adds",
        "_clock",
        "_depth",
        "_latency",
        "_longest",
        "_processing_start",
        "_retries",
        "_unfinished",
        "_work_duration",
        "name",
    )

    def __init__(self, name: str, provider: MetricsProvider, clock: Callable[[], float]) -> None:
        self.name = name
        self._clock = clock
        self._depth = provider.new_depth_metric(name)
        self._adds = provider.new_adds_metric(name)
        self._latency = provider.new_latency_metric(name)
        self._work_duration = provider.new_work_duration_metric(name)
        self._unfinished = provider.new_unfinished_work_seconds_metric(name)
        self._longest = provider.new_longest_running_processor_seconds_metric(name)
        self._retries = provider.new_retries_metric(name)
        self._add_times: dict[Hashable, float] = {}
        self._processing_start: dict[Hashable, float] = {}

    def add(self, item: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        if item not in self._add_times:
            self._add_times[item] = self._clock()

    def get(self, item: Hashable) -> None:
        self._depth.dec()
        now = self._clock()
        self._processing_start[item] = now
        started = self._add_times.pop(item, None)
        if started is not None:
            self._latency.observe(now - started)

    def done(self, item: Hashable) -> None:
        started = self._processing_start.pop(item, None)
        if started is not None:
            self._work_duration.observe(self._clock() - started)

    def retry(self) -> None:
        self._retries.inc()

    def stop(self) -> None:
        """The queue is shutting down: its in-progress gauges are no longer refreshed (client-go
        stops its refresh loop at `ShutDown`)."""
        _live.discard(self)

    def update_unfinished_work(self) -> None:
        now = self._clock()
        total = 0.0
        oldest = 0.0
        for started in self._processing_start.values():
            age = now - started
            total += age
            oldest = max(oldest, age)
        self._unfinished.set(total)
        self._longest.set(oldest)


_BUCKETS = tuple(10.0 ** (i - 6) for i in range(10))  # client-go: ExponentialBuckets(10e-7, 10, 10)

_live: weakref.WeakSet[QueueMetrics] = weakref.WeakSet()


def update_unfinished_work() -> None:
    """Refresh the two in-progress gauges of every live named queue (client-go does it every 500 ms)."""
    for m in list(_live):
        m.update_unfinished_work()


class _UnfinishedWorkRefresher(Collector):
    """Yields nothing; collecting it refreshes the gauges that the registry collects next."""

    def collect(self) -> Iterable[Metric]:
        update_unfinished_work()
        return []


REGISTRY.register(_UnfinishedWorkRefresher())

_depth = Gauge("workqueue_depth", "Current depth of workqueue", ["name"])
_adds = Counter("workqueue_adds_total", "Total number of adds handled by workqueue", ["name"])
_latency = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested.",
    ["name"],
    buckets=_BUCKETS,
)
_work_duration = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes.",
    ["name"],
    buckets=_BUCKETS,
)
_unfinished = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has done that is in progress and hasn't been observed by work_duration. "
    "Large values indicate stuck threads. One can deduce the number of stuck threads by observing "
    "the rate at which this increases.",
    ["name"],
)
_longest = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    ["name"],
)
_retries = Counter("workqueue_retries_total", "Total number of retries handled by workqueue", ["name"])


class PrometheusProvider:
    """The default provider: children of the module-level families, labelled `name`."""

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return _depth.labels(name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        return _adds.labels(name)

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return _latency.labels(name)

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return _work_duration.labels(name)

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _unfinished.labels(name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _longest.labels(name)

    def new_retries_metric(self, name: str) -> CounterMetric:
        return _retries.labels(name)


_provider: MetricsProvider = PrometheusProvider()


def set_provider(provider: MetricsProvider) -> None:
    """Replace the provider for queues created from now on (client-go's `SetProvider`)."""
    global _provider
    _provider = provider


def queue_metrics(name: str, *, clock: Callable[[], float] = time.monotonic) -> QueueMetrics | None:
    """Metrics for a queue called `name`, or None (no metrics at all) when it has no name.

    The clock defaults to the monotonic wall clock: metrics report real seconds even when a
    test runs the queue itself on a virtual loop clock.
    """
    if not name:
        return None
    m = QueueMetrics(name, _provider, clock)
    _live.add(m)
    return m
