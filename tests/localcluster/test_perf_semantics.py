"""What the server's fast paths must keep exactly as the slow ones were.

- `remainingItemCount` comes from sorted-key positions (`Storage.count_entries`) instead of
  walking the rest of the keys: it must equal the number of entries the following pages hold,
  per namespace (including namespaces whose names prefix each other) and after any key.
- Sorted keys are held in chunks (`_SortedKeys`): positions and walks must be those of one
  flat sorted list through any sequence of inserts and deletes (chunks splitting and emptying).
- The watch window keeps slim events (no parsed object): a replay still hands out the object.
- One watch line is built per event and shared by every watcher of everything; watchers that
  rewrite the event (selectors turning MODIFIED into ADDED/DELETED) still get their own type.
"""

from __future__ import annotations

import bisect
import itertools
import random
from typing import Any

import aiohttp
import orjson
import pytest

from kubeutil import selectors
from localcluster import watch
from localcluster.cluster import LocalCluster
from localcluster.objects import ObjectAPI
from localcluster.registry import Registry
from localcluster.storage import Storage, _SortedKeys
from localcluster.watch import JSON_FRAMING, WatchOptions, _framer, make_filter

NAMESPACES = ("a", "a-b", "a0", "ab", "b", "default")


def _put(storage: Storage, namespace: str, name: str, labels: dict[str, str] | None = None) -> None:
    obj = {"metadata": {"name": name, "namespace": namespace, "labels": labels or {}}}
    storage.write("pods", obj, labels=labels or {}, fields={}, expect_new=True)


def test_count_entries_matches_iteration_for_every_namespace_and_start() -> None:
    storage = Storage()
    for ns, i in itertools.product(NAMESPACES, range(4)):
        _put(storage, ns, f"p{i}")
    keys = [f"{e.namespace}/{e.name}" for e in storage.iter_entries("pods")]
    scopes: tuple[str | None, ...] = (None, *NAMESPACES, "zz", "a-")
    for scope in scopes:
        for after in (None, "", "a", "a/", "a/p1", "a0", "ab/p3", "zzz", *keys):
            expected = sum(1 for _ in storage.iter_entries("pods", scope, after))
            assert storage.count_entries("pods", scope, after) == expected, (scope, after)
    assert storage.count_entries("nothing") == 0


def test_chunked_keys_behave_as_one_sorted_list() -> None:
    rng = random.Random(7)
    keys = _SortedKeys(load=2)
    flat: list[str] = []
    pool = [f"ns{rng.randint(0, 3)}/k{rng.randint(0, 60):02d}" for _ in range(400)]
    for step in range(600):
        key = rng.choice(pool)
        if key in flat and rng.random() < 0.5:
            keys.remove(key)
            flat.remove(key)
        elif key not in flat:
            keys.add(key)
            bisect.insort(flat, key)
        assert len(keys) == len(flat)
        if step % 10 == 0:
            assert list(keys.iter_from()) == flat
            for probe in (rng.choice(pool), "", "ns1/", "ns10", "zz"):
                assert keys.position(probe) == bisect.bisect_left(flat, probe)
                assert keys.position(probe, after=True) == bisect.bisect_right(flat, probe)
                assert list(keys.iter_from(probe)) == flat[bisect.bisect_left(flat, probe) :]
                assert list(keys.iter_from(probe, after=True)) == flat[bisect.bisect_right(flat, probe) :]
    for key in list(flat):
        keys.remove(key)
    assert len(keys) == 0 and list(keys.iter_from()) == [] and keys.position("a") == 0


def test_walking_entries_survives_writes_made_meanwhile() -> None:
    storage = Storage()
    for i in range(50):
        _put(storage, "a", f"p{i:02d}")
    seen = []
    for entry in storage.iter_entries("pods", "a"):
        seen.append(entry.name)
        if entry.name == "p10":
            storage.remove("pods", {"metadata": {"name": "p11", "namespace": "a"}})
            _put(storage, "a", "p10x")
    # as with one flat list: every untouched key once and in order, the removed one never
    # (the new one may or may not be seen, depending on where the walk is)
    assert [n for n in seen if n != "p10x"] == [f"p{i:02d}" for i in range(50) if i != 11]
    assert seen == sorted(seen)


def _api() -> tuple[ObjectAPI, Registry]:
    from localcluster.builtin import register_builtins

    registry = Registry()
    register_builtins(registry)
    api = ObjectAPI(registry, Storage())
    ns_rt = registry.get("", "v1", "namespaces")
    assert ns_rt is not None
    for ns in NAMESPACES:
        api.create(ns_rt, None, {"metadata": {"name": ns}})
    return api, registry


