"""The reflector under faults: the cache converges to exactly what a fresh LIST returns."""

from __future__ import annotations

import random

import anyio
import anyio.lowlevel
import pytest

from apiclient.resources import PODS
from informers import Backoff, BackoffPolicy, SharedInformer, SharedInformerFactory
from tests.support.waiting import eventually

from .fakeserver import FakeApiServer
from .helpers import Recorder, pod


def _cache(inf: SharedInformer) -> dict[str, str]:
    return {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
        for o in inf.lister.list()
    }


def _server(server: FakeApiServer) -> dict[str, str]:
    return {k: v["metadata"]["resourceVersion"] for k, v in server.items(PODS).items()}


def _clean(rec: Recorder) -> None:
    assert (rec.duplicate_adds, rec.phantom, rec.out_of_order) == (0, 0, 0)


async def test_bookmarks_only_advance_the_resource_version(
    server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    server.create(PODS, pod("a"))
    inf = factory.informer(PODS)
    rec = Recorder()
    inf.add_event_handler(rec.handler())
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        await server.wait_for_watches()
        server.rv += 10  # other resources moved on
        server.bookmark(PODS)
        server.drop_watches()
        await server.wait_for_watches()
        assert server.watch_rvs[-1] == str(server.rv)  # resumed from the bookmark
        assert inf.last_sync_resource_version == str(server.rv)
        assert [e[0] for e in rec.events] == ["add"]
        assert server.requests["list"] == 1
        tg.cancel_scope.cancel()


async def test_dropped_watch_resumes_from_last_version_without_relist(
    server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    inf = factory.informer(PODS)
    rec = Recorder()
    inf.add_event_handler(rec.handler())
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        await server.wait_for_watches()
        server.create(PODS, pod("a"))
        await eventually(lambda: "default/a" in rec.replica, "'default/a' in rec.replica")
        server.drop_watches()
        server.create(PODS, pod("b"))  # happens while no watch is open
        server.delete(PODS, "a", "default")
        await eventually(
            lambda: "default/b" in rec.replica and "default/a" not in rec.replica,
            "'default/b' in rec.replica and 'default/a' not in rec.replica",
        )
        assert server.requests["list"] == 1
        assert [e[0] for e in rec.events] == ["add", "add", "delete"]
        assert _cache(inf) == _server(server)
        _clean(rec)
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("as_event", [False, True], ids=["http-410", "error-event-410"])
async def test_gone_relists_and_tombstones_deletes_missed_meanwhile(
    server: FakeApiServer, factory: SharedInformerFactory, as_event: bool
) -> None:
    for name in ("keep", "change", "vanish"):
        server.create(PODS, pod(name))
    inf = factory.informer(PODS)
    rec = Recorder()
    inf.add_event_handler(rec.handler())
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        await server.wait_for_watches()
        server.drop_watches()
        server.delete_silently(PODS, "vanish", "default")
        changed = server.items(PODS)["default/change"]
        server.update(PODS, {**changed, "status": {"phase": "Failed"}})
        server.create(PODS, pod("new"))
        if as_event:
            server.fail_next("watch", 410, as_event=True)
        else:
            server.compact()
        await eventually(
            lambda: "default/vanish" not in rec.replica and "default/new" in rec.replica,
            "'default/vanish' not in rec.replica and 'default/new' in rec.replica",
        )
        assert server.requests["list"] == 2
        assert [t.key for t in rec.tombstones] == ["default/vanish"]
        assert rec.tombstones[0].obj["metadata"]["name"] == "vanish"
        assert rec.replica["default/change"]["status"]["phase"] == "Failed"
        assert _cache(inf) == _server(server)
        _clean(rec)
        tg.cancel_scope.cancel()


async def test_too_large_resource_version_relists(
    server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    inf = factory.informer(PODS)
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        await server.wait_for_watches()
        server.fail_next("watch", 504, reason="Timeout", message="Too large resource version: 99, current: 3")
        server.drop_watches()
        server.create(PODS, pod("a"))
        await server.wait_for_watches()
        assert server.requests["list"] == 2
        assert _cache(inf) == _server(server)
        tg.cancel_scope.cancel()


async def test_server_errors_on_watch_retry_from_the_same_version(
    server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    inf = factory.informer(PODS)
    rec = Recorder()
    inf.add_event_handler(rec.handler())
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        await server.wait_for_watches()
        rv = inf.last_sync_resource_version
        server.fail_next("watch", 500, count=3)
        server.fail_next("watch", 429)
        server.drop_watches()
        server.create(PODS, pod("a"))
        await eventually(lambda: "default/a" in rec.replica, "'default/a' in rec.replica")
        assert server.requests["list"] == 1
        assert server.watch_rvs[-5:] == [rv] * 5
        tg.cancel_scope.cancel()


async def test_list_errors_are_retried(server: FakeApiServer, factory: SharedInformerFactory) -> None:
    server.create(PODS, pod("a"))
    server.fail_next("list", 500, count=2)
    inf = factory.informer(PODS)
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        assert await factory.wait_for_cache_sync(timeout=10)
        assert server.requests["list"] == 3
        assert _cache(inf) == _server(server)
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("seed", [6, 7, 8])
async def test_converges_to_a_fresh_list_under_random_faults(
    seed: int, server: FakeApiServer, factory: SharedInformerFactory
) -> None:
    rng = random.Random(seed)
    inf = factory.informer(PODS)
    rec = Recorder()
    inf.add_event_handler(rec.handler())
    names = [f"p{i}" for i in range(30)]
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        await factory.wait_for_cache_sync()
        for step in range(400):
            name = rng.choice(names)
            existing = server.items(PODS).get(f"default/{name}")
            roll = rng.random()
            if existing is None:
                server.create(PODS, pod(name, node=rng.choice(["n1", "n2", None])))
            elif roll < 0.5:
                server.update(
                    PODS, {**existing, "spec": {**existing["spec"], "nodeName": rng.choice(["n1", "n2"])}}
                )
            elif roll < 0.8:
                server.delete(PODS, name, "default")
            else:
                server.delete_silently(PODS, name, "default")
                server.compact()
            fault = rng.random()
            if fault < 0.05:
                server.drop_watches()
            elif fault < 0.08:
                server.compact()
                server.drop_watches()
            elif fault < 0.10:
                server.fail_next("watch", 500)
                server.drop_watches()
            elif fault < 0.11:
                server.fail_next("watch", 410, as_event=True)
                server.drop_watches()
            if step % 25 == 0:
                await anyio.lowlevel.checkpoint()
        target = _server(server)
        # A final event proves the informer caught up with everything before it.
        server.create(PODS, pod("sentinel"))
        await eventually(
            lambda: "default/sentinel" in rec.replica, "'default/sentinel' in rec.replica", timeout=20
        )
        target["default/sentinel"] = server.items(PODS)["default/sentinel"]["metadata"]["resourceVersion"]
        assert _cache(inf) == target
        assert {k: v["metadata"]["resourceVersion"] for k, v in rec.replica.items()} == target
        _clean(rec)
        assert server.requests["list"] >= 2  # the faults did force relists
        tg.cancel_scope.cancel()


@pytest.mark.looptime
async def test_backoff_doubles_to_the_cap_and_resets_after_health() -> None:
    backoff = Backoff(BackoffPolicy(), rng=lambda: 0.0)
    delays = [backoff.next() for _ in range(8)]
    assert delays == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    await anyio.sleep(121)
    assert backoff.next() == 0.8
    jittered = Backoff(BackoffPolicy(), rng=lambda: 1.0)
    assert jittered.next() == 1.6  # up to 100% jitter
