"""The `aiokcm.embedded` plugin: what `aiokcm run --embedded` and `aiokcm cluster up` start.

The manager may not import `localcluster` (import-linter), so it finds this module through the
`aiokcm.embedded` entry point (`cluster = "localcluster.embedded"` in pyproject.toml) and calls
the two functions below (contract in docs/CONTRACTS.md and `controller_manager/embedded.py`).

Pods asked for with `pods_per_node` belong to one ReplicaSet, `default/workload`, created with
them, so `aiokcm run` has something to manage and `kubectl drain` something to evict; they are
created in-process (no HTTP), then the scheduler and kubelets bind and start them.
"""

from __future__ import annotations

import contextlib
import gc
import math
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import yaml

from localcluster.cluster import LocalCluster

WORKLOAD = "workload"

#: What `deploy/namespace.yaml` creates before aiokcm runs. The embedded cluster stands in for
#: that install: without `aiokcm-system` the manager's webhook certificate upkeep (gate
#: EvictionSurge, on with `--embedded`) failed with a warning every 10 s of `make run`.
INSTALLED_NAMESPACES = ("aiokcm-system", "kube-node-maintenance")


def _install(cluster: LocalCluster) -> None:
    ns_rt = cluster.registry.require("", "v1", "namespaces")
    for name in INSTALLED_NAMESPACES:
        body = {"metadata": {"name": name, "labels": {"app.kubernetes.io/name": "aiokcm"}}}
        cluster.objects.create(ns_rt, None, body)


def _populate(cluster: LocalCluster, pods: int) -> None:
    """A ReplicaSet `workload` of `pods` replicas and its pods, as if its controller had made them."""
    if pods <= 0:
        return
    rs_rt = cluster.registry.require("apps", "v1", "replicasets")
    pod_rt = cluster.registry.require("", "v1", "pods")
    labels = {"app": WORKLOAD}
    template = {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
    }
    rs = cluster.objects.create(
        rs_rt,
        "default",
        {
            "metadata": {"name": WORKLOAD, "labels": labels},
            "spec": {"replicas": pods, "selector": {"matchLabels": labels}, "template": template},
        },
    ).load()
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": WORKLOAD,
        "uid": rs["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    width = max(1, int(math.log10(pods)) + 1)
    for i in range(pods):
        cluster.objects.create(
            pod_rt,
            "default",
            {
                "metadata": {
                    "name": f"{WORKLOAD}-{i:0{width}d}",
                    "labels": labels,
                    "ownerReferences": [owner],
                },
                "spec": template["spec"],
            },
        )


@contextlib.asynccontextmanager
async def start_embedded(
    *, nodes: int, pods_per_node: int = 0, demo: bool = False, demo_exit_after_drain: bool = False
) -> AsyncIterator[str]:
    """Start a local cluster in this process; yields its kubeconfig path; stops it on exit.

    `demo`: run `localcluster.demo` beside the caller (the manager) while the block runs.
    """
    async with LocalCluster(nodes=nodes) as cluster:
        _install(cluster)
        _populate(cluster, nodes * pods_per_node)
        if not demo:
            yield cluster.kubeconfig_path
            return
        from localcluster import demo as narrated

        async with narrated.running(
            cluster.client, kubeconfig=cluster.kubeconfig_path, exit_after_drain=demo_exit_after_drain
        ):
            yield cluster.kubeconfig_path


async def cluster_up(*, nodes: int, pods_per_node: int, kubeconfig: str) -> int:
    """Serve a local cluster until cancelled, with its kubeconfig written to `kubeconfig`."""
    path = Path(kubeconfig)
    async with LocalCluster(nodes=nodes) as cluster:
        _install(cluster)
        _populate(cluster, nodes * pods_per_node)
        gc.freeze()  # the cluster's state is long-lived: keep cyclic-GC pauses off the heartbeats
        await anyio.Path(path).parent.mkdir(parents=True, exist_ok=True)
        await anyio.Path(path).write_text(yaml.safe_dump(cluster.kubeconfig()))
        print(
            f"local cluster serving at {cluster.url}: {nodes} nodes, {nodes * pods_per_node} pods; "
            f"kubeconfig {path} (kubectl --kubeconfig {path} get nodes). Ctrl-C to stop.",
            file=sys.stderr,
            flush=True,
        )
        await anyio.sleep_forever()
    return 0
