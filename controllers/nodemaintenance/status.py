"""Progress as users read it: per node counts and blocking pods, and the object's conditions.

Pure functions from listers' objects to the status dict so that the reconcile is easy to test and the
status is only written when it changes. Conditions follow `meta.SetStatusCondition`: the transition
time moves only when the status does.

Conditions, never True on an empty promise:
- `NodesSelected`: False (`NoNodesSelected`) when `spec.nodeSelector` matches no node; then neither
  `Cordoned` nor `Drained` is True either, so `kubectl wait --for=condition=Drained` fails on a typo.
- `Cordoned`: every selected node is unschedulable (False while cordoning or when cordon is off).
- `Drained`: drain is requested and no targeted pod is left on any selected node (the KEP's
  condition); False (`NodeNotFound`) when a selected node was deleted before it drained (its pods
  went with it, never asked), and False (`InvalidSpec`) when the spec cannot be acted on.
- `ClusterLimitReached`: True while the cluster-wide guard keeps this maintenance from starting a
  node its own limit allows (`--node-maintenance-max-unschedulable`); nothing is done meanwhile.
- `SpecValid`: False (`InvalidSpec`) when a field cannot be acted on; no node is started then.
- `Blocked`: some pods will not move on their own: an eviction refused (the message names the
  budget), failing, or not allowed without an opt-in (`force`, `deleteEmptyDirData`). Pods that
  are waiting for their owner or already terminating are listed but do not block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controllers.common.pods import pod_key
from controllers.nodemaintenance import api
from controllers.nodemaintenance.drain import (
    BLOCK_AWAITING_OWNER,
    BLOCK_ONE_AT_A_TIME,
    BLOCK_TERMINATING,
    Action,
    DrainOptions,
    PodPlan,
    is_targeted,
    plan_pod,
)
from controllers.nodemaintenance.workload import Answer, Workload
from kubeutil.conditions import set_status_condition
from kubeutil.timestamps import format_time

MAX_BLOCKING_PER_NODE = 20

COND_CORDONED = "Cordoned"
COND_DRAINED = "Drained"
COND_BLOCKED = "Blocked"
COND_NODES_SELECTED = "NodesSelected"
COND_CLUSTER_LIMIT = "ClusterLimitReached"
COND_SPEC_VALID = "SpecValid"
# Listed in blockingPods, but moving (or about to) on their own: not a reason for `Blocked`.
NOT_BLOCKING = frozenset({BLOCK_AWAITING_OWNER, BLOCK_TERMINATING, BLOCK_ONE_AT_A_TIME})


@dataclass(frozen=True, slots=True)
class BlockingPod:
    namespace: str
    name: str
    reason: str
    message: str = ""

    def as_dict(self) -> dict[str, str]:
        out = {"namespace": self.namespace, "name": self.name, "reason": self.reason}
        if self.message:
            out["message"] = self.message
        return out


@dataclass(frozen=True, slots=True)
class NodeProgress:
    phase: str
    pending: int = 0
    evacuating: int = 0
    blocking: tuple[BlockingPod, ...] = field(default_factory=tuple)
    unschedulable: bool = False
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "phase": self.phase,
            "podsPendingEvacuation": self.pending,
            "podsEvacuating": self.evacuating,
            "blockingPods": [b.as_dict() for b in self.blocking[:MAX_BLOCKING_PER_NODE]],
        }
        if self.message:
            out["message"] = self.message
        return out


def node_progress(
    *,
    node: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    cordon: bool,
    drain: bool,
    timeout: float,
    now: datetime,
    eviction_blocks: Mapping[str, BlockingPod] | None = None,
    lease_holder: str | None = None,
    options: DrainOptions | None = None,
    workload: Callable[[Mapping[str, Any]], Workload] | None = None,
    invalid: str = "",
) -> NodeProgress:
    """One node as one maintenance sees it.

    `eviction_blocks` are the node sync's last eviction outcomes, `lease_holder` who holds the
    node's lease when this maintenance waits for it, `workload` classifies a pod's owner.
    """
    unschedulable = bool((node.get("spec") or {}).get("unschedulable", False))
    if lease_holder is not None and (cordon or drain):
        return NodeProgress(
            api.PHASE_WAITING_FOR_LEASE,
            unschedulable=unschedulable,
            message=f"maintenance lease held by {lease_holder}",
        )
    if not drain or invalid:
        return NodeProgress(
            api.PHASE_CORDONED if cordon else api.PHASE_PLANNING, unschedulable=unschedulable, message=invalid
        )
    opts = options or DrainOptions()
    blocks = eviction_blocks or {}
    pending = evacuating = 0
    blocking: list[BlockingPod] = []
    for pod in pods:
        if not is_targeted(pod) or not opts.selects(pod):
            continue
        pending += 1
        work = workload(pod) if workload is not None else Workload(Answer.MAY)
        plan = plan_pod(pod, draining=True, timeout=timeout, now=now, options=opts, workload=work)
        meta = pod.get("metadata") or {}
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        if plan.action is Action.EVACUATING:
            evacuating += 1
        elif plan.action is Action.TERMINATING:
            blocking.append(BlockingPod(ns, name, BLOCK_TERMINATING, "waiting for the pod to terminate"))
        elif plan.action is Action.BLOCK:
            blocking.append(BlockingPod(ns, name, plan.reason, plan.message))
        elif pod_key(pod) in blocks:
            blocking.append(blocks[pod_key(pod)])
        else:
            blocking.append(BlockingPod(ns, name, BLOCK_AWAITING_OWNER, _awaiting(plan, work)))
    # A node is drained once its cordon holds too: before it, a pod may still be scheduled there.
    phase = api.PHASE_DRAINED if pending == 0 and (unschedulable or not cordon) else api.PHASE_DRAINING
    blocking.sort(key=lambda b: (b.namespace, b.name))
    return NodeProgress(phase, pending, evacuating, tuple(blocking), unschedulable)


def _awaiting(plan: PodPlan, work: Workload) -> str:
    if plan.action is Action.EVICT:
        return f"eviction due: {plan.message}"
    who = work.describe()
    if plan.action is Action.REQUEST:
        return f"EvacuationRequest not set yet ({who})"
    if plan.deadline is None:
        return f"no EvacuationInitiated yet ({who}); no eviction deadline (evacuationTimeoutSeconds: 0)"
    return f"no EvacuationInitiated yet ({who}); evicted after {format_time(plan.deadline)}"


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    *,
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: datetime,
    generation: int,
) -> list[dict[str, Any]]:
    """`meta.SetStatusCondition` on a copy of `conditions`."""
    out = [dict(cond) for cond in conditions]
    new = {
        "type": type_,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }
    set_status_condition(out, new, now)
    return out


def condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def _blocking_summary(nodes: Mapping[str, NodeProgress], limit: int = 3) -> tuple[int, str]:
    items = [(n, b) for n, p in sorted(nodes.items()) for b in p.blocking]
    names = ", ".join(f"{b.namespace}/{b.name} on {n} ({b.reason})" for n, b in items[:limit])
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return len(items), names + more


def build_status(
    m: api.Maintenance,
    previous: Mapping[str, Any],
    nodes: Mapping[str, NodeProgress],
    *,
    now: datetime,
    missing: Sequence[str] = (),
    held_by_cluster: str = "",
) -> dict[str, Any]:
    """The whole status of one maintenance from the progress of each selected node.

    `missing` are nodes this maintenance was working on that no longer exist and had not drained;
    `held_by_cluster` why the cluster-wide guard keeps it from starting its next node.
    """
    conds: list[dict[str, Any]] = [dict(c) for c in previous.get("conditions") or []]
    pending = sum(p.pending for p in nodes.values())
    cordoned = [n for n, p in nodes.items() if p.unschedulable]
    waiting = sorted(n for n, p in nodes.items() if p.phase == api.PHASE_WAITING_FOR_LEASE)
    gen = m.generation

    def put(type_: str, status: bool, reason: str, message: str) -> None:
        nonlocal conds
        conds = set_condition(
            conds, type_=type_, status=status, reason=reason, message=message, now=now, generation=gen
        )

    if nodes:
        put(COND_NODES_SELECTED, True, "NodesSelected", f"{len(nodes)} nodes selected")
        unselected = ""
    elif missing:
        unselected = "NodeNotFound"
        put(
            COND_NODES_SELECTED,
            False,
            unselected,
            f"the selected nodes were deleted: {', '.join(sorted(missing))}",
        )
    else:
        unselected = "NoNodesSelected"
        put(COND_NODES_SELECTED, False, unselected, "spec.nodeSelector matches no node")
    if not m.cordon:
        put(COND_CORDONED, False, "CordonNotRequested", "spec.cordon is false")
    elif unselected:
        put(COND_CORDONED, False, unselected, "no selected node exists")
    elif waiting:
        holders = "; ".join(f"{n}: {nodes[n].message}" for n in waiting)
        put(COND_CORDONED, False, "WaitingForLease", f"node lease held by someone else ({holders})")
    else:
        done = len(cordoned) == len(nodes)
        put(
            COND_CORDONED,
            done,
            "NodesCordoned" if done else "Cordoning",
            f"{len(cordoned)}/{len(nodes)} selected nodes unschedulable",
        )
    if not m.drain:
        put(COND_DRAINED, False, "DrainNotRequested", "spec.drain is false")
    elif m.invalid:
        put(COND_DRAINED, False, "InvalidSpec", m.invalid)
    elif missing:
        put(
            COND_DRAINED,
            False,
            "NodeNotFound",
            f"deleted before they drained: {', '.join(sorted(missing))} (their pods were not evacuated)",
        )
    elif unselected:
        put(COND_DRAINED, False, unselected, "spec.nodeSelector matches no node")
    else:
        drained = all(p.phase == api.PHASE_DRAINED for p in nodes.values())
        left = sum(1 for p in nodes.values() if p.phase != api.PHASE_DRAINED)
        msg = (
            f"{len(nodes)} nodes drained"
            if drained
            else (f"{pending} pods pending evacuation; {left} of {len(nodes)} nodes not drained yet")
        )
        put(COND_DRAINED, drained, "Drained" if drained else "Draining", msg)
    put(COND_SPEC_VALID, not m.invalid, "InvalidSpec" if m.invalid else "Valid", m.invalid)
    put(
        COND_CLUSTER_LIMIT,
        bool(held_by_cluster),
        "MaxUnschedulable" if held_by_cluster else "WithinLimit",
        held_by_cluster,
    )
    count, names = _blocking_summary(nodes)
    stuck = [b for p in nodes.values() for b in p.blocking if b.reason not in NOT_BLOCKING]
    put(
        COND_BLOCKED,
        bool(stuck),
        "PodsBlocking" if stuck else ("WaitingForOwners" if count else "NotBlocked"),
        f"{count} pods not moving yet: {names}" if count else "",
    )
    entries = {name: p.as_dict() for name, p in sorted(nodes.items())}
    for name in missing:
        entries[name] = {
            "phase": api.PHASE_NODE_NOT_FOUND,
            "podsPendingEvacuation": 0,
            "podsEvacuating": 0,
            "blockingPods": [],
            "message": "the node was deleted before it drained",
        }
    out: dict[str, Any] = {
        "observedGeneration": gen,
        "nodeCount": len(nodes),
        "podsPendingEvacuation": pending,
        "nodes": dict(sorted(entries.items())),
        "conditions": conds,
    }
    if m.drain:
        out["drainStartTime"] = previous.get("drainStartTime") or format_time(now)
    return out


# Phases of a node that lost nothing when it was deleted: never started, or drained already (the
# rolling phases after the drain included).
DRAINED_OR_NOT_STARTED = frozenset(
    {api.PHASE_DRAINED, api.PHASE_PLANNING, api.PHASE_WAITING, "InMaintenance", "Gating", "Completed"}
)


def missing_nodes(previous: Mapping[str, Any], exists: Callable[[str], bool]) -> list[str]:
    """Nodes the last status was working on (not yet drained) that no longer exist."""
    out = []
    for name, entry in (previous.get("nodes") or {}).items():
        phase = (entry or {}).get("phase")
        if phase not in DRAINED_OR_NOT_STARTED and not exists(name):
            out.append(name)
    return sorted(out)


def node_phase(progresses: Iterable[NodeProgress]) -> str | None:
    """The node annotation: the most advanced phase among its maintenances (None: not under maintenance)."""
    phases = [p.phase for p in progresses]
    if not phases:
        return None
    return max(phases, key=api.PHASE_ORDER.index)
