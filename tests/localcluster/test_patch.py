"""Strategic merge patch with Kubernetes' merge keys, merge patch and JSON patch."""

from __future__ import annotations

from typing import Any

import pytest

from apiclient import ApiError, KubeClient
from apiclient import resources as R
from localcluster import errors
from localcluster.builtin import schemas
from localcluster.cluster import LocalCluster
from localcluster.patch import merge_patch, strategic_merge
from tests.localcluster.helpers import bare_cluster
from tests.support.objects import pod

cluster = pytest.fixture(bare_cluster)
pytestmark = pytest.mark.backends("local", "real")

POD = schemas.kind_schema("", "v1", "Pod")
NODE = schemas.kind_schema("", "v1", "Node")


def test_pod_conditions_merge_by_type() -> None:
    """Order as kube-apiserver leaves it (checked on v1.24): the patch's elements in its order,
    an element new to the list before the ones only the server had."""
    live = {
        "status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]
        }
    }
    patched = strategic_merge(
        live,
        {"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "True"}]}},
        POD,
    )
    assert patched["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "X", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]


def test_containers_merge_by_name_and_delete_directive() -> None:
    live = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}}
    patched = strategic_merge(
        live, {"spec": {"containers": [{"name": "a", "image": "3"}, {"name": "b", "$patch": "delete"}]}}, POD
    )
    assert patched["spec"]["containers"] == [{"name": "a", "image": "3"}]


def test_atomic_lists_are_replaced() -> None:
    live = {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}
    patched = strategic_merge(live, {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}, NODE)
    assert patched["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]


def test_retain_keys_and_set_element_order_and_replace() -> None:
    live: dict[str, Any] = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    dep = schemas.kind_schema("apps", "v1", "Deployment")
    patched = strategic_merge(
        live, {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}, dep
    )
    assert patched["spec"]["strategy"] == {"type": "Recreate"}
    live = {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}}
    patched = strategic_merge(
        live,
        {
            "metadata": {
                "$setElementOrder/ownerReferences": [{"uid": "2"}],
                "ownerReferences": [{"uid": "2", "name": "b"}],
            }
        },
        POD,
    )
    assert [r["uid"] for r in patched["metadata"]["ownerReferences"]] == ["2", "1"]  # as kube-apiserver
    replaced = strategic_merge(
        {"metadata": {"labels": {"a": "1"}}}, {"metadata": {"labels": {"$patch": "replace", "b": "2"}}}, POD
    )
    assert replaced["metadata"]["labels"] == {"b": "2"}


def test_missing_merge_key_is_a_bad_request() -> None:
    with pytest.raises(errors.StatusError) as caught:
        strategic_merge({"spec": {"containers": []}}, {"spec": {"containers": [{"image": "x"}]}}, POD)
    assert caught.value.code == 400


def test_merge_patch_replaces_lists_and_deletes_nulls() -> None:
    assert merge_patch({"a": [1, 2], "b": {"c": 1, "d": 2}}, {"a": [3], "b": {"c": None}}) == {
        "a": [3],
        "b": {"d": 2},
    }


async def test_patch_types_over_http(cluster: LocalCluster, kube: KubeClient) -> None:
    await kube.create(R.PODS, pod("p", labels={"a": "1"}), namespace="default")
    condition = {
        "status": {
            "conditions": [{"type": "EvacuationRequest", "status": "True", "reason": "NodeMaintenance"}]
        }
    }
    await kube.patch(
        R.PODS, "p", condition, namespace="default", subresource="status", patch_type="strategic"
    )
    ready = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    patched = await kube.patch(
        R.PODS, "p", ready, namespace="default", subresource="status", patch_type="strategic"
    )
    assert [c["type"] for c in patched["status"]["conditions"]] == ["Ready", "EvacuationRequest"]
    ops = [
        {"op": "add", "path": "/metadata/labels/b", "value": "2"},
        {"op": "remove", "path": "/metadata/labels/a"},
    ]
    patched = await kube.patch(R.PODS, "p", ops, namespace="default", patch_type="json")
    assert patched["metadata"]["labels"] == {"b": "2"}
    with pytest.raises(ApiError) as failed:
        await kube.patch(
            R.PODS,
            "p",
            [{"op": "test", "path": "/metadata/name", "value": "other"}],
            namespace="default",
            patch_type="json",
        )
    assert failed.value.status == 422
    with pytest.raises(ApiError) as unsupported:
        await kube.request(
            "PATCH", "/api/v1/namespaces/default/pods/p", body=b"{}", content_type="text/plain"
        )
    assert (unsupported.value.status, unsupported.value.reason) == (415, "UnsupportedMediaType")
