"""Leader hand-off between two in-process managers against the local cluster's real Lease API."""

from __future__ import annotations

import anyio

from apiclient import KubeClient
from apiclient.resources import LEASES
from controller_manager.app import Manager
from controller_manager.options import LeaderElectionOptions, ManagerOptions
from localcluster.cluster import LocalCluster
from tests.support.waiting import eventually

ELECTION = LeaderElectionOptions(lease_duration=2.0, renew_deadline=1.0, retry_period=0.1)


def _manager(client: KubeClient, identity: str) -> Manager:
    opts = ManagerOptions(controllers=(), leader_election=ELECTION, secure_port=0)
    return Manager(opts, client, identity=identity)


async def test_two_managers_hand_over_the_lease(cluster: LocalCluster, kube: KubeClient) -> None:
    client_a, client_b = await cluster.client(), await cluster.client()
    a, b = _manager(client_a, "manager-a"), _manager(client_b, "manager-b")
    codes: dict[str, int] = {}
    try:
        async with anyio.create_task_group() as tg:

            async def run(name: str, manager: Manager) -> None:
                codes[name] = await manager.run(handle_signals=False)

            tg.start_soon(run, "a", a)
            await eventually(
                lambda: a.elector is not None and a.elector.is_leader,
                "a.elector is not None and a.elector.is_leader",
            )
            tg.start_soon(run, "b", b)
            lease = await kube.get(LEASES, "aiokcm", namespace="kube-system")
            assert lease["spec"]["holderIdentity"] == "manager-a"
            await eventually(
                lambda: b.elector is not None and b.elector.holder() == "manager-a",
                "b.elector is not None and b.elector.holder() == 'manager-a'",
            )
            assert not b.elector.is_leader  # type: ignore[union-attr]
            a.stop()  # clean stop: a releases, b takes over without waiting out the lease
            await eventually(
                lambda: b.elector is not None and b.elector.is_leader,
                "b.elector is not None and b.elector.is_leader",
            )
            lease = await kube.get(LEASES, "aiokcm", namespace="kube-system")
            assert lease["spec"]["holderIdentity"] == "manager-b"
            assert lease["spec"]["leaseTransitions"] == 1
            b.stop()
    finally:
        await client_a.close()
        await client_b.close()
    assert codes == {"a": 0, "b": 0}
