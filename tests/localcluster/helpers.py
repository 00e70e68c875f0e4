"""The bare-cluster fixture shared by the local cluster tests (object builders: tests.support.objects)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from localcluster.cluster import LocalCluster
from tests.backends import cluster_on_backend


async def bare_cluster(request: pytest.FixtureRequest) -> AsyncIterator[LocalCluster]:
    """An API server only (no scheduler, kubelets, GC or other controllers), for tests of the API's own semantics:
    a module uses it with `cluster = pytest.fixture(bare_cluster)`. On the real backend the
    scheduler and garbage collector still run; nodes are registered but no kubelet runs pods."""
    async with cluster_on_backend(
        request, nodes=3, scheduler=False, kubelets=False, gc=False, controllers=False
    ) as started:
        yield started
