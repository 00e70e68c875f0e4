"""NodeMaintenance controller: wiring, event handlers and the two queues the worker engine serves.

The node queue is reconciled by `nodesync.NodeSync`, the maintenance queue (this controller's
`sync`) by `maintenancesync.MaintenanceSync`; both share `state.DrainState` and `state.Listers`.

Two kinds of work, two queues, chosen for what each write touches:

- **Node keys on a `ShardedQueue` by node name**, one worker per shard (as the taint manager
  shards by node). Everything that writes to a node or its pods (cordon, EvacuationRequest,
  withdrawal, eviction) happens in the node's sync, so one node is only ever worked on by one worker
  and overlapping maintenances are composed in one place instead of racing each other. A node whose
  evictions are refused (a PDB) waits in its shard's delay queue, not in a worker.
- **Maintenance keys on the base class's `RateLimitingQueue`**: status and finalizer only; cheap
  reads of the listers and at most one status patch, so any worker may take any maintenance.
  While pods are still leaving a node, its sync wakes the maintenances after `STATUS_BATCH_SECONDS`
  (a delaying queue keeps the earliest wake-up, so that is at most one status write a second),
  and so does the echo of a status write; the node sync that finds the node empty wakes them at
  once, so `Drained` is never late.

With the EvictionRequestAPI gate on, an informer on EvictionRequests (in the group the cluster
serves) lets the node syncs read the requests this controller made, and a change to one of them
enqueues its pod's node (`evictionrequests.py`).

Handlers enqueue keys and nothing else. A maintenance's spec change fans out to the nodes it
selects or is applied to; a node or pod change enqueues the node (when it is under maintenance)
and each node sync enqueues the maintenances involved so their status follows (and the next node
starts when one is done). A change of any node's cordon re-enqueues the maintenances the
cluster-wide guard holds back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from anyio.abc import TaskGroup

from apiclient.resources import (
    DAEMONSETS,
    DEPLOYMENTS,
    NODEMAINTENANCES,
    NODES,
    PODS,
    REPLICASETS,
    STATEFULSETS,
)
from controllers import features
from controllers.base import Controller
from controllers.context import ControllerContext
from controllers.nodemaintenance import api, cordon, evictionrequests, rolling
from controllers.nodemaintenance.config import NodeMaintenanceConfig
from controllers.nodemaintenance.maintenancesync import MaintenanceSync
from controllers.nodemaintenance.nodesync import NodeSync
from controllers.nodemaintenance.state import DrainState, Listers, utcnow
from controllers.worker import Outcome
from evictionapi import requests
from informers import DeletedFinalStateUnknown, ResourceEventHandler
from kubeutil.nodeaffinity import selector_matches
from maintenancerollout import health
from nodemaintenancelease.gate import LeaseGate, MaintenanceLeaseGate, NoLeaseGate
from workqueue import ShardedQueue

Obj = Mapping[str, Any]
# Status writes while pods leave a node are batched this far apart, as KCM's Job controller
# batches its pod-driven syncs (`syncJobBatchPeriod`): one write for several pods' departures.
STATUS_BATCH_SECONDS = 1.0


def _unwrap(obj: Obj | DeletedFinalStateUnknown) -> Obj:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


# Metadata the API server moves on any write, status writes included.
_BOOKKEEPING = frozenset({"resourceVersion", "managedFields"})


def _status_only(old: Obj, new: Obj) -> bool:
    """Whether an update changed nothing but the status (and the server's bookkeeping)."""
    if any(old.get(k) != new.get(k) for k in {*old, *new} - {"metadata", "status"}):
        return False
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    return all(old_meta.get(k) == new_meta.get(k) for k in {*old_meta, *new_meta} - _BOOKKEEPING)


def _health_changed(old: Obj, new: Obj) -> bool:
    """A new boot, a Ready change or a taint change: what a rolling maintenance's gates read."""
    if health.boot_id(old) != health.boot_id(new):
        return True
    if health.node_health(old) != health.node_health(new):
        return True
    return (old.get("spec") or {}).get("taints") != (new.get("spec") or {}).get("taints")


def _default_gate(ctx: ControllerContext) -> LeaseGate:
    """Real node leases when the `NodeMaintenanceLease` gate is on, else no coordination."""
    if ctx.gates.enabled(features.NODE_MAINTENANCE_LEASE):
        return MaintenanceLeaseGate(ctx.client)
    return NoLeaseGate()


class NodeMaintenanceController(Controller):
    """KEP-4212's node maintenance controller, with an eviction fallback so a drain always ends."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        name: str,
        workers: int,
        config: NodeMaintenanceConfig,
        lease_gate: LeaseGate | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        """`lease_gate` is how drains coordinate with other disruptive actors; without one, the
        `NodeMaintenanceLease` gate decides between real node leases and none."""
        super().__init__(ctx, name=name, workers=workers)
        self.config = config
        self.node_queue: ShardedQueue[str] = ShardedQueue(
            config.node_shards, shard_key=lambda node: node, name="nodemaintenance_nodes"
        )
        gate = lease_gate or _default_gate(ctx)
        self.lease_gate: LeaseGate = gate
        factory = ctx.informers
        nm_inf = factory.informer(NODEMAINTENANCES)
        node_inf = factory.informer(NODES)
        node_indexers = {
            api.APPLIED_MAINTENANCES_INDEX: api.applied_maintenances,
            cordon.UNSCHEDULABLE_INDEX: cordon.unschedulable_index,
        }
        missing = {k: v for k, v in node_indexers.items() if k not in node_inf.store.indexers}
        if missing:
            node_inf.add_indexers(missing)
        pod_inf = factory.informer(PODS)
        # The pods' owners, to tell who will answer an EvacuationRequest (workload.py).
        owners = {res.kind: factory.informer(res).lister for res in (REPLICASETS, DEPLOYMENTS, STATEFULSETS)}
        self.listers = Listers(
            nm_inf.lister,
            node_inf.lister,
            pod_inf.lister,
            owners,
            surge_answers=config.surge_answers,
            bare_replicasets_answer=config.bare_replicasets_answer,
        )
        # Maintenances that drain through EvictionRequests (evictionrequests.py) need the API's gate.
        self.eviction_api = ctx.eviction_api if ctx.gates.enabled(features.EVICTION_REQUEST_API) else None
        if self.eviction_api is not None:
            request_inf = factory.informer(self.eviction_api.requests)
            self.listers.requests = request_inf.lister
            request_inf.add_event_handler(
                ResourceEventHandler(
                    on_add=self._request_changed,
                    on_update=lambda _old, new: self._request_changed(new),
                    on_delete=self._request_deleted,
                )
            )
        self.state = DrainState()
        self.node_sync = NodeSync(
            client=self.client,
            listers=self.listers,
            state=self.state,
            gate=gate,
            recorder=self.recorder,
            enqueue_maintenance=self.enqueue,
            batch_maintenance=lambda name: self.queue.add_after(name, STATUS_BATCH_SECONDS),
            clock=clock,
            eviction_api=self.eviction_api,
            others_waiting=lambda node: len(self.node_queue.shard(self.node_queue.shard_for(node))) > 0,
        )
        self.node_worker = self.make_worker(self.node_sync.sync)
        self.serve_also(self.node_queue, self.node_worker)  # one worker per node shard
        # A rolling maintenance's workloads gate reads DaemonSets too (they come back on the node).
        daemonsets = factory.informer(DAEMONSETS).lister
        listers = self.listers

        def lookup(kind: str, namespace: str, name: str) -> Obj | None:
            if kind == "DaemonSet":
                return daemonsets.get(name, namespace)
            return listers.owner(kind, namespace, name)

        self.rolling = rolling.RollingGates(recorder=self.recorder, lookup=lookup)
        self.maintenance_sync = MaintenanceSync(
            client=self.client,
            listers=self.listers,
            state=self.state,
            recorder=self.recorder,
            enqueue_node=self.node_queue.add,
            clock=clock,
            max_unschedulable=config.max_unschedulable,
            rolling=self.rolling,
        )
        nm_inf.add_event_handler(
            ResourceEventHandler(
                on_add=self._maintenance_added,
                on_update=self._maintenance_updated,
                on_delete=self._maintenance_deleted,
            )
        )
        node_inf.add_event_handler(
            ResourceEventHandler(
                on_add=self._node_added,
                on_update=self._node_updated,
                on_delete=self._node_deleted,
            )
        )
        pod_inf.add_event_handler(
            ResourceEventHandler(
                on_add=self._pod_changed,
                on_update=lambda _old, new: self._pod_changed(new),
                on_delete=self._pod_deleted,
            )
        )

    # -- handlers --------------------------------------------------------------------------------

    def _enqueue_nodes_of(self, obj: Obj) -> None:
        m = api.Maintenance.from_obj(obj)
        for node in (*self.listers.selected_nodes(m.selector), *self.listers.nodes_applying(m.name)):
            self.node_queue.add(_name(node))

    def _maintenance_added(self, obj: Obj) -> None:
        self.enqueue(_name(obj))
        self._enqueue_nodes_of(obj)

    def _maintenance_updated(self, old: Obj, new: Obj) -> None:
        old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
        if _status_only(old, new):
            # Nearly always the echo of this controller's own status write: the status sync reads
            # what it wrote last, not the cache, so the echo has nothing to tell it. Looking again
            # at once would turn every write into the next one while pods move; a batch later is
            # the status pace the node syncs keep.
            self.queue.add_after(_name(new), STATUS_BATCH_SECONDS)
            return
        self.enqueue(_name(new))
        if (
            old_meta.get("generation") != new_meta.get("generation")
            or old_meta.get("deletionTimestamp") != new_meta.get("deletionTimestamp")
            or old.get("spec") != new.get("spec")
        ):
            self._enqueue_nodes_of(old)
            self._enqueue_nodes_of(new)

    def _maintenance_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        # Normally the finalizer has already undone everything; a forced removal still gets undone here.
        self._enqueue_nodes_of(_unwrap(obj))

    def _under_maintenance(self, node: Obj) -> bool:
        if api.applied_maintenances(node):
            return True
        return any(
            selector_matches(o.get("spec", {}).get("nodeSelector"), node)
            for o in self.listers.maintenances.list()
        )

    def _enqueue_related_maintenances(self, node: Obj) -> None:
        names = set(api.applied_maintenances(node))
        for o in self.listers.maintenances.list():
            if selector_matches((o.get("spec") or {}).get("nodeSelector"), node):
                names.add(_name(o))
        for name in names:
            self.enqueue(name)

    def _recheck_held(self) -> None:
        """A node's cordon changed (or a node came or went): the cluster-wide guard may have room now."""
        for name in sorted(self.state.held_by_cluster):
            self.enqueue(name)

    def _node_added(self, node: Obj) -> None:
        self._recheck_held()
        if self._under_maintenance(node):
            self.node_queue.add(_name(node))
            self._enqueue_related_maintenances(node)

    def _node_updated(self, old: Obj, new: Obj) -> None:
        old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
        if (
            old_meta.get("labels") == new_meta.get("labels")
            and old_meta.get("annotations") == new_meta.get("annotations")
            and (old.get("spec") or {}).get("unschedulable") == (new.get("spec") or {}).get("unschedulable")
        ):
            # A heartbeat or a status change: only a rolling maintenance reads one (a reboot, the
            # node Ready again), and only the maintenances applied to the node care.
            if api.applied_maintenances(new) and _health_changed(old, new):
                for name in api.applied_maintenances(new):
                    self.enqueue(name)
            return
        if (old.get("spec") or {}).get("unschedulable") != (new.get("spec") or {}).get("unschedulable"):
            self._recheck_held()
        if self._under_maintenance(old) or self._under_maintenance(new):
            self.node_queue.add(_name(new))
            self._enqueue_related_maintenances(old)
            self._enqueue_related_maintenances(new)

    def _node_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        node = _unwrap(obj)
        self._recheck_held()
        self.node_queue.add(_name(node))  # the sync finds it gone and forgets its state
        self._enqueue_related_maintenances(node)

    def _pod_changed(self, pod: Obj) -> None:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            return
        node = self.listers.nodes.get(node_name)
        if node is not None and self._under_maintenance(node):
            self.node_queue.add(node_name)

    def _pod_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        self._pod_changed(_unwrap(obj))

    def _request_changed(self, request: Obj) -> None:
        """One of our EvictionRequests changed (settled, withdrawn by hand, deleted): its pod's node."""
        if not evictionrequests.counts_as_requester(request):
            return
        key = requests.target_key_of(request)
        pod = self.listers.pods.get_by_key(key) if key else None
        if pod is not None:
            self._pod_changed(pod)

    def _request_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        self._request_changed(_unwrap(obj))

    # -- work ------------------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        await self.maintenance_sync.sync(key)

    async def process_node(self, node: str) -> Outcome:
        """One node sync under the engine's policy, on the node's shard."""
        return await self.node_worker.process(self.node_queue.shard(self.node_queue.shard_for(node)), node)

    def start_loops(self, tg: TaskGroup) -> None:
        renew = getattr(self.lease_gate, "run", None)  # a gate renewing its leases in the background
        if renew is not None:
            tg.start_soon(renew)
