"""Drain: EvacuationRequest on the pods of a node, withdrawal, and the eviction fallback.

The KEP's drain is a request, not an action: the controller sets the pod condition
`EvacuationRequest=True` (reason `NodeMaintenance`, message `spec.reason`) and the pod's owner answers
with `EvacuationInitiated=True` and moves the pod (the Deployment controller surges first). Pods are
picked with the two `kubectl drain` filters the KEP keeps: DaemonSet pods and mirror (static) pods are
skipped (`staging/src/k8s.io/kubectl/pkg/drain/filters.go`, `daemonSetFilter` and `mirrorPodFilter`).
Pods that already finished (Succeeded/Failed) hold nothing on the node and are not waited for.

So that a maintenance always completes, a pod whose owner has not answered within the maintenance's
`evacuationTimeoutSeconds` (or answered `EvacuationInitiated=False`: "I cannot") is evicted through
the eviction API, which honours PodDisruptionBudgets. A 429 is a PDB saying "not now": like
`kubectl drain` we try again after a pause (the server's Retry-After, else 5 s), never in a hot loop,
and the pod is reported as blocking with the server's message.

Conditions with another reason belong to another requester (a descheduler, say): never overwritten,
never withdrawn; they still count as a request for the timeout.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS
from controllers.nodemaintenance.api import (
    EVACUATION_INITIATED,
    EVACUATION_REQUEST,
    REASON_NODE_MAINTENANCE,
)

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
# `kubectl drain` waits this long before retrying an eviction refused with 429.
EVICTION_RETRY_SECONDS = 5.0
# An eviction that fails otherwise (a pod under two PDBs gets a 500 every time) is an error: retried
# with a per-pod exponential backoff from EVICTION_RETRY_SECONDS up to client-go's 1000 s cap.
EVICTION_FAILURE_BACKOFF_CAP = 1000.0

BLOCK_AWAITING_OWNER = "AwaitingEvacuation"
BLOCK_EVICTION_REFUSED = "EvictionRefused"
BLOCK_EVICTION_FAILED = "EvictionFailed"
BLOCK_TERMINATING = "Terminating"


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def controller_ref(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    ref = controller_ref(pod)
    return ref is not None and ref.get("kind") == "DaemonSet"


def is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    return MIRROR_POD_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def is_finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_targeted(pod: Mapping[str, Any]) -> bool:
    """A pod a drain must see leave the node."""
    return not (is_daemonset_pod(pod) or is_mirror_pod(pod) or is_finished(pod))


def get_condition(pod: Mapping[str, Any], type_: str) -> tuple[int, Mapping[str, Any]] | None:
    for i, cond in enumerate((pod.get("status") or {}).get("conditions") or []):
        if cond.get("type") == type_:
            return i, cond
    return None


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Action(enum.Enum):
    NONE = "none"  # not ours to touch, or nothing to do
    REQUEST = "request"  # set EvacuationRequest=True
    WAIT = "wait"  # requested, the owner has until `deadline`
    EVACUATING = "evacuating"  # the owner answered EvacuationInitiated=True
    EVICT = "evict"  # no (or a negative) answer in time: evict
    TERMINATING = "terminating"  # already being deleted
    WITHDRAW = "withdraw"  # our request, no maintenance drains the node any more


@dataclass(frozen=True, slots=True)
class PodPlan:
    action: Action
    deadline: datetime | None = None


def plan_pod(pod: Mapping[str, Any], *, draining: bool, timeout: float, now: datetime) -> PodPlan:
    """What the drain does with one pod of a node that is (or is no longer) being drained."""
    request = get_condition(pod, EVACUATION_REQUEST)
    requested = request is not None and request[1].get("status") == "True"
    ours = requested and request is not None and request[1].get("reason") == REASON_NODE_MAINTENANCE
    if not draining:
        return PodPlan(Action.WITHDRAW if ours else Action.NONE)
    if not is_targeted(pod):
        return PodPlan(Action.NONE)
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return PodPlan(Action.TERMINATING)
    if not requested or request is None:
        return PodPlan(Action.REQUEST)
    requested_at = parse_time(request[1].get("lastTransitionTime")) or now
    initiated = get_condition(pod, EVACUATION_INITIATED)
    if initiated is not None:
        status = initiated[1].get("status")
        if status == "True":
            return PodPlan(Action.EVACUATING)
        answered_at = parse_time(initiated[1].get("lastTransitionTime"))
        if status == "False" and answered_at is not None and answered_at >= requested_at:
            return PodPlan(Action.EVICT)  # the owner said it cannot: no reason to wait any longer
    deadline = datetime.fromtimestamp(requested_at.timestamp() + timeout, tz=UTC)
    if now >= deadline:
        return PodPlan(Action.EVICT)
    return PodPlan(Action.WAIT, deadline)


# -- writes ---------------------------------------------------------------------------------------


def _pod_ref(pod: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("resourceVersion", ""))


async def request_evacuation(client: KubeClient, pod: Mapping[str, Any], *, message: str, now: datetime) -> None:
    """Set `EvacuationRequest=True` with a JSON patch guarded by the resourceVersion we planned on.

    JSON patch rather than a merge patch because a merge patch replaces the whole conditions list
    (the kubelet's Ready would be lost to a stale cache); the `test` makes a stale plan fail (retried).
    """
    namespace, name, rv = _pod_ref(pod)
    condition = {
        "type": EVACUATION_REQUEST,
        "status": "True",
        "reason": REASON_NODE_MAINTENANCE,
        "message": message,
        "lastTransitionTime": format_time(now),
    }
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}]
    existing = get_condition(pod, EVACUATION_REQUEST)
    if existing is not None:
        ops.append({"op": "replace", "path": f"/status/conditions/{existing[0]}", "value": condition})
    elif (pod.get("status") or {}).get("conditions"):
        ops.append({"op": "add", "path": "/status/conditions/-", "value": condition})
    else:
        ops.append({"op": "add", "path": "/status/conditions", "value": [condition]})
    await client.patch(PODS, name, ops, namespace=namespace, subresource="status", patch_type="json")


async def withdraw_evacuation(client: KubeClient, pod: Mapping[str, Any]) -> None:
    """Remove our `EvacuationRequest`, testing that the slot still holds our condition."""
    found = get_condition(pod, EVACUATION_REQUEST)
    if found is None:
        return
    index, _ = found
    namespace, name, _rv = _pod_ref(pod)
    base = f"/status/conditions/{index}"
    ops = [
        {"op": "test", "path": f"{base}/type", "value": EVACUATION_REQUEST},
        {"op": "test", "path": f"{base}/reason", "value": REASON_NODE_MAINTENANCE},
        {"op": "remove", "path": base},
    ]
    try:
        await client.patch(PODS, name, ops, namespace=namespace, subresource="status", patch_type="json")
    except ApiError as exc:
        if not exc.not_found:
            raise


@dataclass(frozen=True, slots=True)
class EvictionOutcome:
    """`blocked_reason` is None when the pod is gone or going; else retry after `retry_after`."""

    blocked_reason: str | None = None
    message: str = ""
    retry_after: float = 0.0


def failure_backoff(failures: int) -> float:
    """The wait after the `failures`-th failed eviction of one pod in a row (1 -> 5 s, doubling)."""
    return min(EVICTION_RETRY_SECONDS * 2.0 ** min(max(failures - 1, 0), 30), EVICTION_FAILURE_BACKOFF_CAP)


async def evict(client: KubeClient, pod: Mapping[str, Any]) -> EvictionOutcome:
    """One eviction attempt, as `kubectl drain`'s `evictPods` makes one per round."""
    namespace, name, _rv = _pod_ref(pod)
    uid = (pod.get("metadata") or {}).get("uid")
    options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if uid:
        options["preconditions"] = {"uid": uid}  # never evict a new pod that took the name
    try:
        await client.evict(namespace, name, delete_options=options)
    except ApiError as exc:
        if exc.not_found or (exc.conflict and uid):
            return EvictionOutcome()
        if exc.too_many_requests:
            wait = exc.retry_after_seconds or EVICTION_RETRY_SECONDS
            return EvictionOutcome(BLOCK_EVICTION_REFUSED, exc.message, max(wait, 1.0))
        return EvictionOutcome(BLOCK_EVICTION_FAILED, exc.message, EVICTION_RETRY_SECONDS)
    return EvictionOutcome()
