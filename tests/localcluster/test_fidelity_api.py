"""Fidelity gaps closed: fieldValidation, dryRun, secrets, namespace lifecycle, pod updates, tables.

Each test drives the server through a real client (kubernetes_asyncio via `KubeClient`, or the
real kubectl) and asserts what kube-apiserver 1.32 answers.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import tempfile
from typing import Any

import orjson
import pytest

from apiclient import ApiError, KubeClient
from apiclient import resources as R
from localcluster.cluster import LocalCluster
from tests.support.objects import deployment
from tests.support.waiting import eventually, when

SECRETS = R.Resource("", "v1", "secrets", "Secret", True)
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary")


async def kubectl(cluster: LocalCluster, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    cache = tempfile.mkdtemp(prefix="kubectl-cache-")
    try:
        proc = await asyncio.create_subprocess_exec(
            "kubectl",
            "--kubeconfig",
            cluster.kubeconfig_path,
            "--cache-dir",
            cache,
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
        return proc.returncode or 0, out.decode(), err.decode()
    finally:
        shutil.rmtree(cache, ignore_errors=True)


async def raw(
    kube: KubeClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    query: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> tuple[int, dict[str, Any], list[str]]:
    """A request through kubernetes_asyncio's REST client, keeping status and Warning headers."""
    api = kube.api_client
    url = kube.host + path
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    resp = await api.rest_client.pool_manager.request(
        method,
        url,
        data=orjson.dumps(body) if body is not None else None,
        headers={"Content-Type": content_type, "Accept": "application/json"},
    )
    try:
        data = await resp.read()
        return resp.status, orjson.loads(data) if data else {}, resp.headers.getall("Warning", [])
    finally:
        resp.release()


def cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}, **extra}


# -- 1. fieldValidation -------------------------------------------------------------------


async def test_field_validation_strict_warn_ignore(kube: KubeClient) -> None:
    path = "/apis/apps/v1/namespaces/default/deployments"
    status, body, _ = await raw(
        kube,
        "POST",
        path,
        deployment("s", 1, image="nginx", foo=1, bar=2),
        query={"fieldValidation": "Strict"},
    )
    assert status == 400 and body["reason"] == "BadRequest"
    assert (
        'strict decoding error: unknown field "spec.bar", unknown field "spec.foo"' in body["message"]
        or 'strict decoding error: unknown field "spec.foo", unknown field "spec.bar"' in body["message"]
    )
    with pytest.raises(ApiError) as missing:
        await kube.get(R.DEPLOYMENTS, "s", namespace="default")
    assert missing.value.not_found

    # no parameter: Warn, as kube-apiserver >= 1.27
    status, body, warnings = await raw(kube, "POST", path, deployment("w", 1, image="nginx", foo=1))
    assert status == 201 and "foo" not in body["spec"]
    assert warnings == ['299 - "unknown field \\"spec.foo\\""']

    status, body, warnings = await raw(
        kube, "POST", path, deployment("i", 1, image="nginx", foo=1), query={"fieldValidation": "Ignore"}
    )
    assert status == 201 and "foo" not in body["spec"] and warnings == []

    # updates and status writes prune and warn too (a controller writing an extra status field)
    current = await kube.get(R.DEPLOYMENTS, "w", namespace="default")
    current["status"] = {"replicas": 0, "replicasToEvacuate": 3}
    status, body, warnings = await raw(kube, "PUT", f"{path}/w/status", current)
    assert status == 200 and "replicasToEvacuate" not in body["status"]
    assert warnings == ['299 - "unknown field \\"status.replicasToEvacuate\\""']
    status, body, _ = await raw(
        kube,
        "PATCH",
        f"{path}/w",
        {"spec": {"paused": True, "zzz": 1}},
        query={"fieldValidation": "Strict"},
        content_type="application/merge-patch+json",
    )
    assert status == 400 and 'unknown field "spec.zzz"' in body["message"]


