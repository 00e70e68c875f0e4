"""What the NodeMaintenance integration suites share: objects made the way users and controllers make them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from apiclient import ApiError, KubeClient
from apiclient.resources import (
    DAEMONSETS,
    DEPLOYMENTS,
    NODEMAINTENANCES,
    NODES,
    PODS,
    REPLICASETS,
    STATEFULSETS,
)
from controllers import features
from controllers.nodemaintenance.api import PHASE_ANNOTATION
from controllers.nodemaintenance.config import NodeMaintenanceConfig

NS = "default"
GATES = {features.DECLARATIVE_NODE_MAINTENANCE: True}
# For tests of overlapping maintenances on the 3-node cluster, where the default cluster-wide guard
# (50% of the nodes unschedulable) would hold the second cordon back.
NO_CLUSTER_LIMIT = NodeMaintenanceConfig(max_unschedulable="100%")


OWNER_RESOURCES = {
    "ReplicaSet": REPLICASETS,
    "StatefulSet": STATEFULSETS,
    "Deployment": DEPLOYMENTS,
    "DaemonSet": DAEMONSETS,
}


async def make_owner(
    kube: KubeClient,
    kind: str,
    name: str,
    *,
    answers: bool = False,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A live owner with no replicas (no controller of its kind runs here): what the drain looks up.

    `answers` marks a ReplicaSet `evacuation-ready`, as the Deployment controller does for one that surges.
    """
    notes = dict(annotations or {})
    if answers:
        notes["deployment.kubernetes.io/evacuation-ready"] = "true"
    labels = {"owner": name}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}
    spec: dict[str, Any] = {"selector": {"matchLabels": labels}, "template": template}
    if kind != "DaemonSet":
        spec["replicas"] = 0
    if kind == "StatefulSet":
        spec["serviceName"] = name
    body = {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NS, "annotations": notes},
        "spec": spec,
    }
    return await kube.create(OWNER_RESOURCES[kind], body, namespace=NS)


async def make_pod(
    kube: KubeClient,
    name: str,
    node: str,
    *,
    owner: str | None = "ReplicaSet",
    labels: dict[str, str] | None = None,
    mirror: bool = False,
    answers: bool = True,
    owner_obj: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    volumes: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A pod bound to `node`; its owner (of kind `owner`) is created too unless `owner_obj` is given.

    By default a ReplicaSet that answers EvacuationRequests (the test writes the answer).
    """
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "labels": labels or {"app": name},
        "annotations": dict(annotations or {}),
    }
    if owner:
        if owner_obj is None:
            owner_obj = await make_owner(
                kube, owner, f"{name}-owner", answers=answers and owner == "ReplicaSet"
            )
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner,
                "name": owner_obj["metadata"]["name"],
                "uid": owner_obj["metadata"]["uid"],
                "controller": True,
            }
        ]
    if mirror:
        meta["annotations"]["kubernetes.io/config.mirror"] = "hash"
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]}
    if volumes:
        spec["volumes"] = volumes
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    return await kube.create(PODS, body, namespace=NS)


async def pod(kube: KubeClient, name: str) -> dict[str, Any] | None:
    return await kube.get_or_none(PODS, name, namespace=NS)


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


async def gone_or_terminating(kube: KubeClient, name: str) -> bool:
    p = await pod(kube, name)
    return p is None or bool(p["metadata"].get("deletionTimestamp"))


async def node(kube: KubeClient, name: str) -> dict[str, Any]:
    return await kube.get(NODES, name)


async def nm_gone(kube: KubeClient, name: str) -> bool:
    try:
        await kube.get(NODEMAINTENANCES, name)
    except ApiError as exc:
        return exc.not_found
    return False


IN_PROGRESS_PHASES = frozenset({"WaitingForLease", "Draining"})


@dataclass
class RolloutWatch:
    """What a watch on nodes and one maintenance saw, event by event, while a drain ran.

    `most_in_progress`: the most nodes at once that the maintenance's status showed draining (or
    waiting for their lease); `most_cordoned_not_drained`: the most nodes at once that were
    unschedulable without being drained (the node annotation); `cordon_order`: the order nodes
    became unschedulable.
    """

    most_in_progress: int = 0
    most_cordoned_not_drained: int = 0
    status_events: int = 0
    cordon_order: list[str] = field(default_factory=list)

    async def nodes(self, kube: KubeClient, *, ignore: frozenset[str] = frozenset()) -> None:
        listed = await kube.list(NODES)
        state = {n["metadata"]["name"]: n for n in listed["items"]}
        self._nodes_seen(state, ignore)
        async with kube.watch(NODES, resource_version=listed["metadata"]["resourceVersion"]) as events:
            async for ev in events:
                if ev.type in ("ADDED", "MODIFIED"):
                    state[ev.object["metadata"]["name"]] = ev.object
                elif ev.type == "DELETED":
                    state.pop(ev.object["metadata"]["name"], None)
                self._nodes_seen(state, ignore)

    def _nodes_seen(self, state: dict[str, dict[str, Any]], ignore: frozenset[str]) -> None:
        busy = 0
        for name, n in sorted(state.items()):
            if name in ignore or not (n.get("spec") or {}).get("unschedulable"):
                continue
            if name not in self.cordon_order:
                self.cordon_order.append(name)
            if ((n["metadata"].get("annotations") or {}).get(PHASE_ANNOTATION)) != "Drained":
                busy += 1
        self.most_cordoned_not_drained = max(self.most_cordoned_not_drained, busy)

    async def maintenance(self, kube: KubeClient, name: str) -> None:
        async with kube.watch(
            NODEMAINTENANCES, resource_version="0", field_selector=f"metadata.name={name}"
        ) as events:
            async for ev in events:
                nodes = ((ev.object.get("status") or {}).get("nodes") or {}).values()
                self.status_events += 1
                busy = sum(1 for e in nodes if (e or {}).get("phase") in IN_PROGRESS_PHASES)
                self.most_in_progress = max(self.most_in_progress, busy)
