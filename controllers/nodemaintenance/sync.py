"""The two reconciles: one node against every maintenance, and one maintenance's status and finalizer.

Node sync (sharded by node name): the desired state of a node is a function of *all* active
maintenances that select it, so overlapping maintenances compose instead of fighting: the node is
cordoned while any of them cordons, its pods carry our EvacuationRequest while any of them drains,
and it is uncordoned only when none is left (and only if it was schedulable before). Order inside
one sync: cordon first (the KEP's prerequisite for drain), then the pods (requests, withdrawals,
eviction fallback), and last the node annotation listing the maintenances applied; that annotation is
the commit record a deleted maintenance waits for before its finalizer goes.

Maintenance sync: status from the listers (per node counts, blocking pods, conditions), written
only when it changed; the finalizer added on sight and removed once no node lists the maintenance.
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
from controllers.context import EventRecorder
from controllers.nodemaintenance import api, cordon, drain, metrics
from controllers.nodemaintenance.leasegate import LeaseGate
from controllers.nodemaintenance.nodeselector import selector_matches
from controllers.nodemaintenance.status import (
    BlockingPod,
    NodeProgress,
    build_status,
    node_phase,
    node_progress,
)
from informers import NODE_NAME_INDEX, Lister

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
    lease_waiting: dict[str, set[str]] = field(default_factory=dict)
    #: node -> pod key -> evictions of that pod that failed in a row (not 429s: those are "not now")
    eviction_failures: dict[str, dict[str, int]] = field(default_factory=dict)
    gauges: metrics.NodeGauges = field(default_factory=metrics.NodeGauges)

    def forget_node(self, node: str) -> None:
        self.blocks.pop(node, None)
        self.lease_waiting.pop(node, None)
        self.eviction_failures.pop(node, None)
        self.gauges.set(node, phase=None, pending=0)


@dataclass
class Listers:
    maintenances: Lister
    nodes: Lister
    pods: Lister

    def all_maintenances(self) -> list[api.Maintenance]:
        return [api.Maintenance.from_obj(o) for o in self.maintenances.list()]

    def node_pods(self, node: str) -> list[dict[str, Any]]:
        return self.pods.by_index(NODE_NAME_INDEX, node)


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
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.client = client
        self.listers = listers
        self.state = state
        self.gate = gate
        self.recorder = recorder
        self.enqueue_maintenance = enqueue_maintenance
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
            [m for m in self.listers.all_maintenances() if m.active and selector_matches(m.selector, node)]
        )
        granted, waiting = await self._leases(node_name, selecting)
        wanted_names = sorted(m.name for m in selecting)
        now = self.clock()
        try:
            node = await self._cordon_first(node, granted, applied)
            retry = await self._pods(node_name, granted, now)
            await self._commit(node, granted, selecting, wanted_names, waiting, now)
        finally:
            for name in {*applied, *wanted_names}:
                self.enqueue_maintenance(name)
        for name in applied:
            if name not in wanted_names:
                await self.gate.release(node=node_name, holder=f"aiokcm/nodemaintenance/{name}")
        if waiting:
            retry = min(retry or LEASE_RETRY_SECONDS, LEASE_RETRY_SECONDS)
        if retry is not None:
            raise RequeueAfter(retry)

    async def _leases(
        self, node: str, selecting: list[api.Maintenance]
    ) -> tuple[list[api.Maintenance], set[str]]:
        granted: list[api.Maintenance] = []
        waiting: set[str] = set()
        for m in selecting:
            if not (m.cordon or m.drain):
                granted.append(m)
                continue
            decision = await self.gate.acquire(node=node, holder=m.holder)
            if decision.granted:
                granted.append(m)
            else:
                waiting.add(m.name)
                target = self.listers.maintenances.get(m.name)
                if target is not None and m.name not in self.state.lease_waiting.get(node, set()):
                    self.recorder.event(target, "Warning", "WaitingForLease",
                                        f"node {node}: maintenance lease held by {decision.holder}")
        if waiting:
            self.state.lease_waiting[node] = waiting
        else:
            self.state.lease_waiting.pop(node, None)
        return granted, waiting

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
            self.recorder.event(updated, "Normal", "Cordoned", f"cordoned by NodeMaintenance {owners}")
        return updated

    async def _pods(self, node: str, granted: list[api.Maintenance], now: datetime) -> float | None:
        """Requests, withdrawals and evictions for every pod on the node; the soonest recheck."""
        drainers = [m for m in granted if m.drain]
        timeout = min((m.evacuation_timeout for m in drainers), default=api.DEFAULT_EVACUATION_TIMEOUT_SECONDS)
        message = drainers[0].reason if drainers else ""
        retry: float | None = None
        first_error: Exception | None = None
        blocks: dict[str, BlockingPod] = {}
        for pod in self.listers.node_pods(node):
            plan = drain.plan_pod(pod, draining=bool(drainers), timeout=timeout, now=now)
            try:
                wait = await self._act(pod, plan, message=message, now=now, blocks=blocks, drainer=drainers)
            except ApiError as exc:
                if exc.not_found:
                    continue
                first_error = first_error or exc
                continue
            if wait is not None:
                retry = wait if retry is None else min(retry, wait)
        if blocks:
            self.state.blocks[node] = blocks
        else:
            self.state.blocks.pop(node, None)
        if first_error is not None:
            raise first_error
        return retry

    async def _act(
        self,
        pod: Obj,
        plan: drain.PodPlan,
        *,
        message: str,
        now: datetime,
        blocks: dict[str, BlockingPod],
        drainer: list[api.Maintenance],
    ) -> float | None:
        action = plan.action
        if action is drain.Action.REQUEST:
            await drain.request_evacuation(self.client, pod, message=message, now=now)
            # Recheck at the deadline: a silent owner is then evicted.
            return max(drainer[0].evacuation_timeout, 0.0) + 0.5 if drainer else None
        if action is drain.Action.WITHDRAW:
            await drain.withdraw_evacuation(self.client, pod)
            return None
        if action is drain.Action.WAIT and plan.deadline is not None:
            return max((plan.deadline - now).total_seconds(), 0.0) + 0.5
        if action is drain.Action.EVICT:
            outcome = await drain.evict(self.client, pod)
            metrics.EVICTIONS.labels(outcome.blocked_reason or "evicted").inc()
            meta = pod.get("metadata") or {}
            ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
            target = self.listers.maintenances.get(drainer[0].name) if drainer else None
            failures = self.state.eviction_failures.setdefault(str((pod.get("spec") or {}).get("nodeName", "")), {})
            if outcome.blocked_reason == drain.BLOCK_EVICTION_FAILED:
                failures[drain.pod_key(pod)] = failures.get(drain.pod_key(pod), 0) + 1
                outcome = replace(outcome, retry_after=drain.failure_backoff(failures[drain.pod_key(pod)]))
            else:
                failures.pop(drain.pod_key(pod), None)
            if outcome.blocked_reason is None:
                if target is not None:
                    self.recorder.event(target, "Normal", "EvictedPod",
                                        f"evicted {ns}/{name}: its owner did not answer the EvacuationRequest")
                return None
            blocks[drain.pod_key(pod)] = BlockingPod(ns, name, outcome.blocked_reason, outcome.message)
            if target is not None:
                self.recorder.event(target, "Warning", outcome.blocked_reason, f"{ns}/{name}: {outcome.message}")
            return outcome.retry_after
        return None

    async def _commit(
        self,
        node: Obj,
        granted: list[api.Maintenance],
        selecting: list[api.Maintenance],
        wanted_names: list[str],
        waiting: set[str],
        now: datetime,
    ) -> None:
        """Uncordon if no one cordons any more, then record phase and the applied maintenances."""
        want_cordon = any(m.cordon for m in granted)
        spec, notes = cordon.plan_cordon(node, want_cordon=want_cordon)
        pods = self.listers.node_pods(str(node["metadata"]["name"]))
        progresses: list[NodeProgress] = [
            node_progress(node=node, pods=pods, cordon=m.cordon, drain=m.drain, timeout=m.evacuation_timeout,
                          now=now, lease_granted=m.name not in waiting)
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
        node_name = str(node["metadata"]["name"])
        self.state.gauges.set(node_name, phase=phase, pending=pending)
        if not spec and not notes:
            return
        patch: dict[str, Any] = {"metadata": {"annotations": notes}}
        if spec:
            patch["spec"] = spec
        updated = await self._patch_node(node, patch)
        if "unschedulable" in spec and spec["unschedulable"] is None:
            self.recorder.event(updated, "Normal", "Uncordoned", "no NodeMaintenance cordons the node any more")


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
    ) -> None:
        self.client = client
        self.listers = listers
        self.state = state
        self.recorder = recorder
        self.enqueue_node = enqueue_node
        self.clock = clock

    async def sync(self, name: str) -> None:
        obj = self.listers.maintenances.get(name)
        if obj is None:
            return
        m = api.Maintenance.from_obj(obj)
        if m.deleting:
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
        await self.client.patch(NODEMAINTENANCES, str(obj["metadata"]["name"]), ops, patch_type="json")

    async def _finalize(self, obj: Obj, m: api.Maintenance) -> None:
        """Remove the finalizer once no node lists us: cordons and requests are then undone."""
        if not m.has_finalizer:
            return
        holding = [str(n["metadata"]["name"]) for n in self.listers.nodes.list()
                   if m.name in api.applied_maintenances(n)]
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
            await self.client.patch(NODEMAINTENANCES, m.name, ops, patch_type="json")
        except ApiError as exc:
            if not exc.not_found:
                raise
        self.recorder.event(obj, "Normal", "MaintenanceReleased", "nodes uncordoned and evacuation requests withdrawn")

    async def _status(self, obj: Obj, m: api.Maintenance) -> None:
        now = self.clock()
        progress: dict[str, NodeProgress] = {}
        for node in self.listers.nodes.list():
            if not selector_matches(m.selector, node):
                continue
            node_name = str(node["metadata"]["name"])
            progress[node_name] = node_progress(
                node=node,
                pods=self.listers.node_pods(node_name),
                cordon=m.cordon,
                drain=m.drain,
                timeout=m.evacuation_timeout,
                now=now,
                eviction_blocks=self.state.blocks.get(node_name),
                lease_granted=m.name not in self.state.lease_waiting.get(node_name, set()),
            )
        previous: Mapping[str, Any] = obj.get("status") or {}
        status = build_status(m, previous, progress, now=now)
        if _same_status(previous, status):
            return
        body: dict[str, Any] = dict(status)
        stale = set(previous.get("nodes") or {}) - set(progress)
        if stale:
            body["nodes"] = {**status["nodes"], **dict.fromkeys(stale)}
        if not m.drain and "drainStartTime" in previous:
            body["drainStartTime"] = None
        await self.client.patch(NODEMAINTENANCES, m.name, {"status": body}, subresource="status")
        self._announce(obj, m, previous, status, now)

    def _announce(self, obj: Obj, m: api.Maintenance, previous: Obj, status: Obj, now: datetime) -> None:
        before = _cond_status(previous, "Drained")
        after = _cond_status(status, "Drained")
        if after == "True" and before != "True":
            started = drain.parse_time(status.get("drainStartTime"))
            if started is not None:
                metrics.DRAIN_DURATION.observe(max((now - started).total_seconds(), 0.0))
            self.recorder.event(obj, "Normal", "Drained", f"{status.get('nodeCount', 0)} nodes drained")
        if _cond_status(status, "Blocked") == "True" and _cond_status(previous, "Blocked") != "True":
            msg = next((c.get("message", "") for c in status.get("conditions") or [] if c.get("type") == "Blocked"), "")
            self.recorder.event(obj, "Warning", "DrainBlocked", str(msg))
        if status.get("nodeCount") == 0 and previous.get("nodeCount") != 0:
            self.recorder.event(obj, "Warning", "NoNodesSelected", "spec.nodeSelector matches no node")


def _cond_status(status: Obj, type_: str) -> str | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_:
            return str(cond.get("status"))
    return None


def _same_status(previous: Obj, status: Obj) -> bool:
    return all(previous.get(k) == v for k, v in status.items()) and (
        "drainStartTime" in status or "drainStartTime" not in previous
    )
