"""`aiokcm drain` on a node with a Deployment, a bare pod and a pod with emptyDir data.

The whole path, over HTTP through the real CLI entry point: `--dry-run` tells each pod's fate and
changes nothing (a real drain prints the same plan, then each pod as it leaves); a drain without opt-ins moves the Deployment's pod by surging, keeps the bare pod
and the emptyDir pod (kubectl's refusals, in the status and on stderr), times out saying the
maintenance is still active and how to cancel it; the same drain with `--force
--delete-emptydir-data` then finishes. aiokcm's ReplicaSet, Deployment and NodeMaintenance
controllers run; the cluster provides scheduler, kubelets, garbage collector and eviction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NODES, PODS
from controller_manager import maintenance_cli
from controllers.deployment import DeploymentController
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.replicaset import ReplicaSetController
from localcluster.demo import NS, App, deployment, ensure_crd, pod_available
from tests.backends import cluster_on_backend
from tests.controllers.harness import running_controllers
from tests.support.waiting import eventually

GATES = {"DeclarativeNodeMaintenance": True, "NodeMaintenanceDeployment": True}
TARGET = "node-1"

pytestmark = pytest.mark.backends("local", "real")


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with cluster_on_backend(request, nodes=3, pod_start_delay=0.2, termination_cap=0.5) as c:
        yield c


def bare_pod(name: str, *, empty_dir: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": TARGET,
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}],
    }
    if empty_dir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
        "spec": spec,
    }


async def exists(kube: KubeClient, name: str) -> bool:
    p = await kube.get_or_none(PODS, name, namespace=NS)
    return p is not None and not p["metadata"].get("deletionTimestamp")


async def web_available_off_target(kube: KubeClient) -> bool:
    pods = [
        p
        for p in await kube.list_all(PODS, namespace=NS)
        if (p["metadata"].get("labels") or {}).get("app") == "web"
    ]
    return any(pod_available(p) for p in pods) and all(
        p["spec"].get("nodeName") != TARGET for p in pods if pod_available(p)
    )


async def test_drain_keeps_unowned_and_local_data_pods_until_told(
    cluster: Any, kube: KubeClient, capsys: Any
) -> None:
    await ensure_crd(kube)
    nodes = sorted(n["metadata"]["name"] for n in await kube.list_all(NODES))
    assert TARGET in nodes
    others = [n for n in nodes if n != TARGET]
    async with running_controllers(
        kube, ReplicaSetController, DeploymentController, NodeMaintenanceController, gates=GATES
    ):
        for n in others:
            await kube.patch(NODES, n, {"spec": {"unschedulable": True}})
        await kube.create(DEPLOYMENTS, deployment(App("web", 1)), namespace=NS)
        for body in (bare_pod("bare"), bare_pod("scratch", empty_dir=True)):
            await kube.create(PODS, body, namespace=NS)

        async def ready_on_target() -> bool:
            pods = await kube.list_all(PODS, namespace=NS, field_selector=f"spec.nodeName={TARGET}")
            return sum(1 for p in pods if pod_available(p)) == 3

        await eventually(ready_on_target, "web, bare and scratch ready on the target", timeout=120)
        for n in others:
            await kube.patch(NODES, n, {"spec": {"unschedulable": None}})
        base = ["--kubeconfig", cluster.kubeconfig_path, "--poll-interval", "0.2"]

        assert await maintenance_cli.main(["drain", TARGET, "--dry-run", *base]) == 0
        lines = {ln.split()[1]: ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  ")}
        web = next(k for k in lines if k.startswith(f"{NS}/web-"))
        assert "surge: Deployment web answers by surging" in lines[web], lines
        assert "block: cannot delete Pods that declare no controller" in lines[f"{NS}/bare"]
        assert "block: cannot delete Pods with local storage" in lines[f"{NS}/scratch"]
        assert not (await kube.get(NODES, TARGET))["spec"].get("unschedulable")

        code = await maintenance_cli.main(["drain", TARGET, "--timeout", "6s", *base])
        captured = capsys.readouterr()
        assert code == 1
        assert f"{NS}/bare  NoController" in captured.err and f"{NS}/scratch  LocalStorage" in captured.err
        # each blocker also as it appears, with kubectl's words
        assert (
            f"{NS}/bare  blocked: NoController: cannot delete Pods that declare no controller" in captured.out
        )
        assert "is still active" in captured.err and f"aiokcm uncordon {TARGET}" in captured.err
        assert await exists(kube, "bare") and await exists(kube, "scratch")
        await eventually(
            lambda: web_available_off_target(kube), "web moved off the node by surging", timeout=120
        )

        code = await maintenance_cli.main(
            ["drain", TARGET, "--timeout", "120s", "--force", "--delete-emptydir-data", *base]
        )
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"drained: {TARGET}" in out
        # Each pod's fate up front, and each departure as it happens.
        assert f"{NS}/bare  evict: no controller" in out and f"{NS}/scratch  evict: no controller" in out
        assert f"{NS}/bare  evicted: " in out and f"{NS}/scratch  evicted: " in out
        assert not await exists(kube, "bare") and not await exists(kube, "scratch")
