"""Evacuation by surge with the local cluster's own scheduler and kubelets (no test doubles).

The scheduler honours the cordon, the kubelets start pods after a delay and terminate them
gracefully: the Deployment must still keep every replica available while it moves pods.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS
from controllers.deployment import DeploymentController
from controllers.replicaset import ReplicaSetController
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
from tests.controllers.harness import eventually, running_controllers


@pytest.fixture
async def real_kube() -> AsyncIterator[KubeClient]:
    from localcluster.cluster import LocalCluster

    ready = asyncio.Event()
    stop = asyncio.Event()
    holder: list[Any] = []

    async def hold() -> None:
        async with LocalCluster(nodes=3, pod_start_delay=0.2, termination_cap=0.3) as c:
            holder.append(await c.client())
            ready.set()
            await stop.wait()
            await holder[0].close()

    task = asyncio.create_task(hold(), name="localcluster")
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if not holder:
        waiter.cancel()
        await task
    try:
        yield holder[0]
    finally:
        stop.set()
        await task


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
