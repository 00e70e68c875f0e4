"""Evacuation by surge (KEP-4212, gate `NodeMaintenanceDeployment`).

A pod asked to leave its node (`EvacuationRequest=True`) is not simply deleted: the Deployment
first creates a replacement elsewhere (the node is cordoned, so the scheduler places it on
another node), waits until it is available, and only then scales the ReplicaSet back down; the
ReplicaSet controller deletes evacuation-requested pods first when it scales down. Even a single
replica never leaves the application without an available pod.

Who does what:
- This controller marks the ReplicaSets of every Deployment that can answer with
  `deployment.kubernetes.io/evacuation-ready` and removes the mark when it no longer can. The
  ReplicaSet controller answers requests (`EvacuationInitiated=True`) only on marked ReplicaSets,
  and publishes how many of its pods are asked to leave as `maintenance.aiokcm.io/replicas-to-evacuate`.
- This controller sums those counts into the same annotation on the Deployment (absent means 0),
  written in the same `/status` write as the rest of the sync's status.

Who can answer: a RollingUpdate Deployment whose `maxSurge` resolves above 0. `Recreate` and
`maxSurge: 0` Deployments are never marked, so their pods are not answered and the drain falls
back to eviction (which honours PodDisruptionBudgets) after its wait.

The steps, each a pure function of the Deployment, the ReplicaSet and its pods (`plan`), taken
only in a steady state (one active ReplicaSet) and only when the ReplicaSet has *settled* (its
status has observed its spec, and the pod cache agrees on the pod count), so a step never
acts on a scale-down the ReplicaSet controller has not carried out yet:
1. surge: spec = replicas + min(requested, maxSurge): every requested pod the budget allows is
   replaced in one step, and a surge under way is topped up when more pods are asked to leave;
2. wait until the surge is available: a requested pod is released only while the available
   pods stay at or above `spec.replicas` (an unavailable requested pod can go at any time);
3. release: scale down by as many as that allows; the ReplicaSet controller deletes requested
   pods first;
4. repeat until no pod is requested; then the ordinary rollout logic scales back to
   `spec.replicas` (which is also what happens when the maintenance ends early: surge pods
   not needed any more are removed, not-ready ones first).
Evacuation never takes availability below `spec.replicas`, stricter than the
`replicas - maxUnavailable` a rollout allows. If other pods are broken it waits (the drain's
own deadline then applies).

Interplay:
- A rollout in progress (more than one active ReplicaSet) is left to the rolling update: it
  replaces every old pod within the same surge budget and the ReplicaSet controller deletes
  requested pods first, so old pods leave the node as the rollout moves; requested pods of the
  new ReplicaSet are evacuated once the rollout is done. A rollout starting in the middle of an
  evacuation absorbs the surge: the surplus pods count against `maxSurge` like any other.
- `paused`: pausing stops template rollouts, not scaling, and evacuation is scaling: a paused
  Deployment with one active ReplicaSet evacuates. Paused in the middle of a rollout nothing
  moves, so the mark is removed and the drain falls back to eviction.
- Scaling by a user or an autoscaler during an evacuation: the next step is planned from the new
  `spec.replicas` (the surge stays within the new budget); scaling down removes requested pods
  first, so it only speeds the evacuation up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from controllers.common.deploymentstrategy import is_rolling_update, max_surge, replicas
from controllers.common.evacuation import (
    EVACUATION_READY_ANNOTATION,
    REPLICAS_TO_EVACUATE_ANNOTATION,
    count_annotation_patch,
    has_evacuation_request,
    is_evacuation_ready,
    replicas_to_evacuate,
)
from controllers.common.pods import is_pod_active, is_pod_available
from controllers.deployment.sync import RS, DeploymentSync
from controllers.deployment.util import (
    annotations_of,
    filter_active,
    is_paused,
    meta,
    min_ready_seconds,
    name_of,
    status_int,
)

Obj = Mapping[str, Any]
log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class EvacuationPlan:
    """What to do with the ReplicaSet now: `replicas` None means leave it as it is."""

    replicas: int | None
    requested: int
    step: str  # "settling" | "idle" | "surge" | "wait" | "release"


def can_answer(d: Obj, active_rss: Sequence[Obj]) -> bool:
    """Whether this Deployment will move requested pods by surging (and so may be marked)."""
    if meta(d).get("deletionTimestamp") or not is_rolling_update(d) or max_surge(d) <= 0:
        return False
    return not (is_paused(d) and len(active_rss) > 1)


def steady_replica_set(d: Obj, new_rs: RS | None, old_rss: Sequence[RS]) -> RS | None:
    """The one ReplicaSet evacuation works on: the only active one, if no rollout is pending."""
    active = filter_active([*old_rss, new_rs])
    if len(active) != 1:
        return None
    rs = active[0]
    if rs is new_rs or is_paused(d):
        return rs
    return None


def settled(rs: Obj, active_pods: Sequence[Obj]) -> bool:
    """The ReplicaSet controller has carried out the last spec change and our pod cache agrees."""
    st = rs.get("status") or {}
    observed = int(st.get("observedGeneration") or 0) >= int(meta(rs).get("generation") or 0)
    return observed and status_int(rs, "replicas") == replicas(rs) and len(active_pods) == replicas(rs)


def scale_unobserved(rs: Obj) -> bool:
    """The ReplicaSet controller has not yet observed the ReplicaSet's last spec change; its status
    write for it (which raises `observedGeneration`) is still to come."""
    st = rs.get("status") or {}
    return int(st.get("observedGeneration") or 0) < int(meta(rs).get("generation") or 0)


def requested_pods(pods: Sequence[Obj]) -> list[Obj]:
    return [p for p in pods if is_pod_active(p) and has_evacuation_request(p)]


def plan(d: Obj, rs: Obj, pods: Sequence[Obj], *, now: datetime) -> EvacuationPlan:
    """The next evacuation step for the steady ReplicaSet `rs` owning `pods`."""
    active = [p for p in pods if is_pod_active(p)]
    requested = [p for p in active if has_evacuation_request(p)]
    r = len(requested)
    if not settled(rs, active):
        return EvacuationPlan(None, r, "settling")
    base = replicas(d)
    spec = replicas(rs)
    if r == 0:
        return EvacuationPlan(base, 0, "idle")
    budget = max_surge(d)
    surge = spec - base
    if surge <= 0:
        return EvacuationPlan(base + min(r, budget), r, "surge")
    min_ready = min_ready_seconds(d)
    available = sum(1 for p in active if is_pod_available(p, min_ready, now))
    unavailable_requested = sum(1 for p in requested if not is_pod_available(p, min_ready, now))
    release = min(surge, r, max(0, available - base) + unavailable_requested)
    if release > 0:
        return EvacuationPlan(spec - release, r, "release")
    if surge > budget:
        # spec.replicas or maxSurge went down mid-surge: stay within the new budget.
        return EvacuationPlan(base + budget, r, "release")
    if surge < min(r, budget):
        # More pods were asked to leave since the surge started: replace them too, now.
        return EvacuationPlan(base + min(r, budget), r, "surge")
    return EvacuationPlan(spec, r, "wait")


async def reconcile(
    s: DeploymentSync, d: RS, rs: RS, pods: Sequence[Obj], *, now: datetime
) -> EvacuationPlan:
    """Carry out `plan` on the ReplicaSet; the caller syncs the Deployment's status afterwards.

    A step is one scale of the ReplicaSet, announced as KCM announces any scale (one
    `ScalingReplicaSet` event, "Scaled up/down replica set ..."), whatever the number of pods
    it moves."""
    step = plan(d, rs, pods, now=now)
    if step.replicas is None or step.replicas == replicas(rs):
        return step
    op = "up" if step.step == "surge" else "down"
    await s.scale_replica_set(rs, step.replicas, d, op)
    log.info(
        "evacuation step",
        step=step.step,
        replicaset=name_of(rs),
        replicas=step.replicas,
        requested=step.requested,
    )
    return step


async def sync_marks(s: DeploymentSync, d: RS, rs_list: Sequence[RS], *, enabled: bool) -> list[RS]:
    """Mark or unmark the ReplicaSets, publish the Deployment's total; return the updated list."""
    active = filter_active(rs_list)
    answer = enabled and can_answer(d, active)
    out: list[RS] = []
    for rs in rs_list:
        want = answer and replicas(rs) > 0
        if want != is_evacuation_ready(rs) and (want or EVACUATION_READY_ANNOTATION in annotations_of(rs)):
            value = "true" if want else None
            rs = await s.patch_replica_set(
                rs, {"metadata": {"annotations": {EVACUATION_READY_ANNOTATION: value}}}
            )
        out.append(rs)
    total = sum(replicas_to_evacuate(rs) for rs in rs_list) if enabled else 0
    patch = count_annotation_patch(d, REPLICAS_TO_EVACUATE_ANNOTATION, total)
    if patch is not None:
        s.defer_annotations(d, patch["metadata"]["annotations"])  # written with this sync's status
    return out
