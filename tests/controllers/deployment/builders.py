"""Plain-dict Deployments, ReplicaSets and pods for the pure unit tests."""

from __future__ import annotations

from typing import Any

from controllers.deployment.util import (
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    REVISION_ANNOTATION,
)

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
}


def deployment(
    replicas: int = 3,
    *,
    max_surge: int | str | None = "25%",
    max_unavailable: int | str | None = "25%",
    strategy: str = "RollingUpdate",
    paused: bool = False,
    generation: int = 1,
    status: dict[str, Any] | None = None,
    progress_deadline: int | None = 600,
) -> dict[str, Any]:
    # The API server's defaults (25 % / 25 %); pass None to leave a field unset as it never is
    # on a served object.
    rolling: dict[str, Any] = {}
    if max_surge is not None:
        rolling["maxSurge"] = max_surge
    if max_unavailable is not None:
        rolling["maxUnavailable"] = max_unavailable
    strat: dict[str, Any] = {"type": strategy}
    if strategy == "RollingUpdate":
        strat["rollingUpdate"] = rolling
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": "web"}},
        "template": TEMPLATE,
        "strategy": strat,
        "paused": paused,
    }
    if progress_deadline is not None:
        spec["progressDeadlineSeconds"] = progress_deadline
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": "d-uid", "generation": generation},
        "spec": spec,
        "status": status or {},
    }


def replica_set(
    name: str,
    replicas: int,
    *,
    available: int | None = None,
    ready: int | None = None,
    actual: int | None = None,
    revision: int | None = None,
    created: str = "2024-01-01T00:00:00Z",
    desired: int | None = None,
    max_replicas: int | None = None,
    generation: int = 1,
    observed: int = 1,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    ann: dict[str, str] = dict(annotations or {})
    if revision is not None:
        ann[REVISION_ANNOTATION] = str(revision)
    if desired is not None:
        ann[DESIRED_REPLICAS_ANNOTATION] = str(desired)
    if max_replicas is not None:
        ann[MAX_REPLICAS_ANNOTATION] = str(max_replicas)
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"{name}-uid",
            "creationTimestamp": created,
            "annotations": ann,
            "generation": generation,
        },
        "spec": {"replicas": replicas, "template": TEMPLATE},
        "status": {
            "replicas": replicas if actual is None else actual,
            "readyReplicas": replicas if ready is None else ready,
            "availableReplicas": replicas if available is None else available,
            "observedGeneration": observed,
        },
    }


def pod(
    name: str,
    *,
    ready: bool = True,
    requested: bool = False,
    terminating: bool = False,
    node: str = "node-1",
) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = [
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "lastTransitionTime": "2024-01-01T00:00:00Z",
        }
    ]
    if requested:
        conditions.append({"type": "EvacuationRequest", "status": "True", "reason": "NodeMaintenance"})
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"{name}-uid"}
    if terminating:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "conditions": conditions},
    }
