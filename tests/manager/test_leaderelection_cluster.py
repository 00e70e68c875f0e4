"""Leader election against an API server (the local one, then a real kube-apiserver): the
standby's watch of the Lease (a name field selector from the resourceVersion it read) delivers
the holder's renewals, so the standby needs no poll between its first and its take-over."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from apiclient import ApiError, KubeClient
from apiclient.resources import LEASES
from controller_manager.leaderelection import LeaderElector
from tests.backends import cluster_on_backend
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local", "real")

NAMESPACE, NAME = "kube-system", "aiokcm-watch-test"


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with cluster_on_backend(request, nodes=0, kubelets=False, scheduler=False, gc=False) as started:
        yield started


class CountingElector(LeaderElector):
    tries = 0

    async def try_acquire_or_renew(self) -> bool:
        self.tries += 1
        return await super().try_acquire_or_renew()


async def test_a_standby_sees_renewals_through_its_watch_and_takes_over_after_the_last(cluster: Any) -> None:
    client_a, client_b = await cluster.client(), await cluster.client()
    try:
        a = LeaderElector(
            client_a,
            namespace=NAMESPACE,
            name=NAME,
            identity="a",
            lease_duration=2.0,
            renew_deadline=1.0,
            retry_period=0.5,
        )
        b = CountingElector(
            client_b,
            namespace=NAMESPACE,
            name=NAME,
            identity="b",
            lease_duration=2.0,
            renew_deadline=1.0,
            retry_period=60.0,
        )
        await a.acquire()
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(b.acquire)
                await eventually(
                    lambda: b.tries == 1 and b.holder() == "a", "b.tries == 1 and b.holder() == 'a'"
                )
                for _ in range(4):  # a renews past b's first observed expiry, then dies
                    await anyio.sleep(0.8)
                    assert await a.try_acquire_or_renew()
                last_renewal = anyio.current_time()
                await eventually(lambda: b.is_leader, "b.is_leader")
                waited = anyio.current_time() - last_renewal
        lease = await client_a.get(LEASES, NAME, namespace=NAMESPACE)
        assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
        assert b.tries == 2  # its first poll and its take-over: every renewal came through the watch
        assert waited >= 2.0  # never before a's last renewal expired
    finally:
        await _delete(client_a)
        await client_a.close()
        await client_b.close()


async def _delete(client: KubeClient) -> None:
    """The real control plane is shared by the session: leave no Lease behind."""
    with contextlib.suppress(ApiError):
        await client.delete(LEASES, NAME, namespace=NAMESPACE)
