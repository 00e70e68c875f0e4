"""Plain-dict pods for unit tests, shaped as the informers hand them over."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubeutil.timestamps import format_time


def make_pod(
    name: str,
    *,
    uid: str | None = None,
    node: str = "",
    phase: str = "Pending",
    ready_since: datetime | None = None,
    created: datetime | None = None,
    restarts: int = 0,
    cost: str | None = None,
    deleting: bool = False,
    conditions: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": uid or f"uid-{name}",
        "labels": labels or {},
    }
    if created is not None:
        meta["creationTimestamp"] = format_time(created)
    if cost is not None:
        meta["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": cost}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    conds = list(conditions or [])
    if ready_since is not None:
        conds.append({"type": "Ready", "status": "True", "lastTransitionTime": format_time(ready_since)})
    return {
        "metadata": meta,
        "spec": {"nodeName": node} if node else {},
        "status": {
            "phase": phase,
            "conditions": conds,
            "containerStatuses": [{"name": "c", "restartCount": restarts}],
        },
    }
