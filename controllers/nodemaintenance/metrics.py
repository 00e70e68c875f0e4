"""What an operator graphs during a maintenance window.

- `aiokcm_nodemaintenance_nodes` (gauge, by `phase`): nodes under maintenance, from the node syncs;
- `aiokcm_nodemaintenance_pods_pending_evacuation` (gauge): targeted pods still on drained nodes;
- `aiokcm_nodemaintenance_drain_duration_seconds` (histogram): from the first sight of `spec.drain` to
  `Drained=True`, observed once per maintenance;
- `aiokcm_nodemaintenance_evictions_total` (counter, by `result`): the eviction fallback at work;
- `aiokcm_nodemaintenance_eviction_requests_total` (counter, by `action`: create, request, adopt,
  withdraw): what maintenances draining through EvictionRequests wrote;
- `aiokcm_nodemaintenance_blocked_pods` (gauge, by `reason`): pods on nodes being drained that are
  not gone yet, by why (`EvictionRefused` for a PDB, `LocalStorage` and `NoController` for the
  opt-ins, `AwaitingEvacuation` while the owner has time to answer, `Terminating`, ...): the alert
  "drain blocked for N minutes" is `aiokcm_nodemaintenance_blocked_pods{reason=~"EvictionRefused|..."} > 0`.
- `aiokcm_nodemaintenance_nodes_waiting` (gauge, by `limit`): selected nodes not started yet, held
  back by the maintenance's own `maxConcurrentNodes` (`limit="maintenance"`) or by the cluster-wide
  `--node-maintenance-max-unschedulable` (`limit="cluster"`): the alert "maintenance held by the
  cluster limit" is `aiokcm_nodemaintenance_nodes_waiting{limit="cluster"} > 0` for a while.

The gauges are kept per node in `NodeGauges` and summed, so a node that leaves maintenance (or
disappears) stops counting instead of leaving a stale value behind.
"""

from __future__ import annotations

from collections import Counter as Counter_
from collections.abc import Mapping

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
BLOCKED_PODS = Gauge(
    "aiokcm_nodemaintenance_blocked_pods", "Pods not yet gone from nodes being drained, by reason", ["reason"]
)
NODES_WAITING = Gauge(
    "aiokcm_nodemaintenance_nodes_waiting",
    "Selected nodes a maintenance has not started, by the limit that holds them back",
    ["limit"],
)
EVICTIONS = Counter("aiokcm_nodemaintenance_evictions_total", "Eviction fallback attempts", ["result"])
EVICTION_REQUESTS = Counter(
    "aiokcm_nodemaintenance_eviction_requests_total",
    "Writes to EvictionRequests (spec.evictionAPI: EvictionRequest), by action",
    ["action"],
)


class NodeGauges:
    """Per-node phase and pending count, summed into the gauges on every change."""

    def __init__(self) -> None:
        self._phase: dict[str, str] = {}
        self._pending: dict[str, int] = {}
        self._blocked: dict[str, Counter_[str]] = {}
        self._reasons: set[str] = set()

    def set(
        self, node: str, *, phase: str | None, pending: int, blocked: Mapping[str, str] | None = None
    ) -> None:
        """`blocked` maps each blocking pod of the node to its reason."""
        if phase is None:
            self._phase.pop(node, None)
            self._pending.pop(node, None)
            self._blocked.pop(node, None)
        else:
            self._phase[node] = phase
            self._pending[node] = pending
            self._blocked[node] = Counter_((blocked or {}).values())
        self._publish()

    def _publish(self) -> None:
        for phase in PHASE_ORDER:
            NODES.labels(phase).set(sum(1 for p in self._phase.values() if p == phase))
        PODS_PENDING.set(sum(self._pending.values()))
        total: Counter_[str] = Counter_()
        for counts in self._blocked.values():
            total.update(counts)
        self._reasons |= set(total)
        for reason in self._reasons:  # a reason that cleared reads 0, not its last value
            BLOCKED_PODS.labels(reason).set(total.get(reason, 0))

    def blocked(self, reason: str) -> int:
        return sum(c.get(reason, 0) for c in self._blocked.values())

    def nodes_in(self, phase: str) -> int:
        return sum(1 for p in self._phase.values() if p == phase)


class WaitingGauges:
    """Per maintenance, its waiting nodes by limit, summed so a finished maintenance stops counting."""

    def __init__(self) -> None:
        self._by_maintenance: dict[str, tuple[int, int]] = {}

    def set(self, maintenance: str, *, own: int, cluster: int) -> None:
        if own or cluster:
            self._by_maintenance[maintenance] = (own, cluster)
        else:
            self._by_maintenance.pop(maintenance, None)
        NODES_WAITING.labels("maintenance").set(sum(o for o, _ in self._by_maintenance.values()))
        NODES_WAITING.labels("cluster").set(sum(c for _, c in self._by_maintenance.values()))
