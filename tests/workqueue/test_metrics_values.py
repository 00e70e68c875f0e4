"""A queue's metric values on a fake clock, ported from client-go's `util/workqueue/metrics_test.go`.

client-go refreshes the in-progress gauges from a ticker; here `update_unfinished_work()` is what a
scrape calls, so the tests call it where Go steps the ticker.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from workqueue import Queue, metrics
from workqueue.metrics import queue_metrics, update_unfinished_work

pytestmark = pytest.mark.looptime


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


class TestMetric:
    """client-go's testMetric: a gauge is `set` if ever set, else incs minus decs."""

    __test__ = False

    def __init__(self) -> None:
        self.inc_count = 0
        self.dec_count = 0
        self.set_value = 0.0
        self.set_calls = 0
        self.observed_value = 0.0
        self.observed_count = 0

    def inc(self) -> None:
        self.inc_count += 1

    def dec(self) -> None:
        self.dec_count += 1

    def set(self, value: float) -> None:
        self.set_value = value
        self.set_calls += 1

    def observe(self, value: float) -> None:
        self.observed_value = value
        self.observed_count += 1

    def gauge_value(self) -> float:
        return self.set_value if self.set_value != 0 else float(self.inc_count - self.dec_count)


class TestMetricsProvider:
    __test__ = False

    def __init__(self) -> None:
        self.depth, self.adds, self.latency, self.duration = (
            TestMetric(),
            TestMetric(),
            TestMetric(),
            TestMetric(),
        )
        self.unfinished, self.longest, self.retries = TestMetric(), TestMetric(), TestMetric()

    def new_depth_metric(self, name: str) -> TestMetric:
        return self.depth

    def new_adds_metric(self, name: str) -> TestMetric:
        return self.adds

    def new_latency_metric(self, name: str) -> TestMetric:
        return self.latency

    def new_work_duration_metric(self, name: str) -> TestMetric:
        return self.duration

    def new_unfinished_work_seconds_metric(self, name: str) -> TestMetric:
        return self.unfinished

    def new_longest_running_processor_seconds_metric(self, name: str) -> TestMetric:
        return self.longest

    def new_retries_metric(self, name: str) -> TestMetric:
        return self.retries


@pytest.fixture
def provider() -> Iterator[TestMetricsProvider]:
    mp = TestMetricsProvider()
    metrics.set_provider(mp)
    try:
        yield mp
    finally:
        metrics.set_provider(metrics.PrometheusProvider())


async def test_metric_shutdown(provider: TestMetricsProvider) -> None:  # TestMetricShutdown
    clock = FakeClock()
    q: Queue[str] = Queue(name="test", metrics=queue_metrics("test", clock=clock))
    clock.step(0.001)
    update_unfinished_work()
    assert provider.unfinished.set_calls == 1
    q.shutdown()
    clock.step(3600)
    update_unfinished_work()
    assert provider.unfinished.set_calls == 1  # no update after shutdown was called


async def test_metrics(provider: TestMetricsProvider) -> None:  # TestMetrics
    mp = provider
    clock = FakeClock()
    q: Queue[str] = Queue(name="test", metrics=queue_metrics("test", clock=clock))

    q.add("foo")
    assert mp.adds.gauge_value() == 1.0
    assert mp.depth.gauge_value() == 1.0
    clock.step(50e-6)

    i = await q.get()  # start processing
    assert i == "foo"
    assert mp.latency.observed_value == pytest.approx(5e-05)
    assert mp.latency.observed_count == 1

    for _ in range(5):  # added back while processing: deduplicated
        q.add(i)
    assert mp.adds.gauge_value() == 2.0
    assert mp.depth.gauge_value() == 1.0  # one thing remains in the queue
    clock.step(25e-6)

    q.done(i)  # finish it up
    assert mp.duration.observed_value == pytest.approx(2.5e-05)
    assert mp.duration.observed_count == 1
    assert mp.depth.gauge_value() == 1.0

    i = await q.get()  # it is back on the queue
    assert i == "foo"
    assert mp.latency.observed_value == pytest.approx(2.5e-05)
    assert mp.latency.observed_count == 2

    clock.step(0.001)
    update_unfinished_work()
    assert mp.unfinished.gauge_value() == pytest.approx(0.001)
    assert mp.longest.gauge_value() == pytest.approx(0.001)

    q.done(i)  # finish that one up
    assert mp.duration.observed_value == pytest.approx(0.001)
    assert mp.duration.observed_count == 2
    q.shutdown()
