"""The disruption tests run the cluster without scheduler, kubelets or GC unless a test asks.

The tests play kubelet themselves (pod readiness through the status subresource), so the numbers
they assert are never raced by a simulated kubelet; a test that needs kubelets (`kubectl drain`)
builds its own cluster with `cluster_factory` from tests/conftest.py. `kube` comes from
tests/conftest.py and uses this `cluster`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from localcluster.cluster import LocalCluster
from tests.backends import cluster_on_backend


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[LocalCluster]:
    """On the real backend: kube-apiserver without scheduler or garbage collector, nodes without kubelets."""
    async with cluster_on_backend(request, nodes=3, scheduler=False, kubelets=False, gc=False) as c:
        yield c
