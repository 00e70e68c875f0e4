"""List and watch `resourceVersion` semantics, the same requests on both backends.

What a v1.24 kube-apiserver answers: `Exact` reads the objects as they were, a continue page
belongs to its first page's snapshot, an RV the server has not reached is a 504 "Too large
resource version" from the watch cache (a 500 from etcd for an exact read), bad combinations
are 422 on `ListOptions.meta.k8s.io` (400 for an RV beside a continue token), and a watch from
an RV not reached yet waits for it. What needs etcd's compaction (5 minutes on the real server)
is checked on the local backend only, with the compactor run on a virtual clock or by hand.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import orjson
import pytest

from apiclient import KubeClient
from apiclient.resources import CONFIGMAPS
from localcluster.cluster import LocalCluster
from localcluster.storage import Storage
from tests.localcluster.helpers import bare_cluster
from tests.localcluster.test_api_shapes import raw

cluster = pytest.fixture(bare_cluster)
pytestmark = pytest.mark.backends("local", "real")

CMS = "/api/v1/namespaces/default/configmaps"


async def _make(kube: KubeClient, *names: str) -> int:
    rv = 0
    for name in names:
        code, body = await raw(kube, "POST", CMS, {"metadata": {"name": name}})
        assert code == 201, body
        rv = int(body["metadata"]["resourceVersion"])
    return rv


def _names(body: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in body["items"]]


async def test_exact_reads_the_objects_as_they_were(kube: KubeClient) -> None:
    at = await _make(kube, "rv-a", "rv-b")
    await _make(kube, "rv-c")
    assert (await raw(kube, "DELETE", f"{CMS}/rv-a"))[0] == 200
    code, body = await raw(
        kube, "GET", CMS, query={"resourceVersion": str(at), "resourceVersionMatch": "Exact"}
    )
    assert code == 200 and _names(body) == ["rv-a", "rv-b"] and body["metadata"]["resourceVersion"] == str(at)
    # a limit with an RV reads at that RV too (the legacy form of Exact)
    code, body = await raw(kube, "GET", CMS, query={"resourceVersion": str(at), "limit": "1"})
    assert code == 200 and _names(body) == ["rv-a"] and body["metadata"]["resourceVersion"] == str(at)
    code, body = await raw(
        kube, "GET", CMS, query={"resourceVersion": str(at), "resourceVersionMatch": "NotOlderThan"}
    )
    assert code == 200 and sorted(_names(body)) == ["rv-b", "rv-c"]  # the watch cache's order is its own


async def test_continue_pages_are_one_snapshot(kube: KubeClient) -> None:
    await _make(kube, "page-a", "page-c", "page-e")
    code, first = await raw(kube, "GET", CMS, query={"limit": "1"})
    assert code == 200 and _names(first) == ["page-a"] and first["metadata"]["remainingItemCount"] == 2
    await _make(kube, "page-b", "page-d")  # created after the first page
    assert (await raw(kube, "DELETE", f"{CMS}/page-e"))[0] == 200
    code, rest = await raw(kube, "GET", CMS, query={"limit": "5", "continue": first["metadata"]["continue"]})
    assert code == 200 and _names(rest) == ["page-c", "page-e"]
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


async def test_a_resource_version_not_reached_yet(kube: KubeClient) -> None:
    future = await _make(kube, "future") + 1000
    code, body = await raw(kube, "GET", CMS, query={"resourceVersion": str(future)})
    assert code == 504
    cache_rv = body["message"].rsplit(" ", 1)[1]
    assert body["message"] == f"Timeout: Too large resource version: {future}, current: {cache_rv}"
    assert (body["reason"], body["details"]) == (
        "Timeout",
        {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        },
    )
    code, body = await raw(kube, "GET", f"{CMS}/future", query={"resourceVersion": str(future)})
    assert code == 504 and body["reason"] == "Timeout"
    code, body = await raw(
        kube, "GET", CMS, query={"resourceVersion": str(future), "resourceVersionMatch": "Exact"}
    )
    assert (code, body["message"]) == (500, "etcdserver: mvcc: required revision is a future revision")
    assert "reason" not in body
    code, body = await raw(
        kube,
        "GET",
        CMS,
        query={"resourceVersion": str(future), "resourceVersionMatch": "NotOlderThan", "limit": "1"},
    )
    assert code == 504 and "retryAfterSeconds" not in body["details"]


async def test_a_watch_from_a_resource_version_not_reached_yet_waits_for_it(kube: KubeClient) -> None:
    now = await _make(kube, "w-0")
    resp = await kube.api_client.call_api(
        CMS,
        "GET",
        query_params=[("watch", "1"), ("resourceVersion", str(now + 2)), ("timeoutSeconds", "3")],
        auth_settings=["BearerToken"],
        header_params={"Accept": "application/json"},
        _preload_content=False,
    )
    try:
        assert resp.status == 200
        await _make(kube, "w-1", "w-2", "w-3")  # w-1 and w-2 are at or below the RV asked for
        line = await resp.content.readline()
        event = orjson.loads(line)
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "w-3")
    finally:
        resp.release()


async def test_bad_combinations_are_refused_as_the_real_server_does(kube: KubeClient) -> None:
    cases: list[tuple[dict[str, str], int, str]] = [
        (
            {"resourceVersionMatch": "Exact"},
            422,
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            {"resourceVersionMatch": "Exact", "resourceVersion": "0"},
            422,
            'ListOptions.meta.k8s.io "" is invalid: '
            'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
        ),
        (
            {"resourceVersionMatch": "Bogus", "resourceVersion": "5"},
            422,
            'ListOptions.meta.k8s.io "" is invalid: '
            'resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", ""',
        ),
        (
            {"watch": "1", "resourceVersionMatch": "NotOlderThan", "resourceVersion": "1"},
            422,
            'ListOptions.meta.k8s.io "" is '
            "invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch",
        ),
        (
            {"resourceVersion": "abc"},
            500,
            'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax',
        ),
    ]
    for query, want_code, want_message in cases:
        code, body = await raw(kube, "GET", CMS, query=query)
        assert (code, body.get("message")) == (want_code, want_message), query
        if code == 422:
            assert body["details"]["kind"] == "ListOptions" and body["details"]["group"] == "meta.k8s.io"
            assert all(c["field"] == "resourceVersionMatch" for c in body["details"]["causes"])
    await _make(kube, "combo-a", "combo-b")
    code, first = await raw(kube, "GET", CMS, query={"limit": "1"})
    token = first["metadata"]["continue"]
    code, body = await raw(kube, "GET", CMS, query={"limit": "1", "continue": token, "resourceVersion": "5"})
    assert (code, body["message"]) == (400, "specifying resource version is not allowed when using continue")
    code, body = await raw(kube, "GET", CMS, query={"continue": token, "resourceVersionMatch": "Exact"})
    assert code == 422 and len(body["details"]["causes"]) == 2
    code, body = await raw(kube, "GET", CMS, query={"limit": "1", "continue": "garbage"})
    assert code == 400 and body["message"].startswith("invalid continue token: continue key is not valid: ")


async def test_the_watch_cache_answers_every_object_whatever_the_limit(kube: KubeClient) -> None:
    await _make(kube, "all-a", "all-b", "all-c")
    code, body = await raw(kube, "GET", CMS, query={"resourceVersion": "0", "limit": "1"})
    assert (
        code == 200
        and sorted(_names(body)) == ["all-a", "all-b", "all-c"]
        and "continue" not in body["metadata"]
    )


@pytest.mark.backends("local")
async def test_compaction_expires_exact_reads_and_continue_tokens(
    kube: KubeClient, cluster: LocalCluster
) -> None:
    """Two runs of the compactor (5 minutes apart on a real server) and the first page's RV is gone:
    the continue answers 410 with a token that goes on at the latest RV, as etcd3's store does."""
    await _make(kube, "old-a", "old-b", "old-c")
    code, first = await raw(kube, "GET", CMS, query={"limit": "1"})
    at = first["metadata"]["resourceVersion"]
    await _make(kube, "old-bb")
    cluster.storage.compact()
    await _make(kube, "old-d")
    cluster.storage.compact()
    code, body = await raw(kube, "GET", CMS, query={"limit": "1", "continue": first["metadata"]["continue"]})
    assert (code, body["reason"]) == (410, "Expired")
    assert body["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result. You can"
    )
    code, rest = await raw(kube, "GET", CMS, query={"limit": "10", "continue": body["metadata"]["continue"]})
    assert code == 200 and _names(rest) == ["old-b", "old-bb", "old-c", "old-d"]  # inconsistent, as promised
    code, body = await raw(kube, "GET", CMS, query={"resourceVersion": at, "resourceVersionMatch": "Exact"})
    assert (code, body["message"]) == (410, "The resourceVersion for the provided list is too old.")
    # the watch cache is not etcd: a watch from that RV still replays what followed it
    async with kube.watch(CONFIGMAPS, resource_version=at, namespace="default", timeout_seconds=1) as events:
        seen = [ev.object["metadata"]["name"] async for ev in events if ev.type != "BOOKMARK"]
    assert seen == ["old-bb", "old-d"]


@pytest.mark.backends("local")
@pytest.mark.looptime
async def test_the_compactor_runs_every_five_minutes_of_the_loop_clock() -> None:
    storage = Storage()
    storage.write(
        "configmaps", {"metadata": {"name": "a", "namespace": "ns"}}, labels={}, fields={}, expect_new=True
    )
    seen = storage.rv
    async with anyio.create_task_group() as tg:
        tg.start_soon(storage.run_compactor)
        await asyncio.sleep(301)  # the first run notes the revision
        assert storage.compacted_rv == 0
        storage.write(
            "configmaps",
            {"metadata": {"name": "b", "namespace": "ns"}},
            labels={},
            fields={},
            expect_new=True,
        )
        await asyncio.sleep(300)  # the second compacts to it
        assert storage.compacted_rv == seen
        tg.cancel_scope.cancel()
