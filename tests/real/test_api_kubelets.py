"""The simulated kubelets of the real tier behave as a kubelet does where tests depend on it.

A pod deleted while its start is still pending is killed all the same: a kubelet never leaves a
pod Terminating because it was still starting it. (The replacement surge deletes a copy the
scheduler has just bound when the pod it was for goes first; such a copy must not linger.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS
from realcluster import ControlPlane, RealCluster
from tests.support.waiting import eventually


@pytest.fixture
async def kube(real_plane: ControlPlane) -> AsyncIterator[KubeClient]:
    async with RealCluster(real_plane, nodes=1, pod_start_delay=20.0, termination_cap=0.5) as cluster:
        client = await cluster.client()
        try:
            yield client
        finally:
            await client.close()


async def test_a_pod_deleted_while_its_start_is_pending_is_finished(kube: KubeClient) -> None:
    body = {
        "metadata": {"name": "starting"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }
    await kube.create(PODS, body, namespace="default")

    async def seen_by_the_kubelet() -> bool:
        pod = await kube.get(PODS, "starting", namespace="default")
        return pod["metadata"].get("uid") is not None

    await eventually(seen_by_the_kubelet, "the pod created", timeout=10)
    await kube.delete(PODS, "starting", namespace="default")  # graceful: 30 s, the kubelet's to finish

    async def gone() -> bool:
        try:
            await kube.get(PODS, "starting", namespace="default")
        except ApiError as exc:
            return exc.not_found
        return False

    # Its start would take 20 s: gone well before means the deletion did not wait for the start.
    assert await eventually(gone, "the pod finished by its kubelet before its pending start", timeout=10)
