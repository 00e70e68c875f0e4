"""Deployment status and conditions, as `progress.go` and `calculateStatus` in `sync.go`.

Pure functions of the Deployment, its ReplicaSets and "now": the controller computes the new
status here and writes it only when it differs. `Progressing` tells a rollout's story
(`NewReplicaSetCreated` / `FoundNewReplicaSet` / `ReplicaSetUpdated` while it moves,
`NewReplicaSetAvailable` when done, `ProgressDeadlineExceeded` when no progress was seen for
`progressDeadlineSeconds`; `DeploymentPaused` / `DeploymentResumed` with Unknown status around a
pause so time spent paused never counts against the deadline). `Available` says whether at least
`replicas - maxUnavailable` pods are available. A ReplicaSet's `ReplicaFailure` is surfaced on the
Deployment, the new ReplicaSet's first.

Deadline checks need a wake-up: when a rollout makes no progress nothing changes and no event
arrives, so `requeue_stuck_after` says when to look again (lastUpdateTime + deadline - now).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from controllers.common.deploymentstrategy import max_unavailable, replicas
from controllers.deployment.util import (
    actual_replica_count,
    available_replica_count,
    has_progress_deadline,
    meta,
    name_of,
    progress_deadline_seconds,
    ready_replica_count,
    replica_count,
)
from kubeutil.conditions import get_condition, new_condition, remove_condition, set_condition
from kubeutil.timestamps import parse_time

Obj = Mapping[str, Any]

PROGRESSING = "Progressing"
AVAILABLE = "Available"
REPLICA_FAILURE = "ReplicaFailure"

# Progressing reasons (deployment_util.go).
NEW_RS_CREATED_REASON = "NewReplicaSetCreated"
FOUND_NEW_RS_REASON = "FoundNewReplicaSet"
RS_UPDATED_REASON = "ReplicaSetUpdated"
NEW_RS_AVAILABLE_REASON = "NewReplicaSetAvailable"
TIMED_OUT_REASON = "ProgressDeadlineExceeded"
FAILED_RS_CREATE_REASON = "ReplicaSetCreateError"
PAUSED_DEPLOY_REASON = "DeploymentPaused"
RESUMED_DEPLOY_REASON = "DeploymentResumed"
# Available reasons.
MIN_REPLICAS_AVAILABLE = "MinimumReplicasAvailable"
MIN_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"


def deployment_condition(
    condition_type: str, status: str, reason: str, message: str, *, now: datetime | None = None
) -> dict[str, Any]:
    """A Deployment condition: both `lastUpdateTime` and `lastTransitionTime` stamped."""
    return new_condition(
        condition_type, status, reason=reason, message=message, now=now, with_update_time=True
    )


def generation(d: Obj) -> int:
    return int(meta(d).get("generation") or 0)


def calculate_status(
    all_rss: Sequence[Obj | None], new_rs: Obj | None, d: Obj, *, now: datetime | None = None
) -> dict[str, Any]:
    """`calculateStatus`: counts from the ReplicaSets, conditions carried over, `Available` set."""
    old_status = d.get("status") or {}
    available = available_replica_count(all_rss)
    unavailable = max(0, replica_count(all_rss) - available)
    status: dict[str, Any] = {
        "observedGeneration": generation(d),
        "replicas": actual_replica_count(all_rss),
        "updatedReplicas": actual_replica_count([new_rs]),
        "readyReplicas": ready_replica_count(all_rss),
        "availableReplicas": available,
        "unavailableReplicas": unavailable,
    }
    if old_status.get("collisionCount") is not None:
        status["collisionCount"] = old_status["collisionCount"]
    status["conditions"] = copy.deepcopy(list(old_status.get("conditions") or []))
    if available >= replicas(d) - max_unavailable(d):
        cond = deployment_condition(
            AVAILABLE, "True", MIN_REPLICAS_AVAILABLE, "Deployment has minimum availability.", now=now
        )
    else:
        cond = deployment_condition(
            AVAILABLE,
            "False",
            MIN_REPLICAS_UNAVAILABLE,
            "Deployment does not have minimum availability.",
            now=now,
        )
    set_condition(status, cond)
    return status


def deployment_complete(d: Obj, status: Obj) -> bool:
    """`DeploymentComplete`: every replica updated and available, and the spec observed."""
    want = replicas(d)
    return (
        int(status.get("updatedReplicas") or 0) == want
        and int(status.get("replicas") or 0) == want
        and int(status.get("availableReplicas") or 0) == want
        and int(status.get("observedGeneration") or 0) >= generation(d)
    )


def deployment_progressing(d: Obj, status: Obj) -> bool:
    """`DeploymentProgressing`: more updated, fewer old, more ready or more available pods."""
    old = d.get("status") or {}

    def n(s: Obj, f: str) -> int:
        return int(s.get(f) or 0)

    old_old = n(old, "replicas") - n(old, "updatedReplicas")
    new_old = n(status, "replicas") - n(status, "updatedReplicas")
    return (
        n(status, "updatedReplicas") > n(old, "updatedReplicas")
        or new_old < old_old
        or n(status, "readyReplicas") > n(old, "readyReplicas")
        or n(status, "availableReplicas") > n(old, "availableReplicas")
    )


def deployment_timed_out(d: Obj, status: Obj, now: datetime) -> bool:
    """`DeploymentTimedOut`: the Progressing condition was last updated over the deadline ago."""
    if not has_progress_deadline(d):
        return False
    cond = get_condition(status, PROGRESSING)
    if cond is None or cond.get("reason") == NEW_RS_AVAILABLE_REASON:
        return False
    if cond.get("reason") == TIMED_OUT_REASON:
        return True
    since = parse_time(cond.get("lastUpdateTime"))
    if since is None:
        return True  # Go's zero time: long past any deadline
    deadline = progress_deadline_seconds(d) or 0
    return since + timedelta(seconds=deadline) < now


def replica_failures(all_rss: Sequence[Obj | None], new_rs: Obj | None) -> list[dict[str, Any]]:
    """`getReplicaFailures`: ReplicaFailure conditions, the new ReplicaSet's over old ones'."""

    def from_rs(rs: Obj | None) -> list[dict[str, Any]]:
        out = []
        for c in (rs or {}).get("status", {}).get("conditions") or ():
            if c.get("type") != REPLICA_FAILURE:
                continue
            out.append(
                {
                    "type": REPLICA_FAILURE,
                    "status": c.get("status"),
                    "lastUpdateTime": c.get("lastTransitionTime"),
                    "lastTransitionTime": c.get("lastTransitionTime"),
                    "reason": c.get("reason", ""),
                    "message": c.get("message", ""),
                }
            )
        return out

    found = from_rs(new_rs)
    if found:
        return found
    for rs in all_rss:
        found.extend(from_rs(rs))
    return found


def rollout_status(
    all_rss: Sequence[Obj | None], new_rs: Obj | None, d: Obj, *, now: datetime
) -> dict[str, Any]:
    """`syncRolloutStatus` without the write: the status a rollout step should leave behind."""
    status = calculate_status(all_rss, new_rs, d, now=now)
    if not has_progress_deadline(d):
        remove_condition(status, PROGRESSING)
    current = get_condition(d.get("status"), PROGRESSING)
    complete_already = (
        status["replicas"] == status["updatedReplicas"]
        and current is not None
        and current.get("reason") == NEW_RS_AVAILABLE_REASON
    )
    if has_progress_deadline(d) and not complete_already:
        rs_name = name_of(new_rs) if new_rs is not None else None
        if deployment_complete(d, status):
            msg = (
                f'ReplicaSet "{rs_name}" has successfully progressed.'
                if rs_name
                else f'Deployment "{name_of(d)}" has successfully progressed.'
            )
            set_condition(
                status, deployment_condition(PROGRESSING, "True", NEW_RS_AVAILABLE_REASON, msg, now=now)
            )
        elif deployment_progressing(d, status):
            msg = (
                f'ReplicaSet "{rs_name}" is progressing.'
                if rs_name
                else f'Deployment "{name_of(d)}" is progressing.'
            )
            cond = deployment_condition(PROGRESSING, "True", RS_UPDATED_REASON, msg, now=now)
            # Progress refreshes lastUpdateTime even with the same reason, which set_condition
            # would not do: replace the condition, keeping lastTransitionTime when already True.
            if current is not None:
                if current.get("status") == "True":
                    cond["lastTransitionTime"] = current.get("lastTransitionTime")
                remove_condition(status, PROGRESSING)
            set_condition(status, cond)
        elif deployment_timed_out(d, status, now):
            msg = (
                f'ReplicaSet "{rs_name}" has timed out progressing.'
                if rs_name
                else f'Deployment "{name_of(d)}" has timed out progressing.'
            )
            set_condition(status, deployment_condition(PROGRESSING, "False", TIMED_OUT_REASON, msg, now=now))
    failures = replica_failures(all_rss, new_rs)
    if failures:
        set_condition(status, failures[0])
    else:
        remove_condition(status, REPLICA_FAILURE)
    return status


def stuck_deployment_deadline_in(d: Obj, status: Obj, now: datetime) -> float | None:
    """The value `requeueStuckDeployment` returns: seconds left before the progress deadline.

    None (Go's -1) when there is no deadline or Progressing condition, or the rollout is
    complete or has already timed out; 0 when less than a second is left ("check now").
    """
    current = get_condition(d.get("status"), PROGRESSING)
    if not has_progress_deadline(d) or current is None:
        return None
    if deployment_complete(d, status) or current.get("reason") == TIMED_OUT_REASON:
        return None
    since = parse_time(current.get("lastUpdateTime"))
    if since is None:
        return 0.0  # Go's zero time: the deadline is long past
    after = (since + timedelta(seconds=progress_deadline_seconds(d) or 0) - now).total_seconds()
    if after < 1:
        return 0.0
    return after


def requeue_stuck_after(d: Obj, status: Obj, now: datetime) -> float | None:
    """When to look at a rollout again for its deadline: `stuck_deployment_deadline_in` plus the
    second KCM adds against clock skew in `AddAfter`; 0 means "now" (rate limited), None never."""
    after = stuck_deployment_deadline_in(d, status, now)
    if after is None or after == 0:
        return after
    return after + 1


def status_equal(a: Obj | None, b: Obj | None) -> bool:
    """Deep equality of two statuses, treating absent fields and zero counts alike."""

    def norm(s: Obj | None) -> dict[str, Any]:
        out = {k: v for k, v in (s or {}).items() if v not in (None, 0, [], {})}
        return out

    return norm(a) == norm(b)
