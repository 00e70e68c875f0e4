"""The two reconciles: one node against every maintenance, and one maintenance's status and finalizer.

Node sync (sharded by node name): the desired state of a node is a function of *all* active
maintenances that select it, so overlapping maintenances compose instead of fighting: the node is
cordoned while any of them cordons, its pods carry our EvacuationRequest while any of them drains,
and it is uncordoned only when none is left (and only if it was schedulable before). Order inside
one sync: cordon first (the KEP's prerequisite for drain), then the pods (requests, withdrawals,
eviction fallback), and last the node annotation listing the maintenances applied; that annotation is
the commit record a deleted maintenance waits for before its finalizer goes.

Each pod's plan is `drain.plan_pod` with the options of the maintenances whose pod selector picks it
(combined so that data is lost only if all of them allow it) and its owner's answer (`workload.py`).
Pods nobody answers for are evicted one per owner at a time: a sibling still terminating holds the
next one back, so a StatefulSet loses one replica at a time even without a budget. Every write is
logged at info with maintenance, node and pod; an eviction refusal is an event once per new refusal
and a log line on every attempt.

Which of its selected nodes a maintenance acts on is decided in the maintenance sync (`rollout.py`:
its `maxConcurrentNodes` and the cluster-wide guard), without a suspension point so two syncs never
both take the last room; the node sync acts only for maintenances started on its node (cordon
only while the node waits for its turn to drain). What started is kept in memory and, across
restarts, read back from the status the maintenance sync wrote.

Maintenance sync: status from the listers (per node counts, blocking pods, conditions), written
only when it changed; the finalizer added on sight and removed once no node lists the maintenance.
Only this controller writes the status, so the status it wrote last stands in for the cached copy:
a cache that lags behind never makes it write, or announce `Drained`, twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import structlog

from apiclient import ApiError, KubeClient
from apiclient.resources import NODEMAINTENANCES, NODES
from controllers.base import RequeueAfter
from controllers.common.pods import is_pod_terminal, pod_key
from controllers.context import EventRecorder
from controllers.nodemaintenance import api, cordon, drain, metrics, rollout
from controllers.nodemaintenance.nodeselector import named_nodes
from controllers.nodemaintenance.status import (
    BlockingPod,
    NodeProgress,
    build_status,
    missing_nodes,
    node_phase,
    node_progress,
)
from controllers.nodemaintenance.workload import Workload, workload_of
from informers import CONTROLLER_UID_INDEX, NODE_NAME_INDEX, Lister
from kubeutil.nodeaffinity import selector_matches
from kubeutil.timestamps import parse_time
from nodemaintenancelease.gate import LeaseGate

log = structlog.get_logger()

Obj = Mapping[str, Any]
LEASE_RETRY_SECONDS = 5.0
FINALIZER_RECHECK_SECONDS = 10.0


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
    maintenances: Lister
    nodes: Lister
    pods: Lister

    def all_maintenances(self) -> list[api.Maintenance]:
        return [api.Maintenance.from_obj(o) for o in self.maintenances.list()]

    # kind -> lister of the pods' owners the drain judges (ReplicaSet, Deployment, StatefulSet)
    owners: Mapping[str, Lister] = field(default_factory=dict)
    # aiokcm's ReplicaSet and Deployment controllers run beside the drain (workload.py).
    surge_answers: bool = True

    def node_pods(self, node: str) -> list[dict[str, Any]]:
        return self.pods.by_index(NODE_NAME_INDEX, node)

    def selected_nodes(self, selector: Mapping[str, Any] | None) -> list[Obj]:
        """The nodes `selector` selects, looked up by name when it names them (`named_nodes`)."""
        names = named_nodes(selector)
        if names is None:
            return [n for n in self.nodes.list() if selector_matches(selector, n)]
        found = (self.nodes.get(name) for name in sorted(names))
        return [n for n in found if n is not None and selector_matches(selector, n)]

    def nodes_applying(self, maintenance: str) -> list[dict[str, Any]]:
        """The nodes whose annotation lists `maintenance` as applied to them."""
        return self.nodes.by_index(api.APPLIED_MAINTENANCES_INDEX, maintenance)

    def owner(self, kind: str, namespace: str, name: str) -> Obj | None:
        lister = self.owners.get(kind)
        return lister.get(name, namespace) if lister is not None else None

    def workload(self, pod: Obj) -> Workload:
        return workload_of(pod, self.owner, surge_answers=self.surge_answers)


class NodeSync:
    def __init__(
        self,
        *,
        client: KubeClient,
        listers: Listers,
        state: DrainState,
        gate: LeaseGate,
        recorder: EventRecorder,
        enqueue_maintenance: Callable[[str], None],
        batch_maintenance: Callable[[str], None] | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.client = client
        self.listers = listers
        self.state = state
        self.gate = gate
        self.recorder = recorder
        self.enqueue_maintenance = enqueue_maintenance
        self.batch_maintenance = batch_maintenance or enqueue_maintenance
        self.clock = clock

    async def sync(self, node_name: str) -> None:
        cached = self.listers.nodes.get(node_name)
        if cached is None:
            self.state.forget_node(node_name)
            for m in self.listers.all_maintenances():
                self.enqueue_maintenance(m.name)
            return
        node: Obj = cached
        applied = api.applied_maintenances(node)
        selecting = api.oldest_first(
            [
                w
                for m in self.listers.all_maintenances()
                if m.active and selector_matches(m.selector, node)
                if (w := self._as_started(m, node_name, node)) is not None
            ]
        )
        granted, waiting = await self._leases(node_name, selecting)
        wanted_names = sorted(m.name for m in selecting)
        now = self.clock()
        pending: int | None = None
        try:
            node = await self._cordon_first(node, granted, applied)
            released = ",".join(sorted(set(applied) - {m.name for m in granted if m.drain}))
            retry = await self._pods(node_name, granted, now, released=released)
            pending = await self._commit(node, granted, selecting, wanted_names, waiting, now)
        finally:
            # While pods are still leaving, the statuses follow in batches (each pod's departure
            # is several pod changes); the change that drains the node is reported at once.
            enqueue = self.batch_maintenance if pending else self.enqueue_maintenance
            for name in {*applied, *wanted_names}:
                enqueue(name)
        for name in applied:
            if name not in wanted_names:
                await self.gate.release(node=node_name, holder=f"aiokcm/nodemaintenance/{name}")
        if waiting:
            retry = min(retry or LEASE_RETRY_SECONDS, LEASE_RETRY_SECONDS)
        if retry is not None:
            raise RequeueAfter(retry)

    def _as_started(self, m: api.Maintenance, node: str, cached: Obj) -> api.Maintenance | None:
        """`m` as far as it has started on `node`: not at all (None), cordon only, or all of it.

        Before its maintenance sync has run (a restart) a cordon `m` holds on the node counts as
        started even if the status written before the restart does not show it yet: never undone.
        """
        if not m.paced:
            return m
        working = self.state.working_on(m, self.listers.maintenances.get(m.name))
        if node not in working.cordoning and not (not self.state.knows(m) and _holds(m, cached)):
            return None
        if m.drain and node not in working.draining:
            return replace(m, drain=False)
        return m

    async def _leases(
        self, node: str, selecting: list[api.Maintenance]
    ) -> tuple[list[api.Maintenance], set[str]]:
        granted: list[api.Maintenance] = []
        waiting: dict[str, str] = {}
        for m in selecting:
            if not (m.cordon or m.drain):
                granted.append(m)
                continue
            decision = await self.gate.acquire(node=node, holder=m.holder)
            if decision.granted:
                granted.append(m)
            else:
                holder = decision.holder or "someone else"
                waiting[m.name] = holder
                if self.state.waiting_for_lease(node, m.name) != holder:
                    log.info(
                        "waiting for the node's maintenance lease",
                        maintenance=m.name,
                        node=node,
                        holder=holder,
                    )
                    target = self.listers.maintenances.get(m.name)
                    if target is not None:
                        self.recorder.event(
                            target,
                            "Warning",
                            "WaitingForLease",
                            f"node {node}: maintenance lease held by {holder}",
                        )
        if waiting:
            self.state.lease_waiting[node] = waiting
        else:
            self.state.lease_waiting.pop(node, None)
        return granted, set(waiting)

    async def _patch_node(self, node: Obj, patch: dict[str, Any]) -> dict[str, Any]:
        name = str(node["metadata"]["name"])
        return await self.client.patch(NODES, name, patch)

    async def _cordon_first(self, node: Obj, granted: list[api.Maintenance], applied: list[str]) -> Obj:
        """Cordon (and record the new maintenances) before any pod is asked to leave."""
        want = any(m.cordon for m in granted)
        if not want:
            return node
        spec, notes = cordon.plan_cordon(node, want_cordon=True)
        union = sorted({*applied, *(m.name for m in granted)})
        if union != applied:
            notes[api.MAINTENANCES_ANNOTATION] = ",".join(union)
        if not spec and not notes:
            return node
        patch: dict[str, Any] = {"metadata": {"annotations": notes}}
        if spec:
            patch["spec"] = spec
        updated = await self._patch_node(node, patch)
        if spec:
            owners = ", ".join(m.name for m in granted if m.cordon)
            log.info("cordoned node", maintenance=owners, node=str(node["metadata"]["name"]))
            self.recorder.event(updated, "Normal", "Cordoned", f"cordoned by NodeMaintenance {owners}")
        return updated

    async def _pods(
        self, node: str, granted: list[api.Maintenance], now: datetime, *, released: str
    ) -> float | None:
        """Requests, withdrawals and evictions for every pod on the node; the soonest recheck."""
        drainers = [m for m in granted if m.drain and not m.invalid]
        retry: float | None = None
        first_error: ApiError | None = None
        blocks: dict[str, BlockingPod] = {}
        evicting_owners: set[str] = set()
        for pod in self.listers.node_pods(node):
            selecting = [m for m in drainers if m.options.selects(pod)]
            workload = self.listers.workload(pod)
            plan = drain.plan_pod(
                pod,
                draining=bool(selecting),
                timeout=drain.combine_timeouts([m.evacuation_timeout for m in selecting]),
                now=now,
                options=drain.combine([m.options for m in selecting]),
                workload=workload,
            )
            step = _Step(pod, plan, workload, selecting, node, released)
            try:
                wait = await self._act(step, now=now, blocks=blocks, evicting_owners=evicting_owners)
            except ApiError as exc:
                if exc.not_found:
                    continue
                if first_error is None or (first_error.conflict and not exc.conflict):
                    first_error = exc  # an error outranks a lost race in what the worker counts
                continue
            if wait is not None:
                retry = wait if retry is None else min(retry, wait)
        if blocks:
            self.state.blocks[node] = blocks
        else:
            self.state.blocks.pop(node, None)
        evicted = self.state.evicted.get(node)
        if evicted:  # forget what the cache now shows going or gone
            evicted &= {
                _uid(p)
                for p in self.listers.node_pods(node)
                if not (p.get("metadata") or {}).get("deletionTimestamp")
            }
            if not evicted:
                self.state.evicted.pop(node, None)
        if first_error is not None:
            raise first_error
        return retry

    def _sibling_leaving(self, step: _Step, evicting_owners: set[str]) -> str | None:
        """Another pod of the same owner being evicted or terminating: evictions go one by one."""
        uid = step.workload.owner_uid
        if not uid or not step.workload.evict_promptly:
            return None
        if uid in evicting_owners:
            return "another of its pods"
        evicted = self.state.evicted.get(step.node, set())
        for other in self.listers.pods.by_index(CONTROLLER_UID_INDEX, uid):
            if pod_key(other) == step.key or is_pod_terminal(other):
                continue
            if (other.get("metadata") or {}).get("deletionTimestamp") or _uid(other) in evicted:
                return pod_key(other)
        return None

    async def _act(
        self,
        step: _Step,
        *,
        now: datetime,
        blocks: dict[str, BlockingPod],
        evicting_owners: set[str],
    ) -> float | None:
        action, plan, pod = step.plan.action, step.plan, step.pod
        ns, name = step.key.split("/", 1)
        fields = {"maintenance": step.maintenance, "node": step.node, "pod": step.key}
        if action is drain.Action.REQUEST:
            message = step.drainers[0].reason if step.drainers else ""
            await drain.request_evacuation(self.client, pod, message=message, now=now)
            log.info("requested evacuation", **fields, owner=step.workload.describe())
            # Recheck at the deadline: a silent owner is then evicted.
            if plan.deadline is None:
                return None
            return max((plan.deadline - now).total_seconds(), 0.0) + 0.5
        if action is drain.Action.WITHDRAW:
            await drain.withdraw_evacuation(self.client, pod)
            log.info("withdrew evacuation request", **fields)
            return None
        if action is drain.Action.WAIT:
            if plan.deadline is None:
                return None
            return max((plan.deadline - now).total_seconds(), 0.0) + 0.5
        if action is drain.Action.BLOCK:
            block = BlockingPod(ns, name, plan.reason, plan.message)
            blocks[step.key] = block
            if self.state.blocks.get(step.node, {}).get(step.key) != block:
                log.info("eviction withheld", **fields, reason=plan.reason, message=plan.message)
            return None
        if action is not drain.Action.EVICT:
            return None
        if _uid(pod) in self.state.evicted.get(step.node, set()):
            return None  # evicted already; the cache has not caught up (its update re-enqueues the node)
        sibling = self._sibling_leaving(step, evicting_owners)
        if sibling is not None:
            blocks[step.key] = BlockingPod(
                ns,
                name,
                drain.BLOCK_ONE_AT_A_TIME,
                f"{step.workload.owner} is evicted one pod at a time; waiting for {sibling}",
            )
            return drain.EVICTION_RETRY_SECONDS
        options = drain.combine([m.options for m in step.drainers])
        outcome = await drain.evict(self.client, pod, grace_period_seconds=options.grace_period_seconds)
        if outcome.conflict:
            metrics.EVICTIONS.labels("conflict").inc()
            log.info("eviction conflicted, looking again", **fields, message=outcome.message)
            return outcome.retry_after
        metrics.EVICTIONS.labels(outcome.blocked_reason or "evicted").inc()
        failures = self.state.eviction_failures.setdefault(step.node, {})
        if outcome.blocked_reason == drain.BLOCK_EVICTION_FAILED:
            # A refusal that is not "not now" (a 500, e.g. a pod under two budgets) backs off per pod.
            failures[step.key] = failures.get(step.key, 0) + 1
            outcome = replace(outcome, retry_after=drain.failure_backoff(failures[step.key]))
        else:
            failures.pop(step.key, None)
        target = self.listers.maintenances.get(step.drainers[0].name) if step.drainers else None
        if outcome.blocked_reason is None:
            if step.workload.owner_uid:
                evicting_owners.add(step.workload.owner_uid)
            if _uid(pod):
                self.state.evicted.setdefault(step.node, set()).add(_uid(pod))
            log.info("evicted pod", **fields, why=plan.message)
            if target is not None:
                self.recorder.event(target, "Normal", "EvictedPod", f"evicted {step.key}: {plan.message}")
            return None
        log.info("eviction refused", **fields, reason=outcome.blocked_reason, message=outcome.message)
        block = BlockingPod(ns, name, outcome.blocked_reason, outcome.message)
        blocks[step.key] = block
        if target is not None and self.state.blocks.get(step.node, {}).get(step.key) != block:
            # One event per new refusal, not one per retry: the log has every attempt.
            self.recorder.event(target, "Warning", outcome.blocked_reason, f"{step.key}: {outcome.message}")
        return outcome.retry_after

    async def _commit(
        self,
        node: Obj,
        granted: list[api.Maintenance],
        selecting: list[api.Maintenance],
        wanted_names: list[str],
        waiting: set[str],
        now: datetime,
    ) -> int:
        """Uncordon if no one cordons any more, then record phase and the applied maintenances;
        returns how many pods are still to leave the node."""
        want_cordon = any(m.cordon for m in granted)
        spec, notes = cordon.plan_cordon(node, want_cordon=want_cordon)
        node_name = str(node["metadata"]["name"])
        pods = self.listers.node_pods(node_name)
        progresses: list[NodeProgress] = [
            node_progress(
                node=node,
                pods=pods,
                cordon=m.cordon,
                drain=m.drain,
                timeout=m.evacuation_timeout,
                now=now,
                lease_holder=self.state.waiting_for_lease(node_name, m.name),
                eviction_blocks=self.state.blocks.get(node_name),
                options=m.options,
                workload=self.listers.workload,
                invalid=m.invalid,
            )
            for m in selecting
        ]
        phase = node_phase(progresses)
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        applied_value = ",".join(wanted_names) or None
        if annotations.get(api.MAINTENANCES_ANNOTATION) != applied_value:
            notes[api.MAINTENANCES_ANNOTATION] = applied_value
        if annotations.get(api.PHASE_ANNOTATION) != phase:
            notes[api.PHASE_ANNOTATION] = phase
        pending = max((p.pending for p in progresses), default=0)
        blocked: dict[str, str] = {}
        for p in progresses:
            for b in p.blocking:
                blocked.setdefault(f"{b.namespace}/{b.name}", b.reason)
        self.state.gauges.set(node_name, phase=phase, pending=pending, blocked=blocked)
        if not spec and not notes:
            return pending
        patch: dict[str, Any] = {"metadata": {"annotations": notes}}
        if spec:
            patch["spec"] = spec
        updated = await self._patch_node(node, patch)
        if "unschedulable" in spec and spec["unschedulable"] is None:
            log.info("uncordoned node", node=node_name, maintenance=",".join(api.applied_maintenances(node)))
            self.recorder.event(
                updated, "Normal", "Uncordoned", "no NodeMaintenance cordons the node any more"
            )
        return pending


@dataclass(frozen=True, slots=True)
class _Step:
    """One pod's plan in a node sync, with who asked for it."""

    pod: Obj
    plan: drain.PodPlan
    workload: Workload
    drainers: list[api.Maintenance]
    node: str
    released: str  # the maintenances that no longer drain the node (for withdrawals)

    @property
    def key(self) -> str:
        return pod_key(self.pod)

    @property
    def maintenance(self) -> str:
        return ",".join(m.name for m in self.drainers) or self.released


