"""Each fault of `cluster.faults`, injected and observed by a kubernetes_asyncio-based client."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from apiclient import ApiError
from apiclient import resources as R
from tests.localcluster.living import is_ready, living_cluster, pods, replicaset_with_pods
from tests.support.waiting import eventually, holds


async def test_dropping_every_watch_ends_open_streams() -> None:
    async with living_cluster(nodes=1, kubelets=False, scheduler=False) as (cluster, kube):
        listed = await kube.list(R.CONFIGMAPS, namespace="default")
        seen: list[str] = []

        async def consume() -> None:
            async with kube.watch(
                R.CONFIGMAPS,
                namespace="default",
                resource_version=listed["metadata"]["resourceVersion"],
                allow_bookmarks=False,
            ) as events:
                async for ev in events:
                    seen.append(ev.object["metadata"]["name"])

        task = asyncio.create_task(consume())
        await kube.create(R.CONFIGMAPS, {"metadata": {"name": "one"}}, namespace="default")
        await eventually(lambda: seen == ["one"], "the first watch event")
        assert cluster.faults.drop_watches() >= 1
        await task  # the stream ended: the client sees end-of-watch and must re-watch
        assert seen == ["one"]


async def test_restart_keeps_state_and_port() -> None:
    async with living_cluster(nodes=1, kubelets=False, scheduler=False) as (cluster, kube):
        await kube.create(
            R.CONFIGMAPS, {"metadata": {"name": "kept"}, "data": {"k": "v"}}, namespace="default"
        )
        port = cluster.port
        async with cluster.faults.server_down():
            with pytest.raises((aiohttp.ClientError, OSError)):
                await kube.get(R.CONFIGMAPS, "kept", namespace="default")
        assert cluster.port == port and cluster.faults.restarts == 1
        got = await kube.get(R.CONFIGMAPS, "kept", namespace="default")
        assert got["data"] == {"k": "v"}
        await cluster.faults.restart(downtime=0.05)
        assert cluster.faults.restarts == 2
        assert (await kube.get(R.CONFIGMAPS, "kept", namespace="default"))["data"] == {"k": "v"}


class _HeldAdmission:
    """Stands for a validating webhook that has not answered yet: config map writes wait in
    admission, past the point where the server has taken the request, until `release` is set."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def active(self) -> bool:
        return True

    def candidates(self, request: Any) -> list[object]:
        return [object()] if request.resource == "configmaps" else []

    async def validate(self, request: Any, candidates: list[object], warnings: list[str]) -> None:
        self.entered.set()
        await self.release.wait()


async def test_a_write_being_served_at_a_restart_is_stored_while_its_client_sees_the_drop() -> None:
    """As on a killed kube-apiserver past the point of no return: the client cannot tell a write
    that was stored from one that was not, so a controller may redo it. `cut_writes` names it."""
    async with living_cluster(nodes=1, kubelets=False, scheduler=False) as (cluster, kube):
        held = _HeldAdmission()
        served = cluster.rest.admission
        cluster.rest.admission = held  # type: ignore[assignment]
        try:
            create = asyncio.create_task(
                kube.create(R.CONFIGMAPS, {"metadata": {"name": "cut"}}, namespace="default")
            )
            await asyncio.wait_for(held.entered.wait(), 10)
            async with cluster.faults.server_down():
                held.release.set()
                with pytest.raises((aiohttp.ClientError, OSError)):
                    await create
        finally:
            cluster.rest.admission = served
        assert cluster.faults.cut_writes == [("POST", "/api/v1/namespaces/default/configmaps")]
        stored = await eventually(
            lambda: kube.get(R.CONFIGMAPS, "cut", namespace="default"), "the write stored all the same"
        )
        assert stored["metadata"]["name"] == "cut"
        await cluster.faults.restart(downtime=0.05)  # nothing being served: nothing cut
        assert len(cluster.faults.cut_writes) == 1


async def test_added_latency_delays_every_request() -> None:
    async with living_cluster(nodes=1, kubelets=False, scheduler=False) as (cluster, kube):
        cluster.faults.add_latency(0.3)
        loop = asyncio.get_running_loop()
        start = loop.time()
        await kube.get(R.NODES, "node-1")
        assert loop.time() - start >= 0.3  # a lower bound the fault guarantees, not a speed claim
        cluster.faults.clear()
        assert cluster.faults.latency == 0


async def test_a_fraction_of_requests_fail_with_500_or_429() -> None:
    async with living_cluster(nodes=1, kubelets=False, scheduler=False) as (cluster, kube):
        cluster.faults.fail_requests(1.0, code=429, retry_after=3)
        with pytest.raises(ApiError) as caught:
            await kube.get(R.NODES, "node-1")
        assert caught.value.too_many_requests and caught.value.retry_after_seconds == 3
        cluster.faults.fail_requests(1.0, code=500)
        with pytest.raises(ApiError) as caught:
            await kube.list(R.PODS, namespace="default")
        assert caught.value.status == 500 and caught.value.reason == "InternalError"
        cluster.faults.fail_requests(0.5, code=500)
        outcomes = []
        for _ in range(40):
            try:
                await kube.get(R.NODES, "node-1")
                outcomes.append(True)
            except ApiError as exc:
                assert exc.status == 500
                outcomes.append(False)
        assert 5 < outcomes.count(False) < 35
        cluster.faults.clear()
        await kube.get(R.NODES, "node-1")


async def test_a_shrunk_watch_window_answers_410() -> None:
    async with living_cluster(nodes=1, kubelets=False, scheduler=False) as (cluster, kube):
        listed = await kube.list(R.CONFIGMAPS, namespace="default")
        old_rv = listed["metadata"]["resourceVersion"]
        for i in range(5):
            await kube.create(R.CONFIGMAPS, {"metadata": {"name": f"cm-{i}"}}, namespace="default")
        cluster.faults.shrink_watch_window(2)
        events = []
        try:
            async with kube.watch(
                R.CONFIGMAPS, namespace="default", resource_version=old_rv, allow_bookmarks=False
            ) as stream:
                async for ev in stream:
                    events.append(ev)
        except ApiError as exc:  # a client may see the 410 as the answer itself
            assert exc.gone
        else:
            assert [ev.type for ev in events] == ["ERROR"]
            assert events[0].object["code"] == 410 and events[0].object["reason"] == "Expired"


async def test_the_scheduler_kubelets_and_gc_survive_dropped_watches() -> None:
    async with living_cluster(nodes=2) as (cluster, kube):
        cluster.faults.drop_watches()
        await replicaset_with_pods(kube, "after", 2)
        await eventually(
            lambda: holds(
                pods(kube, selector="app=after"), lambda ps: len(ps) == 2 and all(is_ready(p) for p in ps)
            ),
            "len(ps) == 2 and all(is_ready(p) for p in ps)",
        )
        cluster.faults.drop_watches()
        await kube.delete(R.REPLICASETS, "after", namespace="default")
        await eventually(
            lambda: holds(pods(kube, selector="app=after"), lambda ps: ps == []), "no app=after pods"
        )
