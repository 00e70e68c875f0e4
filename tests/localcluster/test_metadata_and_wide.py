"""Metadata-only answers (`as=PartialObjectMetadata(List)`) and `kubectl get -o wide`, on both backends.

client-go's metadata informers and kubernetes_asyncio clients that set `Accept` themselves list
and watch `PartialObjectMetadata`; `kubectl get -o wide` prints the Table's priority-1 columns.
"""

from __future__ import annotations

import shutil
from typing import Any

import orjson
import pytest

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, PODS, REPLICASETS, SERVICES
from tests.localcluster.helpers import bare_cluster
from tests.localcluster.test_fidelity_api import kubectl
from tests.support.objects import deployment, pod, replicaset

cluster = pytest.fixture(bare_cluster)
pytestmark = pytest.mark.backends("local", "real")
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary")

NS = "/api/v1/namespaces/default"
# what client-go's metadata client asks for, less its first choice (protobuf)
LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
OBJECT_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


async def get(
    kube: KubeClient, path: str, accept: str, query: dict[str, str] | None = None
) -> tuple[int, Any]:
    resp = await kube.api_client.call_api(
        path,
        "GET",
        query_params=list((query or {}).items()),
        auth_settings=["BearerToken"],
        header_params={"Accept": accept},
        _preload_content=False,
    )
    try:
        data = await resp.read()
        if query and query.get("watch"):
            return resp.status, [orjson.loads(line) for line in data.splitlines() if line]
        return resp.status, orjson.loads(data)
    finally:
        resp.release()


async def _configmap(kube: KubeClient, name: str) -> None:
    body = {"metadata": {"name": name, "labels": {"app": "meta"}}, "data": {"big": "x" * 100}}
    resp = await kube.api_client.call_api(
        f"{NS}/configmaps",
        "POST",
        body=body,
        auth_settings=["BearerToken"],
        header_params={"Content-Type": "application/json"},
        _preload_content=False,
    )
    resp.release()
    assert resp.status == 201


async def test_metadata_only_lists_objects_and_watch_events(kube: KubeClient) -> None:
    for name in ("meta-a", "meta-b", "meta-c"):
        await _configmap(kube, name)
    code, page = await get(kube, f"{NS}/configmaps", LIST_ACCEPT, {"limit": "2", "labelSelector": "app=meta"})
    assert code == 200 and (page["kind"], page["apiVersion"]) == (
        "PartialObjectMetadataList",
        "meta.k8s.io/v1",
    )
    assert set(page["metadata"]) == {"resourceVersion", "continue"}
    item = page["items"][0]
    assert (item["kind"], item["apiVersion"], item["metadata"]["name"]) == (
        "PartialObjectMetadata",
        "meta.k8s.io/v1",
        "meta-a",
    )
    assert item["metadata"]["labels"] == {"app": "meta"} and "data" not in item
    code, rest = await get(
        kube,
        f"{NS}/configmaps",
        LIST_ACCEPT,
        {"continue": page["metadata"]["continue"], "labelSelector": "app=meta"},
    )
    assert [i["metadata"]["name"] for i in rest["items"]] == ["meta-c"]

    code, one = await get(kube, f"{NS}/configmaps/meta-b", OBJECT_ACCEPT)
    assert (
        code == 200
        and one["kind"] == "PartialObjectMetadata"
        and one["metadata"]["name"] == "meta-b"
        and "data" not in one
    )
    code, beta = await get(
        kube, f"{NS}/configmaps", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"
    )
    assert code == 200 and beta["apiVersion"] == "meta.k8s.io/v1beta1"
    code, table = await get(kube, f"{NS}/configmaps", "application/json;as=Table;g=meta.k8s.io;v=v1beta1")
    assert code == 200 and (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1beta1")
    assert table["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"

    code, events = await get(
        kube,
        f"{NS}/configmaps",
        OBJECT_ACCEPT,
        {"watch": "1", "labelSelector": "app=meta", "timeoutSeconds": "1"},
    )
    assert (
        code == 200
        and [(e["type"], e["object"]["kind"]) for e in events] == [("ADDED", "PartialObjectMetadata")] * 3
    )
    assert all("data" not in e["object"] for e in events)
    code, events = await get(kube, f"{NS}/configmaps", LIST_ACCEPT, {"watch": "1", "timeoutSeconds": "5"})
    assert (code, events) == (200, [])  # no event is a list: the stream ends at once, empty

    code, refused = await get(
        kube, f"{NS}/configmaps/meta-b", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
    )
    assert (code, refused["reason"], refused["message"]) == (
        406,
        "NotAcceptable",
        "you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)",
    )
    code, refused = await get(
        kube, f"{NS}/configmaps", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
    )
    assert (code, refused["message"]) == (
        406,
        "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)",
    )


def _header(out: str) -> list[str]:
    return out.splitlines()[0].split()


def _row(out: str, name: str) -> list[str]:
    return next(line.split() for line in out.splitlines()[1:] if line.split()[0] == name)


@needs_kubectl
async def test_wide_columns_are_the_real_printers(kube: KubeClient, cluster: Any) -> None:
    dep = deployment("wide-web", replicas=0)
    dep["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox:1.36"})
    await kube.create(DEPLOYMENTS, dep, namespace="default")
    await kube.create(REPLICASETS, replicaset("wide-rs", replicas=0), namespace="default")
    await kube.create(
        SERVICES,
        {
            "metadata": {"name": "wide-svc"},
            "spec": {"selector": {"app": "wide-web"}, "ports": [{"port": 80}]},
        },
        namespace="default",
    )
    gated = pod("wide-pod", readinessGates=[{"conditionType": "example.com/ready"}])
    await kube.create(PODS, gated, namespace="default")

    expected = {
        "pods": [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES",
        ],
        "nodes": [
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME",
        ],
        "deployments": [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR",
        ],
        "replicasets": ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"],
        "services": ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"],
    }
    outs = {}
    for resource, header in expected.items():
        code, out, err = await kubectl(cluster, "get", resource, "-o", "wide", "-n", "default")
        assert code == 0, err
        assert _header(out) == header, resource
        outs[resource] = out
    assert _row(outs["deployments"], "wide-web")[-3:] == ["c,side", "nginx:1.27,busybox:1.36", "app=wide-web"]
    assert _row(outs["replicasets"], "wide-rs")[-3:] == ["c", "nginx:1.27", "app=wide-rs"]
    assert _row(outs["services"], "wide-svc")[-1] == "app=wide-web"
    assert _row(outs["pods"], "wide-pod")[-4:] == ["<none>", "<none>", "<none>", "0/1"]