async def test_field_validation_strict_reports_duplicate_fields(
    kube: KubeClient, cluster: LocalCluster
) -> None:
    api = kube.api_client
    raw_body = (
        b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup","name":"dup"},"data":{"a":"1"}}'
    )
    resp = await api.rest_client.pool_manager.request(
        "POST",
        kube.host + "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
        data=raw_body,
        headers={"Content-Type": "application/json"},
    )
    try:
        body = orjson.loads(await resp.read())
    finally:
        resp.release()
    assert resp.status == 400 and 'duplicate field "metadata.name"' in body["message"]


async def test_field_validation_custom_resource(kube: KubeClient, cluster: LocalCluster) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.fid.example.com"},
        "spec": {
            "group": "fid.example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                            },
                        }
                    },
                }
            ],
        },
    }
    await kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
    path = "/apis/fid.example.com/v1/namespaces/default/gadgets"
    gadget = {
        "apiVersion": "fid.example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g"},
        "spec": {"size": 1, "colour": "red"},
    }
    # the CRD is served as soon as the controller registers it
    status, body, _ = await eventually(
        lambda: when(
            raw(kube, "POST", path, gadget, query={"fieldValidation": "Strict"}), lambda r: r[0] != 404
        ),
        "the gadgets served",
        interval=0.02,
    )
    assert status == 400 and 'unknown field "spec.colour"' in body["message"]
    status, body, warnings = await raw(kube, "POST", path, gadget)
    assert status == 201 and body["spec"] == {"size": 1}
    assert warnings == ['299 - "unknown field \\"spec.colour\\""']


@needs_kubectl
async def test_kubectl_create_is_strict_and_prints_warnings(cluster: LocalCluster) -> None:
    code, _, err = await kubectl(cluster, "create", "-f", "-", stdin=orjson.dumps(cm("k", extra=1)).decode())
    assert code != 0 and 'strict decoding error: unknown field "extra"' in err
    code, _, err = await kubectl(
        cluster, "create", "--validate=warn", "-f", "-", stdin=orjson.dumps(cm("k", extra=1)).decode()
    )
    assert code == 0 and 'Warning: unknown field "extra"' in err


# -- 2. dryRun ----------------------------------------------------------------------------


async def test_dry_run_persists_nothing_and_emits_no_event(kube: KubeClient) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    listed = await kube.list(R.CONFIGMAPS, namespace="default")
    rv = listed["metadata"]["resourceVersion"]
    status, body, _ = await raw(kube, "POST", path, cm("dry"), query={"dryRun": "All"})
    assert status == 201 and body["metadata"]["uid"] and "resourceVersion" not in body["metadata"]
    with pytest.raises(ApiError) as missing:
        await kube.get(R.CONFIGMAPS, "dry", namespace="default")
    assert missing.value.not_found
    status, body, _ = await raw(
        kube, "POST", path, {"metadata": {"name": "Bad_Name"}}, query={"dryRun": "All"}
    )
    assert status == 422  # validated fully

    real = await kube.create(R.CONFIGMAPS, cm("real"), namespace="default")
    status, body, _ = await raw(
        kube,
        "PATCH",
        f"{path}/real",
        {"data": {"a": "changed"}},
        query={"dryRun": "All"},
        content_type="application/merge-patch+json",
    )
    assert status == 200 and body["data"] == {"a": "changed"}
    real["data"] = {"a": "put"}
    status, body, _ = await raw(kube, "PUT", f"{path}/real", real, query={"dryRun": "All"})
    assert status == 200 and body["data"] == {"a": "put"}
    status, body, _ = await raw(kube, "DELETE", f"{path}/real", query={"dryRun": "All"})
    assert status == 200
    after = await kube.get(R.CONFIGMAPS, "real", namespace="default")
    assert (
        after["data"] == {"a": "b"}
        and after["metadata"]["resourceVersion"] == real["metadata"]["resourceVersion"]
    )

    # the only event since `rv` is the real create
    async with kube.watch(R.CONFIGMAPS, namespace="default", resource_version=rv) as events:
        first = await anext(aiter(events))
        assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "real")
        marker = await kube.create(R.CONFIGMAPS, cm("marker"), namespace="default")
        second = await anext(aiter(events))
        assert second.object["metadata"]["name"] == marker["metadata"]["name"]


# -- 3. secrets ---------------------------------------------------------------------------


