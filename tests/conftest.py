"""Shared fixtures: a task-leak guard for every async test, the local cluster, a client to it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from apiclient import KubeClient
from localcluster.cluster import LocalCluster


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    """Fail any test that leaves a task running: every background task must be owned and cancelled."""
    before = set(asyncio.all_tasks())
    yield
    current = asyncio.current_task()
    for _ in range(20):
        leaked = {t for t in asyncio.all_tasks() - before if t is not current and not t.done()}
        if not leaked:
            return
        await asyncio.sleep(0.01)
    names = sorted(t.get_name() + ": " + repr(t.get_coro()) for t in leaked)
    for t in leaked:
        t.cancel()
    pytest.fail("test left tasks running:\n  " + "\n  ".join(names))


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    """A started local API server with three Ready nodes."""
    async with LocalCluster(nodes=3) as started:
        yield started


@pytest.fixture
def cluster_factory() -> type[LocalCluster]:
    """For tests that need a cluster with other options: `async with cluster_factory(nodes=1, gc=False)`.

    `LocalCluster` may be entered and left from different tasks (its background actors live in a
    task it owns), so it works directly in async fixtures.
    """
    return LocalCluster


@pytest.fixture
async def kube(cluster: LocalCluster) -> AsyncIterator[KubeClient]:
    """A KubeClient to `cluster`, built from its kubeconfig; closed after the test."""
    client = await cluster.client()
    try:
        yield client
    finally:
        await client.close()
