"""The node lifecycle controller's metrics, with KCM's `node_collector_*` names."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

ZONE_HEALTH = Gauge(
    "node_collector_zone_health",
    "Gauge measuring percentage of healthy nodes per zone.",
    ["zone"],
)
ZONE_SIZE = Gauge(
    "node_collector_zone_size",
    "Gauge measuring number of registered Nodes per zones.",
    ["zone"],
)
UNHEALTHY_NODES = Gauge(
    "node_collector_unhealthy_nodes_in_zone",
    "Gauge measuring number of not Ready Nodes per zones.",
    ["zone"],
)
EVICTIONS_TOTAL = Counter(
    "node_collector_evictions_total",
    "Number of Node evictions that happened since current instance of NodeController started.",
    ["zone"],
)
