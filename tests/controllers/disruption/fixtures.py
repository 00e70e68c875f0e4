"""Object builders shaped as `disruption_test.go`'s helpers (`newPod`, `newReplicaSet`, ...).

Labels `foo=bar` everywhere, as Kubernetes' tests; every object gets a fresh UID. The same
builders feed the pure unit tests and (minus the UIDs, which the server assigns) the cluster ones.
"""

from __future__ import annotations

import uuid
from typing import Any

NS = "default"
FOO_BAR = {"foo": "bar"}

Obj = dict[str, Any]


def new_pod(
    name: str, *, labels: dict[str, str] | None = None, ready: bool = True, owner: Obj | None = None
) -> Obj:
    """A pod `foo=bar`, Ready unless told otherwise, optionally controlled by `owner`."""
    meta: Obj = {"name": name, "namespace": NS, "uid": str(uuid.uuid4()), "labels": dict(labels or FOO_BAR)}
    pod: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {}, "status": {"conditions": []}}
    if ready:
        pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    if owner is not None:
        set_owner(pod, owner)
    return pod


def set_owner(obj: Obj, owner: Obj, *, api_version: str | None = None, kind: str | None = None) -> None:
    """Append a controller reference to `owner` (`updatePodOwnerToRs` and friends)."""
    ref = {
        "apiVersion": api_version or owner["apiVersion"],
        "kind": kind or owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    obj["metadata"].setdefault("ownerReferences", []).append(ref)


def _workload(api_version: str, kind: str, size: int, name: str, labels: dict[str, str] | None) -> Obj:
    labels = dict(labels or FOO_BAR)
    selector: Any = labels if kind == "ReplicationController" else {"matchLabels": labels}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": NS, "uid": str(uuid.uuid4()), "labels": labels},
        "spec": {"replicas": size, "selector": selector},
    }


def new_rs(size: int, *, name: str = "foobar", labels: dict[str, str] | None = None) -> Obj:
    return _workload("apps/v1", "ReplicaSet", size, name, labels)


def new_rc(size: int, *, name: str = "foobar", labels: dict[str, str] | None = None) -> Obj:
    return _workload("v1", "ReplicationController", size, name, labels)


def new_deployment(size: int, *, name: str = "foobar", labels: dict[str, str] | None = None) -> Obj:
    return _workload("apps/v1", "Deployment", size, name, labels)


def new_statefulset(size: int, *, name: str = "foobar", labels: dict[str, str] | None = None) -> Obj:
    return _workload("apps/v1", "StatefulSet", size, name, labels)


def new_pdb(
    *, min_available: int | str | None = None, max_unavailable: int | str | None = None, selector: Any = None
) -> Obj:
    """`newMinAvailablePodDisruptionBudget` / `newMaxUnavailablePodDisruptionBudget` (name `foobar`)."""
    spec: Obj = {"selector": {"matchLabels": dict(FOO_BAR)} if selector is None else selector}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "foobar", "namespace": NS, "uid": str(uuid.uuid4()), "generation": 1},
        "spec": spec,
    }
