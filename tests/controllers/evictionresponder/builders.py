"""Cached objects for the responder's pure tests, at a fixed `NOW`; times are seconds before it.

A Deployment `web` (uid `d`, 3 replicas, `maxSurge` 1) with one ReplicaSet `web-abc` (uid `rs`);
the Eviction `ev` targets its pod `web-1` (uid `uid-web-1`) and lists the surge responder after a
third party's and before the imperative evictor.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from controllers.common.evacuation import EVACUATION_INITIATED, EVACUATION_REQUEST, REASON_EVICTION_REQUEST
from controllers.evictionresponder.registration import RESPONDER_NAME, RESPONDER_PRIORITY
from evictionapi import names
from kubeutil.timestamps import format_time

Obj = dict[str, Any]

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NS = "ns"
OTHER = "acme.io/drainer"


def stamp(seconds_ago: float) -> str:
    return format_time(NOW - timedelta(seconds=seconds_ago))


def deployment(
    *, replicas: int = 3, strategy: Mapping[str, Any] | None = None, deleting: bool = False
) -> Obj:
    meta: Obj = {"name": "web", "namespace": NS, "uid": "d"}
    if deleting:
        meta["deletionTimestamp"] = stamp(1)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "strategy": dict(strategy)
            if strategy is not None
            else {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        },
    }


def replicaset(*, replicas: int = 3, owner_kind: str | None = "Deployment") -> Obj:
    meta: Obj = {"name": "web-abc", "namespace": NS, "uid": "rs"}
    if owner_kind is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner_kind, "name": "web", "uid": "d", "controller": True}
        ]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta, "spec": {"replicas": replicas}}


def pod(
    name: str = "web-1",
    *,
    owner_kind: str | None = "ReplicaSet",
    ready: bool = True,
    request: tuple[str, str, float] | None = None,
    answer: tuple[str, float, str] | None = None,
    terminating: bool = False,
    phase: str = "Running",
    node: str = "node-1",
) -> Obj:
    """A pod of `web-abc`; `request` is (status, reason, seconds ago) of an `EvacuationRequest`,
    `answer` (status, seconds ago, message) of an `EvacuationInitiated`."""
    conditions: list[Obj] = [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": stamp(3600)}
    ]
    if request is not None:
        conditions.append(
            {
                "type": EVACUATION_REQUEST,
                "status": request[0],
                "reason": request[1],
                "lastTransitionTime": stamp(request[2]),
            }
        )
    if answer is not None:
        conditions.append(
            {
                "type": EVACUATION_INITIATED,
                "status": answer[0],
                "reason": "NodeMaintenance",
                "message": answer[2],
                "lastTransitionTime": stamp(answer[1]),
            }
        )
    meta: Obj = {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": "7"}
    if owner_kind is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner_kind, "name": "web-abc", "uid": "rs", "controller": True}
        ]
    if terminating:
        meta["deletionTimestamp"] = stamp(-30)
    return {
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {"phase": phase, "conditions": conditions},
    }


def ours(seconds_ago: float = 5) -> tuple[str, str, float]:
    return ("True", REASON_EVICTION_REQUEST, seconds_ago)


def eviction(
    *,
    state: str = names.STATE_ACTIVE,
    initialised: bool = True,
    heartbeat: float | None = None,
    message: str | None = None,
    completed: bool = False,
    listed: bool = True,
) -> Obj:
    """`ev` targeting `web-1`: the third party Interrupted before us, the evictor Inactive after."""
    targets: list[Obj] = [{"name": OTHER, "priority": 20000, "state": names.STATE_INTERRUPTED}]
    responders: list[Obj] = [{"name": OTHER, "startTime": stamp(3000), "heartbeatTime": stamp(2000)}]
    if listed:
        targets.append({"name": RESPONDER_NAME, "priority": RESPONDER_PRIORITY, "state": state})
        own: Obj = {"name": RESPONDER_NAME}
        if state != names.STATE_INACTIVE:
            own["startTime"] = stamp(600)
        if heartbeat is not None:
            own["heartbeatTime"] = stamp(heartbeat)
        if message is not None:
            own["message"] = message
        if completed:
            own["completionTime"] = stamp(1)
        responders.append(own)
    targets.append({"name": names.IMPERATIVE_EVICTOR, "priority": 100, "state": names.STATE_INACTIVE})
    responders.append({"name": names.IMPERATIVE_EVICTOR})
    status: Obj = {"targetResponders": targets}
    if initialised:
        status["responders"] = responders
    return {
        "apiVersion": f"{names.AIOKCM_GROUP}/{names.VERSION}",
        "kind": names.EVICTION_KIND,
        "metadata": {"name": "ev", "namespace": NS, "uid": "ev-uid", "resourceVersion": "3"},
        "spec": {"target": {"pod": {"name": "web-1", "uid": "uid-web-1"}}},
        "status": status,
    }


def others(count: int, *, ready: bool = True, start: int = 2) -> list[Obj]:
    """`count` more pods of `web-abc` (web-2, web-3, ...) on other nodes."""
    return [pod(f"web-{i}", ready=ready, node="node-2") for i in range(start, start + count)]