async def test_secret_string_data_type_and_immutable(kube: KubeClient) -> None:
    secret = {
        "metadata": {"name": "s"},
        "data": {"x": base64.b64encode(b"1").decode()},
        "stringData": {"a": "b"},
    }
    created = await kube.create(SECRETS, secret, namespace="default")
    assert created["type"] == "Opaque" and "stringData" not in created
    assert created["data"] == {"x": "MQ==", "a": "Yg=="}
    with pytest.raises(ApiError) as bad:
        await kube.create(SECRETS, {"metadata": {"name": "b"}, "data": {"a": "!!"}}, namespace="default")
    assert bad.value.status == 400
    frozen = await kube.create(
        SECRETS, {"metadata": {"name": "f"}, "immutable": True, "stringData": {"a": "b"}}, namespace="default"
    )
    frozen["data"] = {"a": "Yw=="}
    with pytest.raises(ApiError) as immutable:
        await kube.replace(SECRETS, frozen, namespace="default")
    assert immutable.value.status == 422


@needs_kubectl
async def test_kubectl_create_secret_and_serviceaccount(cluster: LocalCluster) -> None:
    code, out, err = await kubectl(cluster, "create", "secret", "generic", "x", "--from-literal=a=b")
    assert code == 0, err
    code, out, err = await kubectl(cluster, "get", "secret", "x", "-o", "jsonpath={.data.a} {.type}")
    assert (code, out) == (0, "Yg== Opaque"), err
    code, out, err = await kubectl(cluster, "get", "secrets")
    assert code == 0 and out.split("\n")[0].split() == ["NAME", "TYPE", "DATA", "AGE"], err
    code, out, err = await kubectl(cluster, "create", "serviceaccount", "robot")  # sent as protobuf
    assert code == 0, err
    code, out, err = await kubectl(cluster, "get", "sa", "robot", "-o", "name")
    assert (code, out.strip()) == (0, "serviceaccount/robot"), err
    code, out, _ = await kubectl(cluster, "api-resources", "--api-group=")
    assert any(line.split()[:2] == ["serviceaccounts", "sa"] for line in out.splitlines())
    assert any(line.split()[0] == "secrets" for line in out.splitlines())


# -- 4. namespace lifecycle ---------------------------------------------------------------


async def test_namespace_terminates_then_disappears(cluster: LocalCluster) -> None:
    # a namespace whose pod is stuck on a stopped kubelet stays Terminating, refusing new content
    kube = await cluster.client()
    try:
        await kube.create(R.NAMESPACES, {"metadata": {"name": "doomed"}})
        ns = await kube.get(R.NAMESPACES, "doomed")
        assert ns["spec"]["finalizers"] == ["kubernetes"]
        await kube.create(R.CONFIGMAPS, cm("c"), namespace="doomed")
        pod = {
            "metadata": {"name": "p"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]},
        }
        cluster.kubelets["node-1"].stop()
        await kube.create(R.PODS, pod, namespace="doomed")
        listed = await kube.list(R.NAMESPACES)
        async with kube.watch(
            R.NAMESPACES,
            resource_version=listed["metadata"]["resourceVersion"],
            field_selector="metadata.name=doomed",
        ) as events:
            await kube.delete(R.NAMESPACES, "doomed")
            marked = await kube.get(R.NAMESPACES, "doomed")
            assert marked["status"]["phase"] == "Terminating" and marked["metadata"]["deletionTimestamp"]
            with pytest.raises(ApiError) as refused:
                await kube.create(R.CONFIGMAPS, {"metadata": {"generateName": "late-"}}, namespace="doomed")
            assert refused.value.status == 403 and refused.value.reason == "Forbidden"
            assert refused.value.body["message"] == (
                'configmaps "late-" is forbidden: unable to create new content in namespace doomed because it is being terminated'
            )
            assert refused.value.details["causes"][0]["reason"] == "NamespaceTerminating"
            cluster.kubelets["node-1"].start()
            async for ev in events:
                if ev.type == "DELETED":
                    break
        with pytest.raises(ApiError):
            await kube.get(R.CONFIGMAPS, "c", namespace="doomed")
    finally:
        await kube.close()


