"""The NodeMaintenance tests' cluster: three nodes with scheduler, kubelets and garbage collector.

The pods' owners are live objects (a ReplicaSet scaled to zero, a DaemonSet held to one node), so
a garbage collector, the embedded one or kube-controller-manager's, leaves the pods alone; the
owner's answer (`EvacuationInitiated`) is still written by the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.backends import cluster_on_backend


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with cluster_on_backend(request, nodes=3) as started:
        yield started
