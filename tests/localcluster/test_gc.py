"""Garbage collection of owned objects: background, foreground (dependents first) and orphan."""

from __future__ import annotations

import asyncio

from apiclient import ApiError, KubeClient
from apiclient import resources as R
from tests.localcluster.living import (
    is_ready,
    living_cluster,
    owned_pod,
    pods,
    replicaset_with_pods,
)
from tests.support.waiting import eventually, holds, when


async def _exists(kube: KubeClient, res: R.Resource, name: str) -> bool:
    try:
        await kube.get(res, name, namespace="default")
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    return True


async def test_background_deletion_removes_dependents() -> None:
    async with living_cluster(nodes=2) as (_, kube):
        await replicaset_with_pods(kube, "bg", 3)
        await kube.delete(R.REPLICASETS, "bg", namespace="default", propagation_policy="Background")
        assert not await _exists(kube, R.REPLICASETS, "bg")
        await eventually(lambda: holds(pods(kube, selector="app=bg"), lambda ps: ps == []), "no app=bg pods")


async def test_foreground_deletion_removes_the_pods_before_the_replicaset() -> None:
    async with living_cluster(nodes=2) as (cluster, kube):
        _, names = await replicaset_with_pods(kube, "fg", 4)
        await eventually(
            lambda: holds(
                pods(kube, selector="app=fg"), lambda ps: len(ps) == 4 and all(is_ready(p) for p in ps)
            ),
            "len(ps) == 4 and all(is_ready(p) for p in ps)",
        )
        rs_list = await kube.list(R.REPLICASETS, namespace="default")
        order: list[tuple[str, str]] = []

        async def record(res: R.Resource, rv: str) -> None:
            async with kube.watch(res, namespace="default", resource_version=rv) as events:
                async for ev in events:
                    if ev.type == "DELETED":
                        order.append((ev.object["kind"], ev.object["metadata"]["name"]))
                        if ev.object["kind"] == "ReplicaSet":
                            return

        # a stopped kubelet holds one pod in Terminating: the ReplicaSet must wait for it
        cluster.kubelets["node-1"].stop()
        watcher = asyncio.create_task(record(R.PODS, rs_list["metadata"]["resourceVersion"]))
        rs_watcher = asyncio.create_task(record(R.REPLICASETS, rs_list["metadata"]["resourceVersion"]))
        await kube.delete(R.REPLICASETS, "fg", namespace="default", propagation_policy="Foreground")
        rs = await kube.get(R.REPLICASETS, "fg", namespace="default")
        assert rs["metadata"]["deletionTimestamp"] and "foregroundDeletion" in rs["metadata"]["finalizers"]
        await eventually(
            lambda: holds(
                pods(kube, selector="app=fg"),
                lambda ps: all(p["metadata"].get("deletionTimestamp") for p in ps) and len(ps) == 2,
            ),
            "all(p['metadata'].get('deletionTimestamp') for p in ps) and len(ps) == 2",
        )
        assert await _exists(kube, R.REPLICASETS, "fg")
        cluster.kubelets["node-1"].start()
        await rs_watcher
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        assert not await _exists(kube, R.REPLICASETS, "fg")
        pod_deletions = [name for kind, name in order if kind == "Pod"]
        assert sorted(pod_deletions) == sorted(names)
        assert order[-1] == ("ReplicaSet", "fg")


async def test_orphan_deletion_keeps_the_pods_without_owner_references() -> None:
    async with living_cluster(nodes=2) as (_, kube):
        await replicaset_with_pods(kube, "orph", 2)
        await kube.delete(R.REPLICASETS, "orph", namespace="default", propagation_policy="Orphan")
        await eventually(
            lambda: holds(_exists(kube, R.REPLICASETS, "orph"), lambda present: not present),
            "ReplicaSet orph gone",
        )
        items = await pods(kube, selector="app=orph")
        assert len(items) == 2
        assert all(
            not p["metadata"].get("ownerReferences") and not p["metadata"].get("deletionTimestamp")
            for p in items
        )


async def test_dependents_of_a_missing_owner_are_collected_and_dangling_references_dropped() -> None:
    async with living_cluster(nodes=1) as (_, kube):
        ghost = {"metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}}
        await kube.create(R.PODS, owned_pod("orphaned", ghost, labels={"app": "ghost"}), namespace="default")
        rs, _ = await replicaset_with_pods(kube, "alive", 1)
        both = owned_pod("two-owners", rs, labels={"app": "two"})
        both["metadata"]["ownerReferences"].append(
            {**owned_pod("x", ghost, labels={})["metadata"]["ownerReferences"][0], "controller": False}
        )
        await kube.create(R.PODS, both, namespace="default")
        await eventually(
            lambda: holds(_exists(kube, R.PODS, "orphaned"), lambda present: not present), "pod orphaned gone"
        )
        kept = await eventually(
            lambda: when(
                kube.get(R.PODS, "two-owners", namespace="default"),
                lambda p: len(p["metadata"]["ownerReferences"]) == 1,
            ),
            "len(p['metadata']['ownerReferences']) == 1",
        )
        assert kept["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]


async def test_foreground_deletion_cascades_through_a_chain_of_owners() -> None:
    async with living_cluster(nodes=2) as (_, kube):
        labels = {"app": "chain"}
        template = {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
        }
        dep = await kube.create(
            R.DEPLOYMENTS,
            {
                "metadata": {"name": "chain"},
                "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": template},
            },
            namespace="default",
        )
        rs = await kube.create(
            R.REPLICASETS,
            {
                "metadata": {
                    "name": "chain-1",
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": "chain",
                            "uid": dep["metadata"]["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": template},
            },
            namespace="default",
        )
        for i in range(2):
            await kube.create(R.PODS, owned_pod(f"chain-1-{i}", rs, labels=labels), namespace="default")
        await eventually(
            lambda: holds(
                pods(kube, selector="app=chain"), lambda ps: len(ps) == 2 and all(is_ready(p) for p in ps)
            ),
            "len(ps) == 2 and all(is_ready(p) for p in ps)",
        )
        listed = await kube.list(R.REPLICASETS, namespace="default")
        rs_events: list[tuple[str, list[str]]] = []

        async def record() -> None:
            async with kube.watch(
                R.REPLICASETS, namespace="default", resource_version=listed["metadata"]["resourceVersion"]
            ) as events:
                async for ev in events:
                    if ev.type in ("MODIFIED", "DELETED"):
                        rs_events.append((ev.type, list(ev.object["metadata"].get("finalizers") or [])))
                        if ev.type == "DELETED":
                            return

        recorder = asyncio.create_task(record())
        await kube.delete(R.DEPLOYMENTS, "chain", namespace="default", propagation_policy="Foreground")
        await recorder
        # the ReplicaSet has dependents of its own, so it went in the foreground too: its pods first
        assert ("MODIFIED", ["foregroundDeletion"]) in rs_events
        await eventually(
            lambda: holds(_exists(kube, R.DEPLOYMENTS, "chain"), lambda present: not present),
            "Deployment chain gone",
        )
        assert await pods(kube, selector="app=chain") == []
