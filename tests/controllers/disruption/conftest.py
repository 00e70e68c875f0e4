"""Local-cluster fixtures for the disruption tests: no scheduler, kubelets or GC unless a test asks.

The tests play kubelet themselves (pod readiness through the status subresource), so the numbers
they assert are never raced by a simulated kubelet. The cluster is entered and exited in one task
it owns: its task group must be left by the task that entered it, and pytest-asyncio runs fixture
setup and teardown in different tasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from apiclient import KubeClient


@asynccontextmanager
async def _held_cluster(**options: Any) -> AsyncIterator[Any]:
    from localcluster.cluster import LocalCluster

    ready = asyncio.Event()
    stop = asyncio.Event()
    holder: list[Any] = []

    async def hold() -> None:
        async with LocalCluster(**options) as c:
            holder.append(c)
            ready.set()
            await stop.wait()

    task = asyncio.create_task(hold(), name="localcluster")
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if not holder:
        waiter.cancel()
        await task  # raises the start-up failure
    try:
        yield holder[0]
    finally:
        stop.set()
        await task


@pytest.fixture
def cluster_factory() -> Callable[..., AbstractAsyncContextManager[Any]]:
    """For tests that need a cluster with other options (kubelets for `kubectl drain`)."""
    return _held_cluster


@pytest.fixture
async def cluster() -> AsyncIterator[Any]:
    async with _held_cluster(nodes=3, scheduler=False, kubelets=False, gc=False) as c:
        yield c


@pytest.fixture
async def kube(cluster: Any) -> AsyncIterator[KubeClient]:
    client: KubeClient = await cluster.client()
    try:
        yield client
    finally:
        await client.close()
