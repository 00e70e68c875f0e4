"""Status conditions on plain-dict objects, and the patches that write them.

Two shapes of writer share these helpers:

- a controller that owns a whole status (ReplicaSet, Deployment) edits a *copy* of its status
  with `set_condition` / `remove_condition` and writes it once, only if something changed;
- a controller that answers on someone else's object (a pod's `EvacuationInitiated`) must touch
  only its own condition: `pod_condition_patch` builds a strategic-merge patch keyed by the
  condition `type` (the merge key of `PodStatus.conditions`), so other conditions, and other
  writers' concurrent changes to them, survive.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from datetime import datetime
from typing import Any

from kubeutil.timestamps import format_time, utcnow

Condition = dict[str, Any]


def new_condition(
    condition_type: str,
    status: str,
    *,
    reason: str = "",
    message: str = "",
    now: datetime | None = None,
    with_update_time: bool = False,
) -> Condition:
    """A condition stamped with `lastTransitionTime` (and `lastUpdateTime` for Deployment-style ones)."""
    stamp = format_time(now or utcnow())
    cond: Condition = {"type": condition_type, "status": status}
    if with_update_time:
        cond["lastUpdateTime"] = stamp
    cond["lastTransitionTime"] = stamp
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def get_condition(status: Mapping[str, Any] | None, condition_type: str) -> Mapping[str, Any] | None:
    """The condition of `condition_type` in `status["conditions"]`, or None."""
    for cond in (status or {}).get("conditions") or ():
        if cond.get("type") == condition_type:
            return cond  # type: ignore[no-any-return]
    return None


def condition_index(status: Mapping[str, Any] | None, condition_type: str) -> int | None:
    """Where the condition of `condition_type` sits in `status["conditions"]`, for a JSON patch path."""
    for i, cond in enumerate((status or {}).get("conditions") or ()):
        if cond.get("type") == condition_type:
            return i
    return None


def set_condition(status: MutableMapping[str, Any], condition: Condition) -> bool:
    """Put `condition` into `status` (a copy you own); return whether anything changed.

    As Kubernetes' `SetCondition` for ReplicaSets and Deployments: the same status and reason is
    no change at all; the same status with a new reason keeps the old `lastTransitionTime`.
    """
    current = get_condition(status, condition["type"])
    if current is not None and current.get("status") == condition.get("status"):
        if current.get("reason", "") == condition.get("reason", ""):
            return False
        condition = {**condition, "lastTransitionTime": current.get("lastTransitionTime")}
    others = [c for c in status.get("conditions") or () if c.get("type") != condition["type"]]
    status["conditions"] = [*others, condition]
    return True


_STATUS_CONDITION_ZEROS: tuple[tuple[str, object], ...] = (
    ("reason", ""),
    ("message", ""),
    ("observedGeneration", 0),
)


def set_status_condition(conditions: list[dict[str, Any]], new: Mapping[str, Any], now: datetime) -> bool:
    """`apimeta.SetStatusCondition` on a list you own (`metav1.Condition`s): True when anything changed.

    Unlike `set_condition` (ReplicaSet and Deployment conditions), the transition time moves only
    when the status flips, and reason, message and observedGeneration are always brought up to date.
    Fields compare as Go's struct fields do: an absent `message` is "" and an absent
    `observedGeneration` 0 (the API server omits a zero `observedGeneration`), so a condition read
    back from the server is not "changed" by setting it to what it already says.
    """
    for existing in conditions:
        if existing.get("type") != new["type"]:
            continue
        changed = False
        if existing.get("status") != new["status"]:
            existing["status"] = new["status"]
            existing["lastTransitionTime"] = format_time(now)
            changed = True
        for key, zero in _STATUS_CONDITION_ZEROS:
            value = new.get(key, zero)
            if existing.get(key, zero) != value:
                existing[key] = value
                changed = True
        return changed
    conditions.append({**new, "lastTransitionTime": format_time(now)})
    return True


def remove_condition(status: MutableMapping[str, Any], condition_type: str) -> bool:
    """Drop the condition of `condition_type` from `status` (a copy you own); return whether it was there."""
    conditions = status.get("conditions") or []
    kept = [c for c in conditions if c.get("type") != condition_type]
    if len(kept) == len(conditions):
        return False
    status["conditions"] = kept
    return True


def conditions_equal(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two statuses carry the same conditions (order-insensitive, by type)."""

    def by_type(status: Mapping[str, Any] | None) -> dict[str, Any]:
        return {c.get("type"): c for c in (status or {}).get("conditions") or ()}

    return by_type(a) == by_type(b)


def pod_condition_patch(condition: Condition, *, uid: str | None = None) -> dict[str, Any]:
    """A strategic-merge patch for the pod `status` subresource that sets exactly one condition.

    `PodStatus.conditions` merges by `type`, so the patch replaces this one condition and leaves
    every other one (kubelet's, another requester's) alone. With `uid` the patch fails (Invalid
    or Conflict) if the pod was deleted and recreated under the same name.
    """
    patch: dict[str, Any] = {"status": {"conditions": [condition]}}
    if uid:
        patch["metadata"] = {"uid": uid}
    return patch


def remove_pod_condition_patch(condition_type: str, *, uid: str | None = None) -> dict[str, Any]:
    """A strategic-merge patch deleting one pod condition by type (`$patch: delete` on the merge key)."""
    patch: dict[str, Any] = {"status": {"conditions": [{"type": condition_type, "$patch": "delete"}]}}
    if uid:
        patch["metadata"] = {"uid": uid}
    return patch
