"""The CRD round trip through kubernetes_asyncio's generated clients, over HTTP."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.rest import ApiException

from apiclient.config import build_api_client
from localcluster.cluster import LocalCluster
from tests.localcluster.test_crd import CRD

GROUP, VERSION, PLURAL = "test.aiokcm.io", "v1alpha1", "drains"


@pytest.fixture
async def api() -> AsyncIterator[k8s.ApiClient]:
    ready: asyncio.Future[LocalCluster] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def serve() -> None:  # the cluster's task group lives in one task
        async with LocalCluster(nodes=0) as cluster:
            ready.set_result(cluster)
            await stop.wait()

    task = asyncio.create_task(serve())
    try:
        cluster = await asyncio.wait_for(asyncio.shield(ready), 30)
        api_client = await build_api_client(kubeconfig=cluster.kubeconfig_path)
        async with api_client:
            yield api_client
    finally:
        stop.set()
        await task


def _drain(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Drain", "metadata": {"name": name}, "spec": spec}


async def test_crd_round_trip(api: k8s.ApiClient) -> None:
    ext = k8s.ApiextensionsV1Api(api)
    crs = k8s.CustomObjectsApi(api)
    # the generated client serializes a plain dict as it does a model; its stub names only the model
    created = await ext.create_custom_resource_definition(copy.deepcopy(CRD))  # type: ignore[arg-type]
    assert {c.type for c in created.status.conditions} == {"NamesAccepted", "Established"}

    obj = await crs.create_cluster_custom_object(GROUP, VERSION, PLURAL, _drain("a", cordon=True, unknown=1))
    assert obj["spec"] == {"cordon": True, "drain": False}
    listed = await crs.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]

    with pytest.raises(ApiException) as exc:
        await crs.create_cluster_custom_object(GROUP, VERSION, PLURAL, _drain("b", drain=True))
    assert exc.value.status == 422 and exc.value.body is not None
    body = json.loads(exc.value.body)
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "object": drain requires cordon',
            "field": "spec",
        }
    ]

    # A stale update is a 409 Conflict; the status subresource ignores spec changes.
    stale = copy.deepcopy(obj)
    # the generated method takes `_content_type` (its all_params list has it); the stub leaves it out
    await crs.patch_cluster_custom_object(  # type: ignore[call-arg]
        GROUP, VERSION, PLURAL, "a", {"spec": {"drain": True}}, _content_type="application/merge-patch+json"
    )
    with pytest.raises(ApiException) as exc:
        await crs.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "a", stale)
    assert exc.value.status == 409
    current = await crs.get_cluster_custom_object(GROUP, VERSION, PLURAL, "a")
    current["status"] = {"phase": "Done"}
    current["spec"]["cordon"] = False
    after = await crs.replace_cluster_custom_object_status(GROUP, VERSION, PLURAL, "a", current)
    assert after["status"] == {"phase": "Done"} and after["spec"]["cordon"] is True

    # Watching from the list's resourceVersion sees the CR go away with its CRD.
    rv = (await crs.list_cluster_custom_object(GROUP, VERSION, PLURAL))["metadata"]["resourceVersion"]
    resp = await crs.list_cluster_custom_object(
        GROUP, VERSION, PLURAL, watch=True, resource_version=rv, timeout_seconds=5, _preload_content=False
    )
    await ext.delete_custom_resource_definition(f"{PLURAL}.{GROUP}")
    line = await asyncio.wait_for(resp.content.readline(), 10)
    resp.release()
    event = json.loads(line)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("DELETED", "a")
    for _ in range(50):
        try:
            await ext.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
        except ApiException as gone:
            assert gone.status == 404
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the CRD was never removed")
    with pytest.raises(ApiException) as exc:
        await crs.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    assert exc.value.status == 404
