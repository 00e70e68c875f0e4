"""Watch over HTTP: framing, resume from an RV, 410, bookmarks, timeouts and selector moves."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import watch as k8s_watch

from apiclient import KubeClient
from apiclient import resources as R
from localcluster.cluster import LocalCluster
from tests.localcluster.helpers import bare_cluster
from tests.support.objects import pod

cluster = pytest.fixture(bare_cluster)


async def _raw_watch(
    cluster: LocalCluster, path: str, query: dict[str, str], count: int
) -> tuple[aiohttp.ClientResponse, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as session, session.get(cluster.url + path, params=query) as resp:
        async for line in resp.content:
            events.append(orjson.loads(line))
            if len(events) >= count:
                break
        return resp, events


async def test_watch_frames_and_resumes_from_resource_version(
    cluster: LocalCluster, kube: KubeClient
) -> None:
    first = await kube.create(R.CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="default")
    await kube.create(R.CONFIGMAPS, {"metadata": {"name": "b"}}, namespace="default")
    await kube.patch(R.CONFIGMAPS, "a", {"data": {"x": "1"}}, namespace="default")
    await kube.delete(R.CONFIGMAPS, "b", namespace="default")
    query = {"watch": "true", "resourceVersion": first["metadata"]["resourceVersion"]}
    resp, events = await _raw_watch(cluster, "/api/v1/namespaces/default/configmaps", query, 3)
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "application/json"
    assert resp.headers["Transfer-Encoding"] == "chunked"
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"),
        ("MODIFIED", "a"),
        ("DELETED", "b"),
    ]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(first["metadata"]["resourceVersion"])


async def test_watch_without_rv_starts_with_current_objects(cluster: LocalCluster, kube: KubeClient) -> None:
    await kube.create(R.CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="default")
    _, events = await _raw_watch(cluster, "/api/v1/namespaces/default/configmaps", {"watch": "1"}, 1)
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "a"


async def test_watch_from_expired_rv_gets_410_error_event(cluster: LocalCluster, kube: KubeClient) -> None:
    first = await kube.create(R.CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="default")
    cluster.storage.set_window(2)
    for i in range(4):
        await kube.patch(R.CONFIGMAPS, "a", {"data": {"i": str(i)}}, namespace="default")
    query = {"watch": "true", "resourceVersion": first["metadata"]["resourceVersion"]}
    resp, events = await _raw_watch(cluster, "/api/v1/namespaces/default/configmaps", query, 1)
    assert resp.status == 200
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")


async def test_bookmarks_carry_the_latest_resource_version(cluster: LocalCluster, kube: KubeClient) -> None:
    cluster.rest.first_bookmark_after = 0.05
    created = await kube.create(R.CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="default")
    await kube.create(R.CONFIGMAPS, {"metadata": {"name": "b"}}, namespace="kube-system")
    query = {
        "watch": "true",
        "allowWatchBookmarks": "true",
        "resourceVersion": created["metadata"]["resourceVersion"],
    }
    _, events = await _raw_watch(cluster, "/api/v1/namespaces/default/configmaps", query, 1)
    assert events[0]["type"] == "BOOKMARK"
    assert events[0]["object"]["kind"] == "ConfigMap"
    assert int(events[0]["object"]["metadata"]["resourceVersion"]) == cluster.storage.rv


async def test_timeout_seconds_ends_the_stream(cluster: LocalCluster, kube: KubeClient) -> None:
    rv = cluster.storage.rv
    query = {"watch": "true", "timeoutSeconds": "1", "resourceVersion": str(rv)}
    resp, events = await _raw_watch(cluster, "/api/v1/pods", query, 1000)
    assert resp.status == 200 and events == []


async def test_objects_moving_into_and_out_of_a_selector(cluster: LocalCluster, kube: KubeClient) -> None:
    start = cluster.storage.rv
    await kube.create(R.PODS, pod("p", labels={"app": "x"}), namespace="default")
    await kube.patch(R.PODS, "p", {"metadata": {"labels": {"app": "y"}}}, namespace="default")
    await kube.patch(R.PODS, "p", {"metadata": {"labels": {"extra": "1"}}}, namespace="default")
    await kube.patch(R.PODS, "p", {"metadata": {"labels": {"app": "x"}}}, namespace="default")
    query = {"watch": "true", "resourceVersion": str(start), "labelSelector": "app=x"}
    _, events = await _raw_watch(cluster, "/api/v1/namespaces/default/pods", query, 3)
    assert [e["type"] for e in events] == ["ADDED", "DELETED", "ADDED"]
    binding = {"metadata": {"name": "p"}, "target": {"name": "node-1"}}
    start = cluster.storage.rv
    await kube.request("POST", "/api/v1/namespaces/default/pods/p/binding", body=binding)
    query = {"watch": "true", "resourceVersion": str(start), "fieldSelector": "spec.nodeName=node-1"}
    _, events = await _raw_watch(cluster, "/api/v1/pods", query, 1)
    assert events[0]["type"] == "ADDED" and events[0]["object"]["spec"]["nodeName"] == "node-1"


async def test_kubernetes_asyncio_generated_client_lists_and_watches(
    cluster: LocalCluster, kube: KubeClient
) -> None:
    await kube.create(R.PODS, pod("a"), namespace="default")
    core = k8s_client.CoreV1Api(kube.api_client)
    pods = await core.list_namespaced_pod("default")
    assert [p.metadata.name for p in pods.items] == ["a"]
    start = pods.metadata.resource_version
    await kube.create(R.PODS, pod("b"), namespace="default")
    watcher = k8s_watch.Watch()
    seen = []
    async with watcher.stream(
        core.list_namespaced_pod, "default", resource_version=start, timeout_seconds=5
    ) as stream:
        async for event in stream:
            seen.append((event["type"], event["object"].metadata.name))
            break
    assert seen == [("ADDED", "b")]


async def test_in_process_subscription_sees_http_writes(cluster: LocalCluster, kube: KubeClient) -> None:
    with cluster.storage.subscribe("pods", cluster.storage.rv) as sub:
        await kube.create(R.PODS, pod("a"), namespace="default")
        event = await anext(aiter(sub))
    assert event.type == "ADDED" and event.obj["metadata"]["name"] == "a"
