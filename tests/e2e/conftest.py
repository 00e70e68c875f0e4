"""A fast local cluster for the end-to-end tests.

Kubelet delays are cut (pods Ready 0.2 s after binding, graceful termination capped at 0.5 s) so a
whole drain takes seconds; nothing here depends on those numbers, the tests only wait for states.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from apiclient import KubeClient
from localcluster.cluster import LocalCluster
from localcluster.demo import ensure_crd


@pytest.fixture
async def fast_cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(nodes=3, pod_start_delay=0.2, termination_cap=0.5) as started:
        yield started


@pytest.fixture
async def fast_kube(fast_cluster: LocalCluster) -> AsyncIterator[KubeClient]:
    """A client to `fast_cluster` with the NodeMaintenance CRD installed and served."""
    client = await fast_cluster.client()
    try:
        await ensure_crd(client)
        yield client
    finally:
        await client.close()
