"""A quiet cluster gets no writes: once a mixed cluster of odd but valid objects has converged,
the manager, every controller on, sends the API server nothing more.

Writes are counted by the server (its request log), so every path counts: status patches that
change nothing, events, requeue loops that write, timestamps rewritten on each sync.
"""

from __future__ import annotations

import time

import anyio

from apiclient import KubeClient
from apiclient.resources import PODS
from localcluster.cluster import LocalCluster
from localcluster.demo import ensure_crd
from localcluster.requestlog import RequestLog
from tests.controllers.harness import eventually
from tests.e2e import oddworld
from tests.e2e.world import describe, manager_options, running_manager, settled, writes_over

WINDOW = 5.0  # longer than any resync-like period a no-op loop would show in (1 s, 2 s ...)


async def test_a_converged_mixed_cluster_gets_no_writes(cluster_factory: type[LocalCluster]) -> None:
    async with cluster_factory(nodes=3) as cluster:
        kube: KubeClient = await cluster.client()
        try:
            await ensure_crd(kube)
            await oddworld.taint_node(kube)
            created = 0
            for ns in ("odd-a", "odd-b"):
                created += await oddworld.populate(kube, ns)
            began = time.monotonic()
            async with running_manager(cluster, manager_options(cluster)) as manager:
                await eventually(lambda: manager.health.ready, "caches synced")
                await settled(cluster, quiet=3.0)
                converging = writes_over(cluster, began)
                start = time.monotonic()
                await anyio.sleep(WINDOW)
                writes = writes_over(cluster, start)
                taints = next(c for c in manager.controllers if c.name == "taint-eviction-controller")
                due = {name: taints.scheduled(f"odd-a/{name}")  # type: ignore[attr-defined]
                       for name in ("tolerates-68-years", "tolerates-int64-max")}
                now = anyio.current_time()
                survivors = {p["metadata"]["name"] for p in await kube.list_all(PODS, namespace="odd-a")
                             if p["spec"].get("nodeName") == oddworld.TAINTED_NODE}
        finally:
            await kube.close()
    assert created > 40
    # the manager did converge the cluster: pods, ReplicaSets and statuses written
    assert RequestLog.created(converging, "pods") >= 20
    assert RequestLog.created(converging, "replicasets") >= 10
    assert any(w.resource == "poddisruptionbudgets/status" for w in converging)
    # decades of toleration, up to the int64 maximum: scheduled that far out, and alive
    assert all(d is not None and d - now > oddworld.MAX_INT32 - 60 for d in due.values()), due
    assert {"tolerates-68-years", "tolerates-int64-max"} <= survivors
    assert writes == [], f"{len(writes)} writes in {WINDOW} s of a quiet cluster:\n{describe(writes)}"
