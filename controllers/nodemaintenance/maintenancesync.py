"""The maintenance reconcile: one maintenance's rollout, status and finalizer.

Which of its selected nodes a maintenance acts on is decided in the maintenance sync (`rollout.py`:
its `maxConcurrentNodes` and the cluster-wide guard), without a suspension point so two syncs never
both take the last room; the node sync acts only for maintenances started on its node (cordon
only while the node waits for its turn to drain). What started is kept in memory and, across
restarts, read back from the status the maintenance sync wrote.

The status comes from the listers (per node counts, blocking pods, conditions) and is written only
when it changed; the finalizer is added on sight and removed once no node lists the maintenance.
Only this controller writes the status, so the status it wrote last stands in for the cached copy:
a cache that lags behind never makes it write, or announce `Drained`, twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import structlog

from apiclient import ApiError, KubeClient
from apiclient.resources import NODEMAINTENANCES
from controllers.base import RequeueAfter
from controllers.common.patches import stale_plan_is_conflict
from controllers.context import EventRecorder
from controllers.nodemaintenance import api, cordon, drain, evictionrequests, metrics, rollout
from controllers.nodemaintenance.rolling import Decisions, RollingGates, overlay_status
from controllers.nodemaintenance.state import DrainState, Listers, holds_cordon, utcnow
from controllers.nodemaintenance.status import (
    NodeProgress,
    build_status,
    missing_nodes,
    node_progress,
)
from kubeutil.timestamps import parse_time

log = structlog.get_logger()

Obj = Mapping[str, Any]
FINALIZER_RECHECK_SECONDS = 10.0
# The soonest a rolling maintenance looks again by its own timers (gates, windows, soak time).
ROLLING_RECHECK_SECONDS = 1.0


@dataclass(kw_only=True, eq=False)
class MaintenanceSync:
    """Status and finalizer only: cheap reads and at most one write, so any worker may take any maintenance."""

    client: KubeClient
    listers: Listers
    state: DrainState
    recorder: EventRecorder
    enqueue_node: Callable[[str], None]
    clock: Callable[[], datetime] = utcnow
    max_unschedulable: int | str
    #: the rolling side (gates, completions); every maintenance with `spec.completion` goes through it
    rolling: RollingGates

    def __post_init__(self) -> None:
        # A bad value fails at construction (the manager's start), not at the first sync.
        rollout.scaled(
            self.max_unschedulable, 100, field_name="--node-maintenance-max-unschedulable", minimum=0
        )

    async def sync(self, name: str) -> None:
        obj = self.listers.maintenances.get(name)
        if obj is None:
            self.state.forget_maintenance(name)
            self.rolling.forget(name)
            return
        m = self.listers.maintenance(obj)
        if m.deleting:
            self.state.forget_maintenance(name)
            self.rolling.forget(name)
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
        with stale_plan_is_conflict():
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
            with stale_plan_is_conflict():
                await self.client.patch(NODEMAINTENANCES, m.name, ops, patch_type="json")
        except ApiError as exc:
            if not exc.not_found:
                raise
        self.recorder.event(
            obj, "Normal", "MaintenanceReleased", "nodes uncordoned and evacuation requests withdrawn"
        )

    def _progress(self, m: api.Maintenance, node: Obj, now: datetime) -> NodeProgress:
        node_name = str(node["metadata"]["name"])
        if m.by_eviction_request:
            return evictionrequests.node_progress(
                m,
                node=node,
                pods=self.listers.node_pods(node_name),
                request_of=self.listers.request_of,
                now=now,
                lease_holder=self.state.waiting_for_lease(node_name, m.name),
            )
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
        nodes = self.listers.nodes
        cordoned = {str(n["metadata"]["name"]) for n in self.listers.unschedulable_nodes()}
        cordoned |= {n for n in self.state.cordoning_elsewhere(name) | cordoning if nodes.get(n) is not None}
        cap = rollout.scaled(
            self.max_unschedulable, len(nodes), field_name="--node-maintenance-max-unschedulable", minimum=0
        )
        return rollout.Cluster(len(nodes), len(cordoned), cap)

    def _plan_nodes(
        self,
        obj: Obj,
        m: api.Maintenance,
        now: datetime,
        selected: dict[str, Obj],
        decisions: Decisions | None = None,
    ) -> tuple[dict[str, NodeProgress], str]:
        """Every selected node's progress, starting the next ones the limits allow (rollout.py).

        Decided without a suspension point, so two maintenances never both take the last room the
        cluster-wide guard leaves. Returns the progress and why the guard holds this maintenance back.
        A rolling maintenance's `decisions` release the nodes whose maintenance is done and may
        hold every start back (rolling.py).
        """
        if not m.paced:
            self.state.working.pop(m.name, None)
            self.state.held_by_cluster.discard(m.name)
            self.state.waiting.set(m.name, own=0, cluster=0)
            return {name: self._progress(m, node, now) for name, node in selected.items()}, ""
        before = self.state.working_on(m, obj)
        if not self.state.knows(m):  # first look since a start: cordons it holds count as started
            before = replace(
                before,
                cordoning=before.cordoning | {n for n, node in selected.items() if holds_cordon(m, node)},
            )
        released = frozenset(decisions.released) if decisions is not None else frozenset()
        cordoning = (before.cordoning & selected.keys()) - released
        draining = (before.draining & selected.keys()) - released
        stage = draining if m.drain else cordoning
        progress = {
            n: self._progress(m if n in stage else replace(m, drain=False), selected[n], now)
            for n in sorted(cordoning | stage)
        }
        if decisions is not None:
            for n in sorted(stage):
                node = selected[n]
                finished = (
                    progress[n].phase == api.PHASE_DRAINED and _advertised(node) == api.PHASE_DRAINED
                    if m.drain
                    else cordon.is_unschedulable(node)
                )
                if self.rolling.settle_drained(m, decisions, name=n, node=node, drained=finished, now=now):
                    cordoning, draining, stage = cordoning - {n}, draining - {n}, stage - {n}
            released = frozenset(decisions.released)
            for n in sorted(released & selected.keys()):
                progress[n] = NodeProgress(
                    api.PHASE_DRAINED, unschedulable=cordon.is_unschedulable(selected[n])
                )
        elsewhere = self.state.cordoning_elsewhere(m.name)
        candidates = [
            rollout.Candidate(
                name,
                started=name in stage or name in released,
                done=_rolled(decisions, name)
                if decisions is not None
                else (
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
            hold=decisions.hold.message if decisions is not None and decisions.hold.reason else "",
        )
        new = frozenset(admission.new)
        if decisions is not None:
            for name in new:
                self.rolling.record_start(
                    decisions, name=name, node=selected[name], pods=self.listers.node_pods(name)
                )
        # A node the rollout released in this sync is let go once the status saying so is written.
        letting_go = frozenset(decisions.newly_released) if decisions is not None else frozenset()
        self.state.working[m.name] = rollout.Working(
            m.uid, cordoning | new | letting_go, ((draining | new) if m.drain else draining) | letting_go
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
            if name in released:
                continue
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
        previous: Mapping[str, Any] = obj.get("status") or {}
        written = self.state.written.get(m.name)
        if written is not None and written[0] == m.uid:
            # Only this controller writes the status: what it wrote last is the status, even while
            # the cache still holds an older copy of the object.
            previous = written[1]
        selected = {str(n["metadata"]["name"]): n for n in self.listers.selected_nodes(m.selector)}
        decisions = None
        if m.rolling is not None and m.paced:
            decisions = await self.rolling.prepare(
                obj, m, m.rolling, previous, nodes=selected, now=self.clock()
            )
            now = self.clock()
        progress, held = self._plan_nodes(obj, m, now, selected, decisions)
        missing = missing_nodes(previous, lambda n: self.listers.nodes.get(n) is not None)
        status = build_status(m, previous, progress, now=now, missing=missing, held_by_cluster=held)
        if decisions is not None:
            overlay_status(status, decisions)
        wake = decisions.wake if decisions is not None else None
        await self._write(obj, m, previous, status, missing, now)
        if decisions is not None:  # acted on and announced once written: a lost write is decided again
            self._let_go(m, decisions.newly_released)
            self.rolling.publish(obj, m, decisions, total=len(progress))
        if wake is not None:
            raise RequeueAfter(max((wake - self.clock()).total_seconds(), ROLLING_RECHECK_SECONDS))

    def _let_go(self, m: api.Maintenance, nodes: set[str]) -> None:
        """The nodes a rolling maintenance released: the node syncs uncordon and withdraw there."""
        if not nodes:
            return
        working = self.state.working.get(m.name)
        if working is not None and working.uid == m.uid:
            self.state.working[m.name] = replace(
                working, cordoning=working.cordoning - nodes, draining=working.draining - nodes
            )
        for node in sorted(nodes):
            self.enqueue_node(node)

    async def _write(
        self,
        obj: Obj,
        m: api.Maintenance,
        previous: Obj,
        status: dict[str, Any],
        missing: list[str],
        now: datetime,
    ) -> None:
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


def _rolled(decisions: Decisions, name: str) -> bool:
    """A rolling maintenance's node is done once it passed its gates, not when it drained."""
    record = decisions.records.get(name)
    return record is not None and record.phase == "Completed"


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


def _pruned(value: Any) -> Any:
    """Without null fields: a null in a merge patch removes the field, so both read the same."""
    if isinstance(value, Mapping):
        return {k: _pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _same_status(previous: Obj, status: Obj) -> bool:
    return all(_pruned(previous.get(k)) == _pruned(v) for k, v in status.items()) and (
        "drainStartTime" in status or "drainStartTime" not in previous
    )
