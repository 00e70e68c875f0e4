"""The taint manager's metrics, named byte for byte as `pkg/controller/tainteviction/metrics`."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

POD_DELETIONS_TOTAL = Counter(
    "taint_eviction_controller_pod_deletions_total",
    "Total number of Pods deleted by TaintEvictionController since its start.",
)
POD_DELETION_DURATION = Histogram(
    "taint_eviction_controller_pod_deletion_duration_seconds",
    "Latency, in seconds, between the time when a taint effect has been activated for the Pod "
    "and its deletion via TaintEvictionController.",
    buckets=(0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240),
)
