"""What an operator graphs during a maintenance window.

- `aiokcm_nodemaintenance_nodes` (gauge, by `phase`): nodes under maintenance, from the node syncs;
- `aiokcm_nodemaintenance_pods_pending_evacuation` (gauge): targeted pods still on drained nodes;
- `aiokcm_nodemaintenance_drain_duration_seconds` (histogram): from the first sight of `spec.drain` to
  `Drained=True`, observed once per maintenance;
- `aiokcm_nodemaintenance_evictions_total` (counter, by `result`): the eviction fallback at work.

The gauges are kept per node in `NodeGauges` and summed, so a node that leaves maintenance (or
disappears) stops counting instead of leaving a stale value behind.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from controllers.nodemaintenance.api import PHASE_ORDER

NODES = Gauge("aiokcm_nodemaintenance_nodes", "Nodes under maintenance by phase", ["phase"])
PODS_PENDING = Gauge(
    "aiokcm_nodemaintenance_pods_pending_evacuation", "Targeted pods still on nodes being drained"
)
DRAIN_DURATION = Histogram(
    "aiokcm_nodemaintenance_drain_duration_seconds",
    "Time from spec.drain to Drained=True",
    buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200),
)
EVICTIONS = Counter("aiokcm_nodemaintenance_evictions_total", "Eviction fallback attempts", ["result"])


class NodeGauges:
    """Per-node phase and pending count, summed into the gauges on every change."""

    def __init__(self) -> None:
        self._phase: dict[str, str] = {}
        self._pending: dict[str, int] = {}

    def set(self, node: str, *, phase: str | None, pending: int) -> None:
        if phase is None:
            self._phase.pop(node, None)
            self._pending.pop(node, None)
        else:
            self._phase[node] = phase
            self._pending[node] = pending
        self._publish()

    def _publish(self) -> None:
        for phase in PHASE_ORDER:
            NODES.labels(phase).set(sum(1 for p in self._phase.values() if p == phase))
        PODS_PENDING.set(sum(self._pending.values()))

    def nodes_in(self, phase: str) -> int:
        return sum(1 for p in self._phase.values() if p == phase)
