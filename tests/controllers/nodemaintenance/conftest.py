"""A local cluster without the garbage collector for these tests.

The pods' owners are objects with no controller of their kind running (the owner's answer,
`EvacuationInitiated`, is written by the test); a garbage collector would remove pods the owner
does not list, and the StatefulSet and DaemonSet controllers would replace the hand-made pods of
their owners, so they are off. Scheduler and kubelets stay on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from apiclient import KubeClient
from apiclient.resources import NODES
from localcluster.cluster import LocalCluster
from tests.controllers.nodemaintenance.helpers import NS, make_pod


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(nodes=3, gc=False, controllers=False) as started:
        yield started


@pytest.fixture
async def eviction(kube: KubeClient) -> None:
    """The cluster serves `pods/eviction` (the fallback path needs it): a probe pod is evicted."""
    await make_pod(kube, "probe", "node-1", owner=None)
    await kube.evict(NS, "probe")


@pytest.fixture
async def node_names(kube: KubeClient) -> list[str]:
    nodes = await kube.list_all(NODES)
    names = sorted(n["metadata"]["name"] for n in nodes)
    assert len(names) >= 2
    return names
