"""The leader keeps its lease under its own load: 0 -> 600 replicas at KCM's default client budget.

At qps 20 the ReplicaSet controller spends ~30 s creating 600 pods. When leader election shared
that budget, renewals queued behind the creates, the renew deadline passed and the leader exited
in the middle of its own scale-up. Leader election has its own client now (as KCM's); this runs
the whole manager with leader election on and watches the lease the whole time. The lease
timings are tighter than KCM's (a 4 s renew deadline) so a starved renewal cannot hide.
"""

from __future__ import annotations

import anyio

from apiclient.resources import LEASES, NAMESPACES, PODS, REPLICASETS
from localcluster.cluster import LocalCluster
from localcluster.requestlog import RequestLog
from tests.e2e.world import manager_options, running_manager
from tests.support.waiting import eventually

REPLICAS = 600
ELECTION = (
    "--leader-elect=true",
    "--leader-elect-lease-duration=6s",
    "--leader-elect-renew-deadline=4s",
    "--leader-elect-retry-period=1s",
)


async def test_the_leader_keeps_its_lease_through_a_600_pod_scale_up(
    cluster_factory: type[LocalCluster],
) -> None:
    async with cluster_factory(nodes=3, scheduler=False, kubelets=False) as cluster:
        kube = await cluster.client()
        try:
            await kube.create(NAMESPACES, {"metadata": {"name": "big"}})
            await kube.create(
                REPLICASETS,
                {
                    "metadata": {"name": "big"},
                    "spec": {
                        "replicas": 0,
                        "selector": {"matchLabels": {"app": "big"}},
                        "template": {
                            "metadata": {"labels": {"app": "big"}},
                            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
                        },
                    },
                },
                namespace="big",
            )
            opts = manager_options(
                cluster, "--controllers=replicaset", "--kube-api-qps=20", "--kube-api-burst=30", *ELECTION
            )
            lost: list[str] = []
            async with running_manager(cluster, opts, identity="the-leader") as manager:
                elector = manager.elector
                assert elector is not None
                await eventually(lambda: elector.is_leader and manager.health.ready, "leading, caches synced")
                before = await kube.get(LEASES, "aiokcm", namespace="kube-system")

                async def all_created() -> bool:
                    return len(await kube.list_all(PODS, namespace="big")) == REPLICAS

                async with anyio.create_task_group() as tg:

                    async def watch_leadership() -> None:
                        while True:
                            if not elector.is_leader:
                                break
                            await anyio.sleep(0.05)
                        lost.append("the elector stopped leading")
                        tg.cancel_scope.cancel()  # fail now, not when the wait for the pods times out

                    tg.start_soon(watch_leadership)
                    await kube.patch(REPLICASETS, "big", {"spec": {"replicas": REPLICAS}}, namespace="big")
                    await eventually(all_created, f"{REPLICAS} pods", timeout=100, interval=1.0)
                    tg.cancel_scope.cancel()
                assert lost == [], "the leader lost its lease during its own scale-up"
                after = await kube.get(LEASES, "aiokcm", namespace="kube-system")
        finally:
            await kube.close()
    assert after["spec"]["holderIdentity"] == "the-leader"
    assert after["spec"].get("leaseTransitions", 0) == before["spec"].get("leaseTransitions", 0)
    assert after["spec"]["renewTime"] > before["spec"]["renewTime"]
    assert RequestLog.created(cluster.requests.writes, "pods") == REPLICAS
