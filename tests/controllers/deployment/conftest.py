"""Local-cluster fixtures for the Deployment integration tests.

The cluster runs without its scheduler and kubelets: `fakekubelet.FakeKubelet` plays both so a
test decides exactly when pods become ready (held readiness, never-ready images), which the
evacuation tests need to stop a surge half-way.

The cluster is entered and exited in one task it owns: its task group must be left by the task
that entered it, and pytest-asyncio runs fixture setup and teardown in different tasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiclient import KubeClient


@pytest.fixture
async def cluster() -> AsyncIterator[Any]:
    from localcluster.cluster import LocalCluster

    ready = asyncio.Event()
    stop = asyncio.Event()
    holder: list[Any] = []

    async def hold() -> None:
        async with LocalCluster(nodes=3, scheduler=False, kubelets=False) as c:
            holder.append(c)
            ready.set()
            await stop.wait()

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


@pytest.fixture
async def kube(cluster: Any) -> AsyncIterator[KubeClient]:
    client: KubeClient = await cluster.client()
    try:
        yield client
    finally:
        await client.close()
