"""The responder's own `EvacuationRequest` on the pod: reason `EvictionRequest`, set and withdrawn.

The condition is the one the NodeMaintenance drain writes, so the surge machinery answers it the
same way in either layout; its reason says who asked (as `NodeMaintenance` and `EvictionSurge` do
for theirs), and the message names the Eviction. A request another requester made is never
overwritten or withdrawn: the responder then follows that evacuation instead of starting its own.

JSON patches, as the other requesters write theirs: a merge patch would replace the whole
conditions list (losing the kubelet's Ready to a stale cache); the `test` operations make a stale
plan fail (the sync is retried) and make sure a withdrawal removes our condition only.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from controllers.common.evacuation import EVACUATION_REQUEST, REASON_EVICTION_REQUEST
from controllers.common.pods import get_pod_condition
from kubeutil.conditions import condition_index
from kubeutil.timestamps import format_time

Obj = Mapping[str, Any]


def requested_by_us(pod: Obj) -> bool:
    """The pod carries our `EvacuationRequest` (any status: a False one is ours to remove too)."""
    cond = get_pod_condition(pod, EVACUATION_REQUEST)
    return cond is not None and cond.get("reason") == REASON_EVICTION_REQUEST


def request_message(eviction_name: str) -> str:
    return f"Eviction {eviction_name}: replace this pod before it is removed"


def request_ops(pod: Obj, *, eviction_name: str, now: datetime) -> list[dict[str, Any]]:
    """The JSON patch setting our `EvacuationRequest=True` on `pod` as cached (guarded by its version)."""
    meta = pod.get("metadata") or {}
    condition = {
        "type": EVACUATION_REQUEST,
        "status": "True",
        "reason": REASON_EVICTION_REQUEST,
        "message": request_message(eviction_name),
        "lastTransitionTime": format_time(now),
    }
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": str(meta.get("resourceVersion", ""))}
    ]
    status = pod.get("status")
    index = condition_index(status, EVACUATION_REQUEST)
    if index is not None:
        ops.append({"op": "replace", "path": f"/status/conditions/{index}", "value": condition})
    elif (status or {}).get("conditions"):
        ops.append({"op": "add", "path": "/status/conditions/-", "value": condition})
    else:
        ops.append({"op": "add", "path": "/status/conditions", "value": [condition]})
    return ops


def withdraw_ops(pod: Obj) -> list[dict[str, Any]] | None:
    """The JSON patch removing our request; None when the pod carries none of ours."""
    if not requested_by_us(pod):
        return None
    index = condition_index(pod.get("status"), EVACUATION_REQUEST)
    base = f"/status/conditions/{index}"
    return [
        {"op": "test", "path": f"{base}/type", "value": EVACUATION_REQUEST},
        {"op": "test", "path": f"{base}/reason", "value": REASON_EVICTION_REQUEST},
        {"op": "remove", "path": base},
    ]
