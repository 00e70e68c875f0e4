"""What the node and maintenance reconciles share: the listers they read and what they remember.

The node syncs learn things the API does not hold (eviction refusals, lease waits, pods already
evicted) and the maintenance syncs remember what they decided and wrote last; each side reads
the other's, so both hold the one `DrainState`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from controllers.nodemaintenance import api, cordon, evictionrequests, metrics, rollout
from controllers.nodemaintenance.nodeselector import named_nodes
from controllers.nodemaintenance.status import (
    BlockingPod,
)
from controllers.nodemaintenance.workload import Workload, workload_of
from informers import NODE_NAME_INDEX, Lister
from kubeutil.nodeaffinity import selector_matches

Obj = Mapping[str, Any]


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class DrainState:
    """What the node syncs learn that the API does not hold: eviction refusals and lease waits."""

    blocks: dict[str, dict[str, BlockingPod]] = field(default_factory=dict)
    # node -> maintenance -> the lease holder it waits for
    lease_waiting: dict[str, dict[str, str]] = field(default_factory=dict)
    #: node -> pod key -> evictions of that pod that failed in a row (not 429s: those are "not now")
    eviction_failures: dict[str, dict[str, int]] = field(default_factory=dict)
    #: node -> uids of pods evicted there that the cache still shows running: never evicted twice
    evicted: dict[str, set[str]] = field(default_factory=dict)
    #: node -> pod uid -> the resourceVersion a request or withdrawal we wrote was planned on: while
    #: the cache still holds that version, the pod is not planned again (its update re-enqueues the node)
    written_pods: dict[str, dict[str, str]] = field(default_factory=dict)
    #: node -> (the resourceVersion our last patch of it was planned on, the node it answered):
    #: while the cache still holds the version we patched over, the sync works from our answer,
    #: so a phase or cordon already written is not written again
    written_nodes: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    gauges: metrics.NodeGauges = field(default_factory=metrics.NodeGauges)
    waiting: metrics.WaitingGauges = field(default_factory=metrics.WaitingGauges)
    # maintenance name -> (its uid, the status we wrote last); the cache may still hold the old
    # object when the next sync runs, and must not make us write (or announce) the same thing twice.
    written: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    #: maintenance name -> the nodes it has started (rollout.py); absent: read from its status
    working: dict[str, rollout.Working] = field(default_factory=dict)
    #: maintenances the cluster-wide guard holds back: looked at again when a node's cordon changes
    held_by_cluster: set[str] = field(default_factory=set)

    def forget_node(self, node: str) -> None:
        self.blocks.pop(node, None)
        self.lease_waiting.pop(node, None)
        self.eviction_failures.pop(node, None)
        self.evicted.pop(node, None)
        self.written_pods.pop(node, None)
        self.written_nodes.pop(node, None)
        self.gauges.set(node, phase=None, pending=0)

    def waiting_for_lease(self, node: str, maintenance: str) -> str | None:
        return self.lease_waiting.get(node, {}).get(maintenance)

    def forget_maintenance(self, name: str) -> None:
        self.waiting.set(name, own=0, cluster=0)
        self.written.pop(name, None)
        self.working.pop(name, None)
        self.held_by_cluster.discard(name)

    def knows(self, m: api.Maintenance) -> bool:
        known = self.working.get(m.name)
        return known is not None and known.uid == m.uid

    def working_on(self, m: api.Maintenance, obj: Obj | None) -> rollout.Working:
        """The nodes `m` has started: what its last sync decided, else what its status says."""
        known = self.working.get(m.name)
        if known is not None and known.uid == m.uid:
            return known
        written = self.written.get(m.name)
        status = written[1] if written is not None and written[0] == m.uid else (obj or {}).get("status")
        return rollout.from_status(m.uid, status)

    def cordoning_elsewhere(self, name: str) -> set[str]:
        """Nodes other maintenances have started to cordon (their cordon may not be in the cache yet)."""
        return {n for other, w in self.working.items() if other != name for n in w.cordoning}


@dataclass
class Listers:
    """The caches both reconciles and the handlers read, with the lookups they share."""

    maintenances: Lister
    nodes: Lister
    pods: Lister

    def all_maintenances(self) -> list[api.Maintenance]:
        return [self.maintenance(o) for o in self.maintenances.list()]

    def maintenance(self, obj: Obj) -> api.Maintenance:
        """The maintenance's view, invalid when it asks for EvictionRequests and they are off."""
        m = api.Maintenance.from_obj(obj)
        if m.by_eviction_request and self.requests is None and not m.invalid:
            return replace(m, invalid=evictionrequests.GATE_OFF)
        return m

    # kind -> lister of the pods' owners the drain judges (ReplicaSet, Deployment, StatefulSet)
    owners: Mapping[str, Lister] = field(default_factory=dict)
    # aiokcm's ReplicaSet and Deployment controllers run beside the drain (workload.py).
    surge_answers: bool = True
    # The replacement surge answers for a ReplicaSet with no Deployment too (workload.py).
    bare_replicasets_answer: bool = False
    # The EvictionRequests cache (evictionrequests.py); None while the EvictionRequestAPI gate is off.
    requests: Lister | None = None

    def request_of(self, pod: Obj) -> Obj | None:
        """The pod's EvictionRequest of this controller, from the cache."""
        return evictionrequests.request_for(self.requests, pod)

    def node_pods(self, node: str) -> list[dict[str, Any]]:
        return self.pods.by_index(NODE_NAME_INDEX, node)

    def selected_nodes(self, selector: Mapping[str, Any] | None) -> list[Obj]:
        """The nodes `selector` selects, looked up by name when it names them (`named_nodes`)."""
        names = named_nodes(selector)
        if names is None:
            return [n for n in self.nodes.list() if selector_matches(selector, n)]
        found = (self.nodes.get(name) for name in sorted(names))
        return [n for n in found if n is not None and selector_matches(selector, n)]

    def unschedulable_nodes(self) -> list[dict[str, Any]]:
        """The cordoned nodes, from the node cache's index (`cordon.UNSCHEDULABLE_INDEX`)."""
        return self.nodes.by_index(cordon.UNSCHEDULABLE_INDEX, "true")

    def nodes_applying(self, maintenance: str) -> list[dict[str, Any]]:
        """The nodes whose annotation lists `maintenance` as applied to them."""
        return self.nodes.by_index(api.APPLIED_MAINTENANCES_INDEX, maintenance)

    def owner(self, kind: str, namespace: str, name: str) -> Obj | None:
        lister = self.owners.get(kind)
        return lister.get(name, namespace) if lister is not None else None

    def workload(self, pod: Obj) -> Workload:
        return workload_of(
            pod,
            self.owner,
            surge_answers=self.surge_answers,
            bare_replicasets_answer=self.bare_replicasets_answer,
        )


def holds_cordon(m: api.Maintenance, node: Obj) -> bool:
    """`m` is applied on the node and a maintenance holds its cordon (it had started there)."""
    return m.name in api.applied_maintenances(node) and cordon.cordoned_by_us(node)
