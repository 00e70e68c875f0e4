"""The node lifecycle controller's settings, as KCM's `pkg/controller/nodelifecycle/config`.

The defaults here are the only ones: `aiokcm run` takes its `--node-*` flag defaults from this
class, and the controller reads only what it is given, so a test and the manager cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NodeLifecycleConfig:
    """Durations are in seconds, rates in nodes per second."""

    # A node without a heartbeat this long is marked unhealthy (KCM's 50s since 1.32).
    node_monitor_grace_period: float = 50.0
    node_monitor_period: float = 5.0
    node_startup_grace_period: float = 60.0
    node_eviction_rate: float = 0.1
    # In a partially disrupted zone of a large cluster; 0 in small ones.
    secondary_node_eviction_rate: float = 0.01
    large_cluster_size_threshold: int = 50
    unhealthy_zone_threshold: float = 0.55
