"""SharedInformer and factory behaviour against the fake API server."""

from __future__ import annotations

import anyio
import anyio.abc
import pytest

from apiclient.resources import NODEMAINTENANCES, NODES, PODS
from informers import (
    NODE_NAME_INDEX,
    ResourceEventHandler,
    SharedInformerFactory,
    field_index,
    pod_projection,
)
from tests.support.waiting import eventually

from .fakeserver import FakeApiServer
from .helpers import Obj, Recorder, pod


async def test_initial_list_is_paginated_and_delivered_as_adds(
    server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    async with anyio.create_task_group() as tg:
        for i in range(1203):
            server.create(PODS, pod(f"p{i:04d}", node=f"n{i % 3}"))
        inf = factory.informer(PODS)
        rec = Recorder()
        reg = inf.add_event_handler(rec.handler())
        factory.start(tg)
        assert await factory.wait_for_cache_sync(timeout=10)
        assert server.requests["list"] == 3  # 500 + 500 + 203
        assert len(inf.lister.list()) == 1203
        assert len(inf.lister.by_index(NODE_NAME_INDEX, "n1")) == 401
        assert inf.last_sync_resource_version == str(server.rv)
        await eventually(reg.has_synced, "reg.has_synced")
        assert len(rec.replica) == 1203 and rec.duplicate_adds == 0
        assert {e[0] for e in rec.events} == {"add"}
        tg.cancel_scope.cancel()


async def test_watch_events_update_cache_and_handlers_in_order(
    server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    async with anyio.create_task_group() as tg:
        inf = factory.informer(PODS)
        rec = Recorder()
        inf.add_event_handler(rec.handler())
        factory.start(tg)
        await factory.wait_for_cache_sync()
        await server.wait_for_watches()
        p = server.create(PODS, pod("a"))
        p = server.update(PODS, {**p, "spec": {**p["spec"], "nodeName": "n1"}})
        server.delete(PODS, "a", "default")
        await eventually(lambda: len(rec.events) == 3, "len(rec.events) == 3")
        assert [e[0] for e in rec.events] == ["add", "update", "delete"]
        old, new = rec.events[1][2]
        assert "nodeName" not in old["spec"] and new["spec"]["nodeName"] == "n1"
        assert inf.lister.get("a", "default") is None
        assert inf.last_sync_resource_version == str(server.rv)
        tg.cancel_scope.cancel()


async def test_handler_added_after_sync_gets_current_objects_as_adds(
    server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    async with anyio.create_task_group() as tg:
        for i in range(5):
            server.create(PODS, pod(f"p{i}"))
        inf = factory.informer(PODS)
        factory.start(tg)
        await factory.wait_for_cache_sync()
        late = Recorder()
        reg = inf.add_event_handler(late.handler())
        await eventually(reg.has_synced, "reg.has_synced")
        assert sorted(late.replica) == [f"default/p{i}" for i in range(5)]
        await server.wait_for_watches()
        server.create(PODS, pod("p5"))
        await eventually(lambda: "default/p5" in late.replica, "'default/p5' in late.replica")
        assert late.duplicate_adds == 0
        tg.cancel_scope.cancel()


async def test_a_failing_handler_does_not_stop_the_others(
    server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    async with anyio.create_task_group() as tg:
        calls: list[str] = []

        def boom(obj: Obj) -> None:
            calls.append(obj["metadata"]["name"])
            raise RuntimeError("handler bug")

        inf = factory.informer(PODS)
        inf.add_event_handler(ResourceEventHandler(on_add=boom))
        good = Recorder()
        inf.add_event_handler(good.handler())
        for i in range(600):
            server.create(PODS, pod(f"p{i:03d}"))
        factory.start(tg)
        await eventually(lambda: len(good.replica) == 600, "len(good.replica) == 600")
        await server.wait_for_watches()
        server.create(PODS, pod("late"))
        await eventually(lambda: "default/late" in good.replica, "'default/late' in good.replica")
        assert len(calls) == 601  # the failing handler kept getting events too
        tg.cancel_scope.cancel()


async def test_removed_handler_gets_nothing_more(
    server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    async with anyio.create_task_group() as tg:
        inf = factory.informer(PODS)
        gone, kept = Recorder(), Recorder()
        reg = inf.add_event_handler(gone.handler())
        inf.add_event_handler(kept.handler())
        factory.start(tg)
        await factory.wait_for_cache_sync()
        await server.wait_for_watches()
        inf.remove_event_handler(reg)
        server.create(PODS, pod("a"))
        await eventually(lambda: "default/a" in kept.replica, "'default/a' in kept.replica")
        assert gone.events == []
        tg.cancel_scope.cancel()


async def test_resync_replays_cached_objects_as_updates(server: FakeApiServer) -> None:
    async with anyio.create_task_group() as tg:
        from .conftest import FAST

        server.create(PODS, pod("a"))
        factory = SharedInformerFactory(server.client(), resync_period=0.01, options=FAST)
        rec = Recorder()
        factory.informer(PODS).add_event_handler(rec.handler())
        factory.start(tg)
        await eventually(
            lambda: sum(1 for e in rec.events if e[0] == "update") >= 2,
            "sum((1 for e in rec.events if e[0] == 'update')) >= 2",
        )
        old, new = next(e[2] for e in rec.events if e[0] == "update")
        assert old is new
        assert rec.duplicate_adds == 0
        tg.cancel_scope.cancel()


async def test_factory_shares_one_informer_per_resource_namespace_and_selectors(
    server: FakeApiServer,
) -> None:
    factory = SharedInformerFactory(server.client())
    a = factory.informer(PODS)
    assert factory.informer(PODS) is a
    assert factory.informer(PODS, label_selector=" app=web ") is factory.informer(
        PODS, label_selector="app=web"
    )
    assert factory.informer(PODS, namespace="ns1") is not a
    assert factory.informer(NODES, namespace="ignored") is factory.informer(NODES)
    assert len(factory.informers()) == 4


async def test_a_shared_informer_reads_as_often_as_its_most_eager_caller(server: FakeApiServer) -> None:
    factory = SharedInformerFactory(server.client())
    leases = factory.informer(NODES, read_interval=0.25)
    assert leases.reflector.read_interval == 0.25
    factory.informer(NODES, read_interval=1.0)
    assert leases.reflector.read_interval == 0.25
    factory.informer(NODES)  # a caller acting on each event: at once
    assert leases.reflector.read_interval == 0.0


async def test_events_read_at_an_interval_reach_the_cache_in_order(server: FakeApiServer) -> None:
    factory = SharedInformerFactory(server.client())
    async with anyio.create_task_group() as tg:
        inf = factory.informer(PODS, read_interval=0.05)
        rec = Recorder()
        inf.add_event_handler(rec.handler())
        factory.start(tg)
        await factory.wait_for_cache_sync()
        await server.wait_for_watches()
        for i in range(20):
            server.create(PODS, pod(f"p{i:02d}"))
        server.delete(PODS, "p00", "default")
        await eventually(lambda: len(rec.events) == 21, "len(rec.events) == 21")
        assert [e[0] for e in rec.events] == ["add"] * 20 + ["delete"]
        assert sorted(o["metadata"]["name"] for o in inf.lister.list()) == [f"p{i:02d}" for i in range(1, 20)]
        assert inf.last_sync_resource_version == str(server.rv)
        tg.cancel_scope.cancel()


async def test_conflicting_transforms_fall_back_to_the_default_before_start(server: FakeApiServer) -> None:
    factory = SharedInformerFactory(server.client(), transforms={PODS: pod_projection})
    inf = factory.informer(PODS)
    assert inf.transform is pod_projection
    assert factory.informer(PODS, transform=lambda o: o) is inf
    assert inf.transform is not pod_projection


async def test_custom_resource_and_late_informer_start_in_the_running_factory(
    server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    async with anyio.create_task_group() as tg:
        server.create(NODEMAINTENANCES, {"metadata": {"name": "nm1"}, "spec": {"cordon": True}})
        server.create(PODS, pod("a", "ns1"))
        server.create(PODS, pod("b", "ns2"))
        factory.start(tg)  # nothing asked for yet
        nm = factory.informer(NODEMAINTENANCES)
        pods_ns1 = factory.informer(PODS, namespace="ns1")
        assert await factory.wait_for_cache_sync(timeout=10)
        got = nm.lister.get("nm1")
        assert got is not None and got["kind"] == "NodeMaintenance" and got["spec"]["cordon"] is True
        assert [p["metadata"]["name"] for p in pods_ns1.lister.list()] == ["a"]
        tg.cancel_scope.cancel()


async def test_custom_indexer_on_a_running_informer(
    server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    async with anyio.create_task_group() as tg:
        server.create(PODS, pod("a", phase="Pending"))
        inf = factory.informer(PODS)
        factory.start(tg)
        await factory.wait_for_cache_sync()
        inf.add_indexers({"phase": field_index("status", "phase")})
        assert [p["metadata"]["name"] for p in inf.lister.by_index("phase", "Pending")] == ["a"]
        tg.cancel_scope.cancel()


async def test_wait_for_cache_sync_times_out_while_lists_fail(
    server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    async with anyio.create_task_group() as tg:
        server.fail_next("list", 500, count=1_000_000)
        inf = factory.informer(PODS)
        factory.start(tg)
        assert not await factory.wait_for_cache_sync(timeout=0.2)
        assert not inf.has_synced()
        assert server.requests["list"] >= 2  # retried with backoff
        tg.cancel_scope.cancel()


async def test_informer_runs_once(server: FakeApiServer, factory: SharedInformerFactory) -> None:
    inf = factory.informer(PODS)
    async with anyio.create_task_group() as group:
        group.start_soon(inf.run)
        await inf.wait_synced()
        with pytest.raises(RuntimeError):
            await inf.run()
        group.cancel_scope.cancel()
