"""Evacuation by surge with the local cluster's own scheduler and kubelets (no test doubles).

The scheduler honours the cordon, the kubelets start pods after a delay and terminate them
gracefully: the Deployment must still keep every replica available while it moves pods.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS
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


@pytest.fixture
async def real_kube() -> AsyncIterator[KubeClient]:
    """A client to a cluster with its own scheduler and kubelets (fast pod start and stop)."""
    async with LocalCluster(nodes=3, pod_start_delay=0.2, termination_cap=0.3) as cluster:
        client = await cluster.client()
        try:
            yield client
        finally:
            await client.close()


@pytest.mark.parametrize("replicas", [1, 3])
async def test_evacuation_with_real_scheduler_and_kubelets(real_kube: KubeClient, replicas: int) -> None:
    kube = real_kube
    sampler = AvailabilitySampler(kube, NS, "rk")
    async with running_controllers(kube, DeploymentController, ReplicaSetController, gates=GATES):
        await kube.create(DEPLOYMENTS, deployment_body("rk", replicas), namespace=NS)
        await eventually(lambda: rollout_complete(kube, "rk"), "rollout", timeout=30)
        node = (await live_pods(kube, "rk"))[0]["spec"]["nodeName"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler.run)
            await eventually(lambda: sampler.samples > 0, "first sample")
            assert await evacuate_node(kube, "rk", node)

            async def done() -> bool:
                return not await pods_on(kube, "rk", node) and await rollout_complete(kube, "rk")

            await eventually(done, f"{node} emptied", timeout=60)
            tg.cancel_scope.cancel()
    assert sampler.minimum is not None and sampler.minimum >= replicas