def test_remaining_item_count_equals_what_the_next_pages_hold() -> None:
    api, registry = _api()
    rt = registry.get("", "v1", "configmaps")
    assert rt is not None
    for ns, i in itertools.product(NAMESPACES, range(5)):
        api.create(rt, ns, {"metadata": {"name": f"cm-{i}"}})
    scopes: tuple[str | None, ...] = (None, "a", "a0", "ab", "default")
    for scope in scopes:
        token = None
        while True:
            page = api.list(rt, scope, limit=2, continue_token=token)
            if page.continue_token is None:
                assert page.remaining is None
                break
            rest = api.list(rt, scope, continue_token=page.continue_token)
            assert page.remaining == len(rest.entries), scope
            token = page.continue_token
    # with a selector the real server leaves the count out
    page = api.list(rt, None, limit=2, label_selector="x!=y")
    assert page.continue_token is not None and page.remaining is None


def test_history_is_slim_but_replays_the_object() -> None:
    storage = Storage()
    _put(storage, "a", "p0", {"app": "x"})
    _put(storage, "a", "p1")
    bucket = storage._buckets["pods"]
    assert all(ev._obj is None for ev in bucket.history)
    with storage.subscribe("pods", 1) as sub:
        events = sub.drain()
    assert [ev.obj["metadata"]["name"] for ev in events] == ["p0", "p1"]
    assert events[0].obj["metadata"]["labels"] == {"app": "x"}
    assert all(ev._obj is None for ev in bucket.history)  # the replay parsed a private copy


def _opts(label_selector: str = "") -> WatchOptions:
    return WatchOptions(
        resource_version=None,
        namespace=None,
        label_selector=selectors.parse(label_selector or None),
        field_requirements=(),
        bookmarks=False,
        timeout=1.0,
        send_initial_events=False,
        first_bookmark_after=1.0,
        bookmark_interval=1.0,
    )


def test_watch_lines_are_shared_unless_rewritten() -> None:
    storage = Storage()
    everything = [storage.subscribe("pods", None, make_filter(_opts())) for _ in range(3)]
    selected = storage.subscribe("pods", None, make_filter(_opts("app=x")))
    _put(storage, "a", "p0")
    obj = {"metadata": {"name": "p0", "namespace": "a", "labels": {"app": "x"}}}
    storage.write("pods", obj, labels={"app": "x"}, fields={}, expect_new=False)
    encode = _framer(lambda _kind, raw: raw, JSON_FRAMING)
    lines = [[encode(ev) for ev in sub.drain()] for sub in everything]
    assert lines[0][0].startswith(b'{"type":"ADDED","object":{') and lines[0][0].endswith(b"}\n")
    assert lines[0][1].startswith(b'{"type":"MODIFIED","object":')
    assert all(a is b for a, b in zip(lines[0], lines[1], strict=True))  # one serialization, shared
    assert lines[1] == lines[2]
    moved_in = [encode(ev) for ev in selected.drain()]
    assert len(moved_in) == 1 and moved_in[0].startswith(b'{"type":"ADDED","object":')
    assert b'"labels":{"app":"x"}' in moved_in[0]
    rewritten = _framer(lambda _kind, raw: raw.replace(b'"p1"', b'"renamed"'), JSON_FRAMING)
    _put(storage, "a", "p1")
    ev = everything[0].drain()[0]
    assert b'"renamed"' in rewritten(ev)  # a Table or another version: render's own bytes
    assert b'"p1"' in encode(ev) and b'"renamed"' not in encode(ev)  # and not cached as the shared line


async def test_watch_batches_keep_order_across_write_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Initial state and backlog go out `MAX_BATCH` events per write: nothing lost, reordered or
    repeated at the seams, and the initial-events-end bookmark still comes after the state."""
    monkeypatch.setattr(watch, "MAX_BATCH", 2)
    async with LocalCluster(nodes=0, scheduler=False, kubelets=False, gc=False, controllers=False) as cluster:
        rt = cluster.registry.get("", "v1", "configmaps")
        assert rt is not None
        for i in range(5):
            cluster.objects.create(rt, "default", {"metadata": {"name": f"cm-{i}"}})
        query = {
            "watch": "true",
            "sendInitialEvents": "true",
            "allowWatchBookmarks": "true",
            "resourceVersionMatch": "NotOlderThan",
        }
        lines: list[dict[str, Any]] = []
        async with (
            aiohttp.ClientSession() as session,
            session.get(cluster.url + "/api/v1/namespaces/default/configmaps", params=query) as resp,
        ):
            async for line in resp.content:
                lines.append(orjson.loads(line))
                if len(lines) == 6:
                    for i in range(5, 10):  # a backlog written while the watcher is not reading
                        cluster.objects.create(rt, "default", {"metadata": {"name": f"cm-{i}"}})
                if len(lines) == 11:
                    break
    names = [(e["type"], e["object"]["metadata"].get("name")) for e in lines]
    assert names[:5] == [("ADDED", f"cm-{i}") for i in range(5)]
    assert names[5][0] == "BOOKMARK"
    assert lines[5]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert names[6:] == [("ADDED", f"cm-{i}") for i in range(5, 10)]
