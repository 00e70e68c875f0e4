"""Local-cluster fixtures for these tests while `tests/conftest.py`'s `cluster` exits its task group
from another task (pytest-asyncio runs fixture setup and teardown in different tasks).

The cluster is entered and left by one task this fixture owns. Delete this file once the shared
fixture does the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from apiclient import KubeClient
from localcluster.cluster import LocalCluster


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    started: asyncio.Future[LocalCluster] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        async with LocalCluster(nodes=3) as c:
            started.set_result(c)
            await stop.wait()

    task = asyncio.create_task(hold(), name="localcluster")
    await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED)
    if not started.done():
        await task  # raises the start-up failure
    try:
        yield started.result()
    finally:
        stop.set()
        await task


@pytest.fixture
async def kube(cluster: LocalCluster) -> AsyncIterator[KubeClient]:
    client = await cluster.client()
    try:
        yield client
    finally:
        await client.close()
