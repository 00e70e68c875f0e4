"""A fake API and a harness for the ports of KCM's `node_lifecycle_controller_test.go`.

`FakeNodeHandler` stands for KCM's `testutil.FakeNodeHandler` plus its fake clientset's pods:
writes land in its own node and pod lists, never in the controller's caches, and
`Harness.sync_node_store()` copies the nodes in, as Go's `syncNodeStore` does. The pods are copied
in before every pass, as Go's `fakeGetPodsAssignedToNode` lists them from the clientset each time.

Time: Go fakes `nc.now`. Here the controller's clock is `Harness.now` as epoch seconds, and wall
time (which stamps conditions and taints and dates a node's creation) is held at the same instant
by time_machine during each call, so a node created years before `now` is years old.

The NoExecute tainting rate is infinite: Go's tests use 100,000 nodes/s on a real clock, which
lets every queued node through in one pass; on a clock that does not move during the pass only
an infinite rate does.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import time_machine

from apiclient import ApiError, KubeClient
from apiclient.resources import NODES, PODS, Resource
from controllers.context import ControllerContext, EventRecorder
from controllers.nodelifecycle import NodeLifecycleController
from controllers.nodelifecycle.config import NodeLifecycleConfig
from controllers.nodelifecycle.zones import EXCLUDE_DISRUPTION_LABEL
from informers import SharedInformerFactory
from kubeutil.timestamps import format_micro_time, format_time
from tests.controllers.harness import build

Obj = dict[str, Any]

UNREACHABLE_NO_EXECUTE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
NOT_READY_NO_EXECUTE = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}

TEST_RATE = float("inf")


def date(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    """`metav1.Date(..., time.UTC)`."""
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def stamp(t: datetime) -> str:
    return format_time(t)


def condition(kind: str, status: str, heartbeat: datetime, transition: datetime) -> Obj:
    return {
        "type": kind,
        "status": status,
        "lastHeartbeatTime": stamp(heartbeat),
        "lastTransitionTime": stamp(transition),
    }


def ready(status: str, heartbeat: datetime, transition: datetime) -> Obj:
    return condition("Ready", status, heartbeat, transition)


def zone_labels(region: str, zone: str) -> dict[str, str]:
    """The stable and beta topology labels KCM's tests put on a node."""
    return {
        "topology.kubernetes.io/region": region,
        "topology.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/region": region,
        "failure-domain.beta.kubernetes.io/zone": zone,
    }


def zone_id(region: str, zone: str) -> str:
    """`testutil.CreateZoneID`."""
    return f"{region}:\x00:{zone}"


def node(
    name: str,
    *,
    created: datetime,
    conditions: Iterable[Obj] = (),
    labels: Mapping[str, str] | None = None,
    excluded: bool = False,
    uid: str = "",
) -> Obj:
    meta: Obj = {"name": name, "uid": uid or f"uid-{name}", "creationTimestamp": stamp(created)}
    all_labels = dict(labels or {})
    if excluded:
        all_labels[EXCLUDE_DISRUPTION_LABEL] = ""
    if all_labels:
        meta["labels"] = all_labels
    return {"metadata": meta, "spec": {}, "status": {"conditions": [dict(c) for c in conditions]}}


