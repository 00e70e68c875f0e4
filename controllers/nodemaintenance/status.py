"""Progress as users read it: per node counts and blocking pods, and the object's conditions.

Pure functions from listers' objects to the status dict so that the reconcile is easy to test and the
status is only written when it changes. Conditions follow `meta.SetStatusCondition`: the transition
time moves only when the status does.

Conditions:
- `Cordoned`: every selected node is unschedulable (False while cordoning or when cordon is off).
- `Drained`: drain is requested and no targeted pod is left on any selected node (the KEP's condition).
- `Blocked`: some pods are not moving (eviction refused by a PDB, failing, or the owner has not
  answered yet); the message names the first few, so a stuck drain is never silent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controllers.nodemaintenance import api
from controllers.nodemaintenance.drain import (
    BLOCK_AWAITING_OWNER,
    BLOCK_TERMINATING,
    Action,
    format_time,
    is_targeted,
    plan_pod,
    pod_key,
)

MAX_BLOCKING_PER_NODE = 20

COND_CORDONED = "Cordoned"
COND_DRAINED = "Drained"
COND_BLOCKED = "Blocked"


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "podsPendingEvacuation": self.pending,
            "podsEvacuating": self.evacuating,
            "blockingPods": [b.as_dict() for b in self.blocking[:MAX_BLOCKING_PER_NODE]],
        }


def node_progress(
    *,
    node: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    cordon: bool,
    drain: bool,
    timeout: float,
    now: datetime,
    eviction_blocks: Mapping[str, BlockingPod] | None = None,
    lease_granted: bool = True,
) -> NodeProgress:
    """One node as one maintenance sees it; `eviction_blocks` are the drain's last eviction failures."""
    unschedulable = bool((node.get("spec") or {}).get("unschedulable", False))
    if not lease_granted and (cordon or drain):
        return NodeProgress(api.PHASE_WAITING_FOR_LEASE, unschedulable=unschedulable)
    if not drain:
        return NodeProgress(api.PHASE_CORDONED if cordon else api.PHASE_PLANNING, unschedulable=unschedulable)
    blocks = eviction_blocks or {}
    pending = evacuating = 0
    blocking: list[BlockingPod] = []
    for pod in pods:
        if not is_targeted(pod):
            continue
        pending += 1
        plan = plan_pod(pod, draining=True, timeout=timeout, now=now)
        meta = pod.get("metadata") or {}
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        if plan.action is Action.EVACUATING:
            evacuating += 1
        elif pod_key(pod) in blocks:
            blocking.append(blocks[pod_key(pod)])
        elif plan.action is Action.TERMINATING:
            blocking.append(BlockingPod(ns, name, BLOCK_TERMINATING, "waiting for the pod to terminate"))
        else:
            when = f"evicted after {format_time(plan.deadline)}" if plan.deadline else "eviction due"
            blocking.append(BlockingPod(ns, name, BLOCK_AWAITING_OWNER, f"no EvacuationInitiated yet; {when}"))
    phase = api.PHASE_DRAINED if pending == 0 else api.PHASE_DRAINING
    blocking.sort(key=lambda b: (b.namespace, b.name))
    return NodeProgress(phase, pending, evacuating, tuple(blocking), unschedulable)


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
    """`meta.SetStatusCondition`: replace by type, keep the transition time unless status flips."""
    value = "True" if status else "False"
    out: list[dict[str, Any]] = []
    found = False
    for cond in conditions:
        if cond.get("type") != type_:
            out.append(dict(cond))
            continue
        found = True
        moved = cond.get("status") != value
        out.append(
            {
                "type": type_,
                "status": value,
                "reason": reason,
                "message": message,
                "observedGeneration": generation,
                "lastTransitionTime": format_time(now) if moved else cond.get("lastTransitionTime") or format_time(now),
            }
        )
    if not found:
        out.append(
            {
                "type": type_,
                "status": value,
                "reason": reason,
                "message": message,
                "observedGeneration": generation,
                "lastTransitionTime": format_time(now),
            }
        )
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
) -> dict[str, Any]:
    """The whole status of one maintenance from the progress of each selected node."""
    conds: list[dict[str, Any]] = [dict(c) for c in previous.get("conditions") or []]
    pending = sum(p.pending for p in nodes.values())
    cordoned = [n for n, p in nodes.items() if p.unschedulable]
    waiting = sorted(n for n, p in nodes.items() if p.phase == api.PHASE_WAITING_FOR_LEASE)
    gen = m.generation
    if not m.cordon:
        conds = set_condition(conds, type_=COND_CORDONED, status=False, reason="CordonNotRequested",
                              message="spec.cordon is false", now=now, generation=gen)
    elif waiting:
        conds = set_condition(conds, type_=COND_CORDONED, status=False, reason="WaitingForLease",
                              message="node lease held by someone else: " + ", ".join(waiting),
                              now=now, generation=gen)
    else:
        done = len(cordoned) == len(nodes)
        conds = set_condition(conds, type_=COND_CORDONED, status=done,
                              reason="NodesCordoned" if done else "Cordoning",
                              message=f"{len(cordoned)}/{len(nodes)} selected nodes unschedulable",
                              now=now, generation=gen)
    if not m.drain:
        conds = set_condition(conds, type_=COND_DRAINED, status=False, reason="DrainNotRequested",
                              message="spec.drain is false", now=now, generation=gen)
    else:
        drained = pending == 0 and not waiting
        if drained:
            msg = "no node matches spec.nodeSelector" if not nodes else f"{len(nodes)} nodes drained"
        else:
            msg = f"{pending} pods pending evacuation on {sum(1 for p in nodes.values() if p.pending)} nodes"
        conds = set_condition(conds, type_=COND_DRAINED, status=drained,
                              reason="Drained" if drained else "Draining", message=msg, now=now, generation=gen)
    count, names = _blocking_summary(nodes)
    stuck = [b for p in nodes.values() for b in p.blocking if b.reason != BLOCK_AWAITING_OWNER]
    conds = set_condition(conds, type_=COND_BLOCKED, status=bool(stuck),
                          reason="PodsBlocking" if stuck else ("WaitingForOwners" if count else "NotBlocked"),
                          message=f"{count} pods not moving: {names}" if count else "",
                          now=now, generation=gen)
    out: dict[str, Any] = {
        "observedGeneration": gen,
        "nodeCount": len(nodes),
        "podsPendingEvacuation": pending,
        "nodes": {name: p.as_dict() for name, p in sorted(nodes.items())},
        "conditions": conds,
    }
    if m.drain:
        out["drainStartTime"] = previous.get("drainStartTime") or format_time(now)
    return out


def node_phase(progresses: Iterable[NodeProgress]) -> str | None:
    """The node annotation: the most advanced phase among its maintenances (None: not under maintenance)."""
    phases = [p.phase for p in progresses]
    if not phases:
        return None
    return max(phases, key=api.PHASE_ORDER.index)
