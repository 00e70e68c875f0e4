"""The Deployment integration tests run the cluster without its scheduler and kubelets.

`fakekubelet.FakeKubelet` plays both so a test decides exactly when pods become ready (held
readiness, never-ready images), which the evacuation tests need to stop a surge half-way.
`kube` comes from tests/conftest.py and uses this `cluster`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from localcluster.cluster import LocalCluster


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(nodes=3, scheduler=False, kubelets=False) as c:
        yield c
