"""A HorizontalPodAutoscaler resizing a Deployment while it evacuates a node.

The autoscaler writes the Deployment's `/scale` (as KCM's HPA controller does) after the surge
pod exists and before the old pod is gone: the evacuation must carry on with the new size,
never leaving fewer available pods than the Deployment had, and end with every replica off the
node.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.errors import ApiError
from apiclient.resources import DEPLOYMENTS, Resource
from controllers.deployment import DeploymentController
from controllers.replicaset import ReplicaSetController
from localcluster.cluster import LocalCluster
from tests.controllers.deployment.fakekubelet import AvailabilitySampler
from tests.controllers.deployment.test_integration import (
    GATES,
    NS,
    deployment_body,
    evacuate_node,
    live_pods,
    pods_on,
    rollout_complete,
)
from tests.controllers.harness import running_controllers
from tests.support.waiting import eventually

HPAS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True)


@pytest.fixture
async def kube_with_kubelets() -> AsyncIterator[KubeClient]:
    # pods take a while to start, so the autoscaler's write lands in the middle of the surge
    async with LocalCluster(nodes=3, pod_start_delay=1.0, termination_cap=0.3) as cluster:
        client = await cluster.client()
        try:
            yield client
        finally:
            await client.close()


async def autoscale(kube: KubeClient, name: str, replicas: int) -> None:
    """What the HPA controller writes: the target's Scale, then its own status.

    The Deployment controller writes the same object during the evacuation, so the Scale's
    resourceVersion can be stale by the time it is written; the HPA controller then requeues and
    reads the Scale again, which is what the loop does.
    """
    for _ in range(10):
        scale = await kube.get(DEPLOYMENTS, name, namespace=NS, subresource="scale")
        scale["spec"]["replicas"] = replicas
        try:
            await kube.replace(DEPLOYMENTS, scale, namespace=NS, name=name, subresource="scale")
            break
        except ApiError as err:
            if not err.conflict:
                raise
            await anyio.sleep(0.05)
    else:
        raise AssertionError(f"the Scale of {name} kept conflicting")
    hpa = await kube.get(HPAS, name, namespace=NS)
    hpa["status"] = {"currentReplicas": scale["status"]["replicas"], "desiredReplicas": replicas}
    await kube.replace(HPAS, hpa, namespace=NS, name=name, subresource="status")


@pytest.mark.parametrize(("start", "resized"), [(3, 5), (4, 2)])
async def test_hpa_resizes_a_deployment_mid_evacuation(
    kube_with_kubelets: KubeClient, start: int, resized: int
) -> None:
    kube = kube_with_kubelets
    sampler = AvailabilitySampler(kube, NS, "auto")
    hpa: dict[str, Any] = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "auto"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "auto"},
            "minReplicas": 1,
            "maxReplicas": 10,
        },
    }
    async with running_controllers(kube, DeploymentController, ReplicaSetController, gates=GATES):
        await kube.create(DEPLOYMENTS, deployment_body("auto", start), namespace=NS)
        await kube.create(HPAS, hpa, namespace=NS)
        await eventually(lambda: rollout_complete(kube, "auto"), "rollout", timeout=30)
        node = (await live_pods(kube, "auto"))[0]["spec"]["nodeName"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler.run)
            await eventually(lambda: sampler.samples > 0, "first sample")
            evacuating = await evacuate_node(kube, "auto", node)
            assert evacuating

            async def surging() -> bool:
                return len(await live_pods(kube, "auto")) > start

            await eventually(surging, "the surge pod", timeout=30)
            assert await pods_on(kube, "auto", node), "the autoscaler must act before the old pod is gone"
            await autoscale(kube, "auto", resized)

            async def done() -> bool:
                return not await pods_on(kube, "auto", node) and await rollout_complete(kube, "auto")

            await eventually(done, f"{node} emptied at {resized} replicas", timeout=60)
            tg.cancel_scope.cancel()
    assert sampler.minimum is not None and sampler.minimum >= min(start, resized)
    final = await live_pods(kube, "auto")
    assert len(final) == resized and all(p["spec"]["nodeName"] != node for p in final)
