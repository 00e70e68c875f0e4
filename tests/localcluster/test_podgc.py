"""Pods of a deleted node are collected as KCM's pod GC collects them (after a quarantine)."""

from __future__ import annotations

from typing import Any

import anyio

from apiclient import resources as R
from tests.localcluster.living import is_ready, living_cluster
from tests.support.waiting import eventually, holds


async def test_pods_of_a_deleted_node_are_failed_then_deleted() -> None:
    async with living_cluster(nodes=2, pod_gc_quarantine=0.3) as (cluster, kube):
        pod = {
            "metadata": {"name": "orphan"},
            "spec": {"nodeName": "node-2", "containers": [{"name": "c", "image": "nginx"}]},
        }
        await kube.create(R.PODS, pod, namespace="default")
        keep = {
            "metadata": {"name": "kept"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]},
        }
        await kube.create(R.PODS, keep, namespace="default")
        for name in ("orphan", "kept"):
            await eventually(
                lambda name=name: holds(kube.get(R.PODS, name, namespace="default"), is_ready),
                f"pod {name} ready",
            )  # type: ignore[misc]
        listed = await kube.list(R.PODS, namespace="default")
        seen: list[tuple[str, dict[str, Any]]] = []

        async def watch(gone: anyio.Event) -> None:
            async with kube.watch(
                R.PODS,
                namespace="default",
                resource_version=listed["metadata"]["resourceVersion"],
                allow_bookmarks=False,
            ) as stream:
                async for ev in stream:
                    seen.append((ev.type, ev.object))
                    if ev.type == "DELETED":
                        gone.set()
                        return

        gone = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, gone)
            cluster.kubelets["node-2"].stop()
            await kube.delete(R.NODES, "node-2")
            with anyio.fail_after(20):
                await gone.wait()
        kind, last = seen[-1]
        assert kind == "DELETED" and last["metadata"]["name"] == "orphan"
        marked = [obj for kind, obj in seen if kind == "MODIFIED" and obj["status"].get("phase") == "Failed"]
        assert marked, seen
        condition = next(c for c in marked[-1]["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert (condition["status"], condition["reason"]) == ("True", "DeletionByPodGC")
        assert is_ready(await kube.get(R.PODS, "kept", namespace="default"))


async def test_a_node_back_within_the_quarantine_keeps_its_pods() -> None:
    async with living_cluster(nodes=1, pod_gc_quarantine=0.5) as (cluster, kube):
        pod = {
            "metadata": {"name": "stays"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]},
        }
        await kube.create(R.PODS, pod, namespace="default")
        await eventually(
            lambda: holds(kube.get(R.PODS, "stays", namespace="default"), is_ready), "pod stays ready"
        )
        kubelet = cluster.kubelets["node-1"]
        kubelet.stop()
        await kube.delete(R.NODES, "node-1")
        kubelet.start()  # registers the node again at once

        # the quarantine ran out and the node was there
        await eventually(lambda: cluster.pod_gc.swept >= 1, "a pod GC sweep")
        assert is_ready(await kube.get(R.PODS, "stays", namespace="default"))
        assert cluster.pod_gc.deleted == 0
