"""`kubectl rollout undo` scales the original ReplicaSet back up, as under KCM.

kubectl copies the old ReplicaSet's template into the Deployment as its typed Go client writes
it (with `metadata.creationTimestamp: null`, fields at their zero values left out); the
controller must find that ReplicaSet again by Go's semantic equality (null, absent and empty
alike), not make a third one. Create, set image, undo: two ReplicaSets, the first at full scale.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, REPLICASETS
from controllers.deployment import DeploymentController
from controllers.replicaset import ReplicaSetController
from tests.backends import cluster_on_backend
from tests.controllers.harness import running_controllers
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.backends("local", "real"),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary"),
]

NS = "default"


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with cluster_on_backend(request, nodes=3) as started:
        yield started


async def kubectl(cluster: Any, *args: str) -> str:
    cache = tempfile.mkdtemp(prefix="kubectl-cache-")
    try:
        proc = await asyncio.create_subprocess_exec(
            "kubectl",
            "--kubeconfig",
            cluster.kubeconfig_path,
            "--cache-dir",
            cache,
            "-n",
            NS,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate()
        assert proc.returncode == 0, f"kubectl {' '.join(args)}: {out.decode()}"
        return out.decode()
    finally:
        shutil.rmtree(cache, ignore_errors=True)


async def rolled_out(kube: KubeClient, image: str) -> dict[str, Any] | None:
    d = await kube.get(DEPLOYMENTS, "web", namespace=NS)
    st = d.get("status") or {}
    containers = d["spec"]["template"]["spec"]["containers"]
    done = (
        containers[0]["image"] == image
        and st.get("observedGeneration") == d["metadata"]["generation"]
        and st.get("updatedReplicas") == 2
        and st.get("availableReplicas") == 2
        and st.get("replicas") == 2
    )
    return d if done else None


async def test_rollout_undo_scales_the_first_replicaset_back(cluster: Any, kube: KubeClient) -> None:
    async with running_controllers(kube, DeploymentController, ReplicaSetController):
        await kubectl(cluster, "create", "deployment", "web", "--image=nginx:1.26", "--replicas=2")
        await eventually(lambda: rolled_out(kube, "nginx:1.26"), "nginx:1.26 rolled out", timeout=60)
        first = (await kube.list(REPLICASETS, namespace=NS, label_selector="app=web"))["items"]
        assert len(first) == 1

        await kubectl(cluster, "set", "image", "deployment/web", "nginx=nginx:1.27")
        await eventually(lambda: rolled_out(kube, "nginx:1.27"), "nginx:1.27 rolled out", timeout=60)

        await kubectl(cluster, "rollout", "undo", "deployment/web")
        await eventually(lambda: rolled_out(kube, "nginx:1.26"), "undone to nginx:1.26", timeout=60)

        replica_sets = {
            rs["metadata"]["name"]: rs
            for rs in (await kube.list(REPLICASETS, namespace=NS, label_selector="app=web"))["items"]
        }
        assert len(replica_sets) == 2, sorted(replica_sets)
        original = replica_sets[first[0]["metadata"]["name"]]
        assert original["spec"]["replicas"] == 2
        assert original["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
