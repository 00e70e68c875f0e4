"""`/metrics` carries the series KCM's does: no Python-only `*_created` companions."""

from __future__ import annotations

from prometheus_client import REGISTRY, Counter, generate_latest

import controller_manager.server  # noqa: F401  (serving the metrics is what turns them off)


def test_counters_export_no_created_series() -> None:
    counter = Counter("aiokcm_test_exposition_total", "A counter for this test.", ["kind"])
    counter.labels(kind="x").inc()
    text = generate_latest(REGISTRY).decode()
    assert 'aiokcm_test_exposition_total{kind="x"} 1.0' in text
    assert "_created" not in text
