"""Shared pieces of the living-cluster tests (scheduler, kubelets, GC, eviction, faults, drain).

`living_cluster(...)` starts a `LocalCluster` at `SPEED` (a 10 s lease renewal takes 0.1 s, a pod
starts in 10 ms) and hands out a `KubeClient`; tests wait for its states with `tests.support.waiting.eventually`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from apiclient import KubeClient
from apiclient import resources as R
from localcluster.cluster import LocalCluster
from tests.support.objects import replicaset

SPEED = 100.0
T = TypeVar("T")


@asynccontextmanager
async def living_cluster(**options: Any) -> AsyncIterator[tuple[LocalCluster, KubeClient]]:
    options.setdefault("nodes", 3)
    options.setdefault("speed", SPEED)
    async with LocalCluster(**options) as cluster:
        kube = await cluster.client()
        try:
            yield cluster, kube
        finally:
            await kube.close()


def owned_pod(name: str, owner: dict[str, Any], *, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    """A pod as a ReplicaSet controller makes it (controller ownerReference, blockOwnerDeletion)."""
    ref = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "metadata": {"name": name, "labels": labels, "ownerReferences": [ref]},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}], **spec},
    }


async def replicaset_with_pods(
    kube: KubeClient, name: str, replicas: int, *, namespace: str = "default"
) -> tuple[dict[str, Any], list[str]]:
    """A ReplicaSet and its pods, created as its controller would create them."""
    labels = {"app": name}
    rs = await kube.create(
        R.REPLICASETS, replicaset(name, replicas, labels=labels, container="app"), namespace=namespace
    )
    names = []
    for i in range(replicas):
        pod = await kube.create(R.PODS, owned_pod(f"{name}-{i}", rs, labels=labels), namespace=namespace)
        names.append(pod["metadata"]["name"])
    return rs, names


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == type_), None
    )


def is_ready(pod: dict[str, Any]) -> bool:
    cond = condition(pod, "Ready")
    return cond is not None and cond.get("status") == "True"


async def pods(
    kube: KubeClient, namespace: str = "default", selector: str | None = None
) -> list[dict[str, Any]]:
    result = await kube.list(R.PODS, namespace=namespace, label_selector=selector)
    items: list[dict[str, Any]] = result["items"]
    return items
