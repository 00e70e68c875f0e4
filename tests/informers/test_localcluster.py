"""Informers against the embedded API server, under its fault injection."""

from __future__ import annotations

import anyio

from apiclient import KubeClient
from apiclient.resources import CONFIGMAPS
from informers import SharedInformerFactory
from localcluster.cluster import LocalCluster
from tests.support.waiting import eventually

from .conftest import FAST
from .helpers import Recorder


def _cm(name: str, value: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": {"v": value}}


async def _fresh(kube: KubeClient) -> dict[str, str]:
    items = await kube.list_all(CONFIGMAPS, namespace="default")
    return {f"default/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in items}


async def test_cache_equals_a_fresh_list_after_drops_410s_500s_and_a_restart(
    cluster: LocalCluster, kube: KubeClient
) -> None:
    factory = SharedInformerFactory(kube, options=FAST)
    inf = factory.informer(CONFIGMAPS, namespace="default")
    rec = Recorder()
    inf.add_event_handler(rec.handler())
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        assert await factory.wait_for_cache_sync(timeout=20)
        for i in range(20):
            await kube.create(CONFIGMAPS, _cm(f"c{i}", "0"), namespace="default")
        cluster.faults.drop_watches()
        for i in range(0, 20, 2):
            await kube.patch(CONFIGMAPS, f"c{i}", {"data": {"v": "1"}}, namespace="default")
        cluster.faults.shrink_watch_window(1)
        cluster.faults.drop_watches()
        for i in range(0, 20, 3):
            await kube.delete(CONFIGMAPS, f"c{i}", namespace="default")
        cluster.faults.fail_requests(0.3)
        cluster.faults.drop_watches()
        await kube.create(CONFIGMAPS, _cm("during-faults", "x"), namespace="default")
        cluster.faults.clear()
        await cluster.faults.restart(downtime=0.2)
        await kube.create(CONFIGMAPS, _cm("sentinel", "x"), namespace="default")
        await eventually(
            lambda: "default/sentinel" in rec.replica, "'default/sentinel' in rec.replica", timeout=30
        )
        want = await _fresh(kube)
        got = {k: o["metadata"]["resourceVersion"] for k, o in rec.replica.items()}
        assert got == want
        assert {
            f"default/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in inf.lister.list()
        } == want
        assert (rec.duplicate_adds, rec.phantom, rec.out_of_order) == (0, 0, 0)
        tg.cancel_scope.cancel()