@needs_kubectl
async def test_kubectl_delete_namespace_waits(cluster: LocalCluster) -> None:
    assert (await kubectl(cluster, "create", "namespace", "gone"))[0] == 0
    assert (await kubectl(cluster, "create", "configmap", "c", "-n", "gone", "--from-literal=a=b"))[0] == 0
    code, out, err = await kubectl(cluster, "delete", "ns", "gone", "--wait")
    assert code == 0 and 'namespace "gone" deleted' in out, err
    code, _, err = await kubectl(cluster, "get", "ns", "gone")
    assert code != 0 and "NotFound" in err


# -- 5. pod updates -----------------------------------------------------------------------


async def test_pod_update_rules(kube: KubeClient) -> None:
    pod = {
        "metadata": {"name": "u"},
        "spec": {
            "schedulingGates": [{"name": "g"}],
            "containers": [{"name": "c", "image": "nginx"}],
            "tolerations": [
                {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}
            ],
        },
    }
    await kube.create(R.PODS, pod, namespace="default")

    async def patch(spec: dict[str, Any]) -> dict[str, Any]:
        return await kube.patch(R.PODS, "u", {"spec": spec}, namespace="default", patch_type="strategic")

    tolerations = (await kube.get(R.PODS, "u", namespace="default"))["spec"]["tolerations"]
    changed = [dict(t, tolerationSeconds=20) if t["key"] == "k" else t for t in tolerations]
    updated = await kube.patch(
        R.PODS,
        "u",
        [{"op": "replace", "path": "/spec/tolerations", "value": changed}],
        namespace="default",
        patch_type="json",
    )
    assert {t["key"]: t.get("tolerationSeconds") for t in updated["spec"]["tolerations"]}["k"] == 20
    updated = await patch({"containers": [{"name": "c", "image": "nginx:2"}], "activeDeadlineSeconds": 100})
    assert updated["spec"]["containers"][0]["image"] == "nginx:2"
    await kube.patch(
        R.PODS,
        "u",
        [{"op": "remove", "path": "/spec/schedulingGates"}],
        namespace="default",
        patch_type="json",
    )
    with pytest.raises(ApiError) as other:
        await patch({"restartPolicy": "Never"})
    assert other.value.status == 422
    assert (
        "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
        in other.value.body["message"]
    )
    with pytest.raises(ApiError) as modified:
        mod = [dict(t, key="other") if t["key"] == "k" else t for t in changed]
        await kube.patch(
            R.PODS,
            "u",
            [{"op": "replace", "path": "/spec/tolerations", "value": mod}],
            namespace="default",
            patch_type="json",
        )
    assert (
        "existing toleration can not be modified except its tolerationSeconds"
        in modified.value.body["message"]
    )
    with pytest.raises(ApiError) as raised:
        await patch({"activeDeadlineSeconds": 200})
    assert raised.value.status == 422
    with pytest.raises(ApiError) as gate:
        await patch({"schedulingGates": [{"name": "new"}]})
    assert "only deletion is allowed" in gate.value.body["message"]


# -- 6. tables ----------------------------------------------------------------------------


@needs_kubectl
async def test_kubectl_get_crd_and_custom_resource_columns(cluster: LocalCluster, kube: KubeClient) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.fid.example.com"},
        "spec": {
            "group": "fid.example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": [
                        {"name": "Created", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
    await kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
    code, out, err = await kubectl(cluster, "get", "crd")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].split() == ["NAME", "CREATED", "AT"]
    name, created = lines[1].split()
    assert name == "widgets.fid.example.com" and created.endswith("Z") and "T" in created
    code, out, err = await kubectl(
        cluster,
        "apply",
        "-f",
        "-",
        stdin=orjson.dumps(
            {
                "apiVersion": "fid.example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "w", "namespace": "default"},
                "spec": {"size": 3},
            }
        ).decode(),
    )
    assert code == 0, err
    code, out, err = await kubectl(cluster, "get", "widgets")
    assert code == 0, err
    header, row = out.strip().splitlines()
    assert header.split() == ["NAME", "CREATED", "SIZE"]
    assert row.split()[0] == "w" and row.split()[2] == "3" and row.split()[1].endswith("s")