def new_pod(name: str, node_name: str) -> Obj:
    """`testutil.NewPod`: in `default`, bound to the node, Ready."""
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"nodeName": node_name},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def lease(node_name: str, renew: datetime) -> Obj:
    """`createNodeLease`."""
    return {
        "metadata": {"name": node_name, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": node_name, "renewTime": format_micro_time(renew)},
    }


def ready_status(obj: Mapping[str, Any]) -> str | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return str(cond.get("status"))
    return None


def has_taint(obj: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    return any(
        t.get("key") == taint["key"] and t.get("effect") == taint["effect"]
        for t in (obj.get("spec") or {}).get("taints") or ()
    )


def taints(obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(t["key"], t["effect"]) for t in (obj.get("spec") or {}).get("taints") or ()]


class FakeNodeHandler:
    """Nodes and pods behind the controller's client; every write is applied and recorded."""

    def __init__(self, nodes: Iterable[Obj], pods: Iterable[Obj] = ()) -> None:
        self.existing: list[Obj] = [copy.deepcopy(n) for n in nodes]
        self._pods: dict[str, Obj] = {}
        self.pods = [copy.deepcopy(p) for p in pods]
        self.node_status_updates: list[Obj] = []  # the node after each status write
        self.pod_status_updates: list[str] = []  # "namespace/name" of each pod status write tried
        self.pod_status_failures: list[Exception] = []  # raised by the next pod status writes
        self.node_status_failures: list[Exception] = []  # raised by the next node status writes
        self.node_gets = 0
        self._rv = 100

    @property
    def pods(self) -> list[Obj]:
        return list(self._pods.values())

    @pods.setter
    def pods(self, pods: Iterable[Obj]) -> None:
        self._pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}

    def node(self, name: str) -> Obj:
        for n in self.existing:
            if n["metadata"]["name"] == name:
                return n
        raise KeyError(name)

    def set_status(self, name: str, status: Obj) -> None:
        """Go's `fakeNodeHandler.Existing[i].Status = ...` (or `UpdateStatus`)."""
        self.node(name)["status"] = copy.deepcopy(status)

    def update(self, obj: Obj) -> None:
        """Go's `fakeNodeHandler.Update`: the node replaced whole."""
        name = obj["metadata"]["name"]
        self.existing = [copy.deepcopy(obj) if n["metadata"]["name"] == name else n for n in self.existing]

    def _bump(self, obj: Obj) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)

    async def patch(
        self,
        res: Resource,
        name: str,
        body: Obj,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **_: Any,
    ) -> Obj:
        if res == PODS:
            return self._patch_pod(f"{namespace}/{name}", body)
        assert res == NODES
        try:
            target = self.node(name)
        except KeyError:
            raise ApiError(404, {"reason": "NotFound"}) from None
        if subresource == "status":
            if self.node_status_failures:
                raise self.node_status_failures.pop(0)
            by_type = {c["type"]: i for i, c in enumerate(target["status"].setdefault("conditions", []))}
            for cond in body["status"]["conditions"]:
                if cond["type"] in by_type:
                    target["status"]["conditions"][by_type[cond["type"]]] = copy.deepcopy(cond)
                else:
                    target["status"]["conditions"].append(copy.deepcopy(cond))
            self._bump(target)
            self.node_status_updates.append(copy.deepcopy(target))
            return copy.deepcopy(target)
        spec = body.get("spec") or {}
        if "taints" in spec:
            target.setdefault("spec", {})["taints"] = copy.deepcopy(spec["taints"] or [])
        labels = (body.get("metadata") or {}).get("labels")
        if labels:
            current = target["metadata"].setdefault("labels", {})
            for key, value in labels.items():
                if value is None:
                    current.pop(key, None)
                else:
                    current[key] = value
        self._bump(target)
        return copy.deepcopy(target)

    def _patch_pod(self, key: str, body: Obj) -> Obj:
        self.pod_status_updates.append(key)
        if self.pod_status_failures:
            raise self.pod_status_failures.pop(0)
        pod = self._pods.get(key)
        if pod is None:
            raise ApiError(404, {"reason": "NotFound"})
        by_type = {c["type"]: c for c in pod["status"].get("conditions") or ()}
        by_type.update({c["type"]: dict(c) for c in body["status"]["conditions"]})
        pod["status"]["conditions"] = list(by_type.values())
        return pod

    async def get_or_none(self, res: Resource, name: str, **_: Any) -> Obj | None:
        assert res == NODES
        self.node_gets += 1
        try:
            return copy.deepcopy(self.node(name))
        except KeyError:
            return None

    async def get(self, res: Resource, name: str, **kwargs: Any) -> Obj:
        found = await self.get_or_none(res, name, **kwargs)
        if found is None:
            raise ApiError(404, {"reason": "NotFound"})
        return found


class _Recorder:
    def __init__(self, events: list[tuple[Obj, str, str, str]]) -> None:
        self.events = events

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append((copy.deepcopy(dict(obj)), type_, reason, message))


class Harness:
    """The controller over a `FakeNodeHandler`, with KCM's test settings and a fake clock."""

    def __init__(self, handler: FakeNodeHandler, *, now: datetime, **config: Any) -> None:
        self.handler = handler
        self.now = now
        self.events: list[tuple[Obj, str, str, str]] = []
        client = cast(KubeClient, handler)
        settings: dict[str, Any] = {
            "node_monitor_grace_period": 50.0,
            "node_startup_grace_period": 60.0,
            "node_monitor_period": 5.0,
            "node_eviction_rate": TEST_RATE,
            "secondary_node_eviction_rate": TEST_RATE,
            "large_cluster_size_threshold": 20,
            "unhealthy_zone_threshold": 0.55,
            **config,
        }
        ctx = ControllerContext(client=client, informers=SharedInformerFactory(client), events=self)
        self.controller = build(
            NodeLifecycleController, ctx, config=NodeLifecycleConfig(**settings), now=self._clock
        )

    def _clock(self) -> float:
        return self.now.timestamp()

    def recorder(self, component: str) -> EventRecorder:
        return _Recorder(self.events)

    def reasons(self) -> list[str]:
        return [reason for _, _, reason, _ in self.events]

    def advance(self, by: timedelta) -> None:
        self.now += by

    @contextmanager
    def wall_clock(self) -> Iterator[None]:
        with time_machine.travel(self.now, tick=False):
            yield

    def sync_node_store(self) -> None:
        store = self.controller.node_informer.store
        store.replace((n["metadata"]["name"], copy.deepcopy(n)) for n in self.handler.existing)

    def sync_lease_store(self, *leases: Obj) -> None:
        store = self.controller.lease_informer.store
        store.replace((f"kube-node-lease/{le['metadata']['name']}", copy.deepcopy(le)) for le in leases)

    def sync_pod_store(self, pods: Iterable[Obj] | None = None) -> None:
        store = self.controller.pod_informer.store
        items = self.handler.pods if pods is None else pods
        # Not copied: a pod status write shows at once, as Go's fake lists pods from its clientset.
        store.replace((f"{p['metadata']['namespace']}/{p['metadata']['name']}", p) for p in items)

    async def monitor_node_health(self) -> None:
        self.sync_pod_store()
        with self.wall_clock():
            await self.controller.health_sync.sync()

    async def no_execute_tainting_pass(self) -> None:
        with self.wall_clock():
            await self.controller.no_execute_sync.sync()

    async def node_queue_pass(self, name: str) -> None:
        with self.wall_clock():
            await self.controller.sync(name)

    async def process_pod(self, key: str) -> None:
        with self.wall_clock():
            await self.controller.pod_sync.sync(key)
