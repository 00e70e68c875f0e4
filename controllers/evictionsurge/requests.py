"""Writing and withdrawing the pod's `EvacuationRequest` with reason `EvictionSurge`.

JSON patches, as the NodeMaintenance controller writes its own: a merge patch would replace the
whole conditions list (losing the kubelet's Ready to a stale cache); `test` ops make a stale plan
fail (the sync is retried) and make sure a withdrawal only ever removes our own condition, never a
NodeMaintenance's or another requester's.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS
from controllers.common.evacuation import EVACUATION_REQUEST
from controllers.evictionsurge.decision import REASON_EVICTION_SURGE
from kubeutil.timestamps import format_time

Obj = Mapping[str, Any]


def _conditions(pod: Obj) -> list[Mapping[str, Any]]:
    return list((pod.get("status") or {}).get("conditions") or [])


def _index(pod: Obj, condition_type: str) -> int | None:
    for i, cond in enumerate(_conditions(pod)):
        if cond.get("type") == condition_type:
            return i
    return None


def request_ops(pod: Obj, *, message: str, now: datetime) -> list[dict[str, Any]]:
    """The JSON patch setting `EvacuationRequest=True` (reason EvictionSurge) on `pod` as cached."""
    meta = pod.get("metadata") or {}
    condition = {
        "type": EVACUATION_REQUEST,
        "status": "True",
        "reason": REASON_EVICTION_SURGE,
        "message": message,
        "lastTransitionTime": format_time(now),
    }
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": str(meta.get("resourceVersion", ""))}
    ]
    index = _index(pod, EVACUATION_REQUEST)
    if index is not None:
        ops.append({"op": "replace", "path": f"/status/conditions/{index}", "value": condition})
    elif _conditions(pod):
        ops.append({"op": "add", "path": "/status/conditions/-", "value": condition})
    else:
        ops.append({"op": "add", "path": "/status/conditions", "value": [condition]})
    return ops


def withdraw_ops(pod: Obj) -> list[dict[str, Any]] | None:
    """The JSON patch removing our request; None when the pod carries none."""
    index = _index(pod, EVACUATION_REQUEST)
    if index is None:
        return None
    base = f"/status/conditions/{index}"
    return [
        {"op": "test", "path": f"{base}/type", "value": EVACUATION_REQUEST},
        {"op": "test", "path": f"{base}/reason", "value": REASON_EVICTION_SURGE},
        {"op": "remove", "path": base},
    ]


def _name(pod: Obj) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


async def request_evacuation(client: KubeClient, pod: Obj, *, message: str, now: datetime) -> None:
    namespace, name = _name(pod)
    ops = request_ops(pod, message=message, now=now)
    await client.patch(PODS, name, ops, namespace=namespace, subresource="status", patch_type="json")


async def withdraw_evacuation(client: KubeClient, pod: Obj) -> None:
    ops = withdraw_ops(pod)
    if ops is None:
        return
    namespace, name = _name(pod)
    try:
        await client.patch(PODS, name, ops, namespace=namespace, subresource="status", patch_type="json")
    except ApiError as exc:
        if not exc.not_found:
            raise
