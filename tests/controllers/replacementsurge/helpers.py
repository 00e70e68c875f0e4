"""Cached objects of one surge account, as KCM and the drain leave them, at a fixed `NOW`.

A Deployment `web` (uid `d`) with one ReplicaSet `web-abc` (uid `rs`, `pod-template-hash=abc`);
its pods run on `node-1` unless told otherwise, so a copy on `node-2` is "on another node".
Times are given as seconds before `NOW`: no test reads the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from controllers.common.evacuation import (
    EVACUATION_INITIATED,
    EVACUATION_READY_ANNOTATION,
    EVACUATION_REQUEST,
)
from controllers.replacementsurge.copies import (
    HELD_LABELS_ANNOTATION,
    POD_DELETION_COST,
    PREVIOUS_COST_ANNOTATION,
    REPLACED_ANNOTATION,
    REPLACES_LABEL,
)
from controllers.replacementsurge.plan import Account
from kubeutil.timestamps import format_time
from tests.support.objects import Obj, replicaset

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NS = "ns"
HASH = "abc"
TEMPLATE_LABELS = {"app": "web", "pod-template-hash": HASH}


def stamp(seconds_ago: float) -> str:
    return format_time(NOW - timedelta(seconds=seconds_ago))


def deployment_rs(
    name: str = "web-abc", *, uid: str = "rs", replicas: int = 3, evacuation_ready: bool = False
) -> Obj:
    """A Deployment's ReplicaSet: its selector and template carry `pod-template-hash`."""
    metadata: Obj = {
        "uid": uid,
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d", "controller": True}
        ],
    }
    if evacuation_ready:
        metadata["annotations"] = {EVACUATION_READY_ANNOTATION: "true"}
    return replicaset(name, replicas, labels=TEMPLATE_LABELS, namespace=NS, metadata=metadata)


def _ready(ready: bool | None, ready_for: float) -> list[Obj]:
    if ready is None:
        return []
    return [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": stamp(ready_for)}]


def pod(
    name: str,
    *,
    rs_uid: str = "rs",
    node: str = "node-1",
    requested: float | None = 10,
    request_status: str = "True",
    reason: str = "NodeMaintenance",
    initiated: tuple[str, float] | None = None,
    cost: str | None = None,
    previous_cost: str | None = None,
    replaced: tuple[str, float] | None = None,
    terminating: bool = False,
    ready_for: float = 3600,
) -> Obj:
    """A ready pod of the ReplicaSet, asked to evacuate `requested` seconds ago (None: never asked).

    `initiated` is (status, seconds ago) of an `EvacuationInitiated` answer; `cost` and
    `previous_cost` are the deletion-cost mark; `replaced` makes it an adopted copy: (the uid of
    the pod it replaced, seconds since it was handed over).
    """
    conditions = _ready(True, ready_for)
    if requested is not None:
        conditions.append(
            {
                "type": EVACUATION_REQUEST,
                "status": request_status,
                "reason": reason,
                "lastTransitionTime": stamp(requested),
            }
        )
    if initiated is not None:
        conditions.append(
            {
                "type": EVACUATION_INITIATED,
                "status": initiated[0],
                "reason": "NodeMaintenance",
                "lastTransitionTime": stamp(initiated[1]),
            }
        )
    annotations: dict[str, str] = {}
    if cost is not None:
        annotations[POD_DELETION_COST] = cost
    if previous_cost is not None:
        annotations[PREVIOUS_COST_ANNOTATION] = previous_cost
    if replaced is not None:
        annotations[REPLACED_ANNOTATION] = f"{replaced[0]}@{stamp(replaced[1])}"
    meta: Obj = {
        "name": name,
        "namespace": NS,
        "uid": f"uid-{name}",
        "labels": dict(TEMPLATE_LABELS),
        "annotations": annotations,
        "creationTimestamp": stamp(7200),
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-abc",
                "uid": rs_uid,
                "controller": True,
            }
        ],
    }
    if terminating:
        meta["deletionTimestamp"] = stamp(1)
    return {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx:1.27"}]},
        "status": {"phase": "Running", "conditions": conditions},
    }


def copy_of(
    departing: Obj,
    *,
    node: str | None = "node-2",
    age: float = 30,
    ready: bool | None = True,
    ready_for: float = 20,
    terminating: bool = False,
) -> Obj:
    """The copy replacing `departing`, created `age` seconds ago; `node` None: not scheduled yet."""
    name = departing["metadata"]["name"]
    meta: Obj = {
        "name": f"web-abc-{name}-copy",
        "namespace": NS,
        "uid": f"uid-copy-{name}",
        "labels": {"app": "web", REPLACES_LABEL: departing["metadata"]["uid"]},
        "annotations": {HELD_LABELS_ANNOTATION: f'{{"pod-template-hash": "{HASH}"}}'},
        "creationTimestamp": stamp(age),
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "rs"}],
    }
    if terminating:
        meta["deletionTimestamp"] = stamp(1)
    spec: Obj = {"containers": [{"name": "c", "image": "nginx:1.27"}]}
    if node is not None:
        spec["nodeName"] = node
    return {
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending", "conditions": _ready(ready, ready_for)},
    }


def account(
    pods: Sequence[Obj],
    copies: Sequence[Obj] = (),
    *,
    replica_sets: Sequence[Obj] | None = None,
    desired: int = 3,
    surge: int = 1,
    min_ready: int = 0,
    owner: Mapping[str, Any] | None = None,
) -> Account:
    """The account of the Deployment `web`: by default its one ReplicaSet at `desired` replicas."""
    rss = list(replica_sets) if replica_sets is not None else [deployment_rs(replicas=desired)]
    return Account(
        owner=owner or {"metadata": {"name": "web", "namespace": NS, "uid": "d"}},
        replica_sets=rss,
        pods=list(pods),
        copies=list(copies),
        desired=desired,
        surge_limit=surge,
        min_ready_seconds=min_ready,
    )