class MaintenanceSync:
    def __init__(
        self,
        *,
        client: KubeClient,
        listers: Listers,
        state: DrainState,
        recorder: EventRecorder,
        enqueue_node: Callable[[str], None],
        clock: Callable[[], datetime] = utcnow,
        max_unschedulable: int | str,
    ) -> None:
        self.client = client
        self.listers = listers
        self.state = state
        self.recorder = recorder
        self.enqueue_node = enqueue_node
        self.clock = clock
        rollout.scaled(max_unschedulable, 100, field_name="--node-maintenance-max-unschedulable", minimum=0)
        self.max_unschedulable = max_unschedulable

    async def sync(self, name: str) -> None:
        obj = self.listers.maintenances.get(name)
        if obj is None:
            self.state.forget_maintenance(name)
            return
        m = api.Maintenance.from_obj(obj)
        if m.deleting:
            self.state.forget_maintenance(name)
            await self._finalize(obj, m)
            return
        if not m.has_finalizer:
            await self._add_finalizer(obj)
        await self._status(obj, m)

    async def _add_finalizer(self, obj: Obj) -> None:
        finalizers = (obj.get("metadata") or {}).get("finalizers")
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}]
        if finalizers:
            ops.append({"op": "add", "path": "/metadata/finalizers/-", "value": api.FINALIZER})
        else:
            ops.append({"op": "add", "path": "/metadata/finalizers", "value": [api.FINALIZER]})
        with drain.stale_plan_is_conflict():
            await self.client.patch(NODEMAINTENANCES, str(obj["metadata"]["name"]), ops, patch_type="json")

    async def _finalize(self, obj: Obj, m: api.Maintenance) -> None:
        """Remove the finalizer once no node lists us: cordons and requests are then undone."""
        if not m.has_finalizer:
            return
        holding = [str(n["metadata"]["name"]) for n in self.listers.nodes_applying(m.name)]
        if holding:
            for node in holding:
                self.enqueue_node(node)
            raise RequeueAfter(FINALIZER_RECHECK_SECONDS)
        finalizers = list((obj.get("metadata") or {}).get("finalizers") or [])
        index = finalizers.index(api.FINALIZER)
        ops = [
            {"op": "test", "path": f"/metadata/finalizers/{index}", "value": api.FINALIZER},
            {"op": "remove", "path": f"/metadata/finalizers/{index}"},
        ]
        try:
            with drain.stale_plan_is_conflict():
                await self.client.patch(NODEMAINTENANCES, m.name, ops, patch_type="json")
        except ApiError as exc:
            if not exc.not_found:
                raise
        self.recorder.event(
            obj, "Normal", "MaintenanceReleased", "nodes uncordoned and evacuation requests withdrawn"
        )

    def _progress(self, m: api.Maintenance, node: Obj, now: datetime) -> NodeProgress:
        node_name = str(node["metadata"]["name"])
        return node_progress(
            node=node,
            pods=self.listers.node_pods(node_name),
            cordon=m.cordon,
            drain=m.drain,
            timeout=m.evacuation_timeout,
            now=now,
            eviction_blocks=self.state.blocks.get(node_name),
            lease_holder=self.state.waiting_for_lease(node_name, m.name),
            options=m.options,
            workload=self.listers.workload,
            invalid=m.invalid,
        )

    def _targeted(self, m: api.Maintenance, node: str) -> int:
        if not m.drain:
            return 0
        return sum(1 for p in self.listers.node_pods(node) if drain.is_targeted(p) and m.options.selects(p))

    def _cluster(self, name: str, cordoning: frozenset[str]) -> rollout.Cluster:
        nodes = self.listers.nodes.list()
        names = {str(n["metadata"]["name"]) for n in nodes}
        cordoned = {str(n["metadata"]["name"]) for n in nodes if cordon.is_unschedulable(n)}
        cordoned |= (self.state.cordoning_elsewhere(name) | cordoning) & names
        cap = rollout.scaled(
            self.max_unschedulable, len(nodes), field_name="--node-maintenance-max-unschedulable", minimum=0
        )
        return rollout.Cluster(len(nodes), len(cordoned), cap)

    def _plan_nodes(self, obj: Obj, m: api.Maintenance, now: datetime) -> tuple[dict[str, NodeProgress], str]:
        """Every selected node's progress, starting the next ones the limits allow (rollout.py).

        Decided without a suspension point, so two maintenances never both take the last room the
        cluster-wide guard leaves. Returns the progress and why the guard holds this maintenance back.
        """
        selected = {str(n["metadata"]["name"]): n for n in self.listers.selected_nodes(m.selector)}
        if not m.paced:
            self.state.working.pop(m.name, None)
            self.state.held_by_cluster.discard(m.name)
            self.state.waiting.set(m.name, own=0, cluster=0)
            return {name: self._progress(m, node, now) for name, node in selected.items()}, ""
        before = self.state.working_on(m, obj)
        if not self.state.knows(m):  # first look since a start: cordons it holds count as started
            before = replace(
                before, cordoning=before.cordoning | {n for n, node in selected.items() if _holds(m, node)}
            )
        cordoning = before.cordoning & selected.keys()
        draining = before.draining & selected.keys()
        stage = draining if m.drain else cordoning
        progress = {
            n: self._progress(m if n in stage else replace(m, drain=False), selected[n], now)
            for n in sorted(cordoning | stage)
        }
        elsewhere = self.state.cordoning_elsewhere(m.name)
        candidates = [
            rollout.Candidate(
                name,
                started=name in stage,
                done=(
                    name in stage
                    and progress[name].phase == api.PHASE_DRAINED
                    and _advertised(node) == api.PHASE_DRAINED
                )
                if m.drain
                else cordon.is_unschedulable(node),
                unschedulable=cordon.is_unschedulable(node) or name in cordoning or name in elsewhere,
            )
            for name, node in selected.items()
        ]
        limit = m.concurrent_nodes(len(selected))
        admission = rollout.admit(
            candidates,
            limit=limit,
            cluster=self._cluster(m.name, cordoning),
            override=m.override_max_unschedulable,
            frozen=bool(m.invalid),
        )
        new = frozenset(admission.new)
        self.state.working[m.name] = rollout.Working(
            m.uid, cordoning | new, (draining | new) if m.drain else draining
        )
        self.state.waiting.set(
            m.name, own=len(admission.waiting) - len(admission.held), cluster=len(admission.held)
        )
        if admission.held_by_cluster:
            self.state.held_by_cluster.add(m.name)
        else:
            self.state.held_by_cluster.discard(m.name)
        for name in admission.new:
            progress[name] = self._progress(m, selected[name], now)
            log.info(
                "started maintenance on node",
                maintenance=m.name,
                node=name,
                in_progress=admission.in_progress,
                limit=limit,
            )
            self.recorder.event(
                obj,
                "Normal",
                "NodeStarted",
                f"node {name}: {admission.in_progress} of at most {limit} nodes in progress",
            )
            self.enqueue_node(name)
        for name, why in admission.waiting.items():
            node = selected[name]
            if name in cordoning:  # cordoned, its drain waits for its turn
                progress[name] = NodeProgress(
                    api.PHASE_CORDONED,
                    self._targeted(m, name),
                    unschedulable=cordon.is_unschedulable(node),
                    message=why,
                )
            else:
                progress[name] = NodeProgress(
                    api.PHASE_WAITING,
                    self._targeted(m, name),
                    unschedulable=cordon.is_unschedulable(node),
                    message=why,
                )
        return dict(sorted(progress.items())), admission.held_by_cluster

    async def _status(self, obj: Obj, m: api.Maintenance) -> None:
        now = self.clock()
        progress, held = self._plan_nodes(obj, m, now)
        previous: Mapping[str, Any] = obj.get("status") or {}
        written = self.state.written.get(m.name)
        if written is not None and written[0] == m.uid:
            # Only this controller writes the status: what it wrote last is the status, even while
            # the cache still holds an older copy of the object.
            previous = written[1]
        missing = missing_nodes(previous, lambda n: self.listers.nodes.get(n) is not None)
        status = build_status(m, previous, progress, now=now, missing=missing, held_by_cluster=held)
        if _same_status(previous, status):
            return
        body: dict[str, Any] = dict(status)
        stale = set(previous.get("nodes") or {}) - set(status["nodes"])
        if stale:
            body["nodes"] = {**status["nodes"], **dict.fromkeys(stale)}
        if not m.drain and "drainStartTime" in previous:
            body["drainStartTime"] = None
        await self.client.patch(NODEMAINTENANCES, m.name, {"status": body}, subresource="status")
        now_status = {**previous, **status}
        if body.get("drainStartTime", "") is None:
            now_status.pop("drainStartTime", None)
        self.state.written[m.name] = (m.uid, now_status)
        for name in missing:
            if (
                name not in (previous.get("nodes") or {})
                or (previous["nodes"][name] or {}).get("phase") != api.PHASE_NODE_NOT_FOUND
            ):
                log.info("selected node deleted before it drained", maintenance=m.name, node=name)
                self.recorder.event(
                    obj, "Warning", "NodeNotFound", f"node {name} was deleted before it drained"
                )
        self._announce(obj, m, previous, status, now)

    def _announce(self, obj: Obj, m: api.Maintenance, previous: Obj, status: Obj, now: datetime) -> None:
        before = _cond_status(previous, "Drained")
        after = _cond_status(status, "Drained")
        if after == "True" and before != "True":
            started = parse_time(status.get("drainStartTime"))
            if started is not None:
                metrics.DRAIN_DURATION.observe(max((now - started).total_seconds(), 0.0))
            log.info("maintenance drained", maintenance=m.name, nodes=status.get("nodeCount", 0))
            self.recorder.event(obj, "Normal", "Drained", f"{status.get('nodeCount', 0)} nodes drained")
        if _cond_status(status, "Blocked") == "True" and _cond_status(previous, "Blocked") != "True":
            msg = next(
                (c.get("message", "") for c in status.get("conditions") or [] if c.get("type") == "Blocked"),
                "",
            )
            log.info("drain blocked", maintenance=m.name, message=str(msg))
            self.recorder.event(obj, "Warning", "DrainBlocked", str(msg))
        if (
            _cond_status(status, "ClusterLimitReached") == "True"
            and _cond_status(previous, "ClusterLimitReached") != "True"
        ):
            msg = next(
                (
                    c.get("message", "")
                    for c in status.get("conditions") or []
                    if c.get("type") == "ClusterLimitReached"
                ),
                "",
            )
            log.info(
                "maintenance held back by the cluster's unschedulable limit",
                maintenance=m.name,
                message=str(msg),
            )
            self.recorder.event(obj, "Warning", "MaxUnschedulableReached", str(msg))
        if _cond_status(status, "SpecValid") == "False" and _cond_status(previous, "SpecValid") != "False":
            log.info("invalid maintenance spec", maintenance=m.name, message=m.invalid)
            self.recorder.event(obj, "Warning", "InvalidSpec", m.invalid)
        if (
            _cond_reason(status, "NodesSelected") == "NoNodesSelected"
            and _cond_reason(previous, "NodesSelected") != "NoNodesSelected"
        ):
            log.info("no node selected", maintenance=m.name)
            self.recorder.event(obj, "Warning", "NoNodesSelected", "spec.nodeSelector matches no node")


def _holds(m: api.Maintenance, node: Obj) -> bool:
    """`m` is applied on the node and a maintenance holds its cordon (it had started there)."""
    return m.name in api.applied_maintenances(node) and cordon.cordoned_by_us(node)


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _advertised(node: Obj) -> str | None:
    """The phase the node's own sync last wrote on it: a node is done once it says so itself."""
    return ((node.get("metadata") or {}).get("annotations") or {}).get(api.PHASE_ANNOTATION)


def _cond_reason(status: Obj, type_: str) -> str | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_:
            return str(cond.get("reason"))
    return None


def _cond_status(status: Obj, type_: str) -> str | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_:
            return str(cond.get("status"))
    return None


def _same_status(previous: Obj, status: Obj) -> bool:
    return all(previous.get(k) == v for k, v in status.items()) and (
        "drainStartTime" in status or "drainStartTime" not in previous
    )
