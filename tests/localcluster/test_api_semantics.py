"""Object semantics through HTTP with the project's KubeClient (kubernetes_asyncio underneath)."""

from __future__ import annotations

import pytest

from apiclient import ApiError, KubeClient
from apiclient import resources as R
from localcluster.cluster import LocalCluster
from localcluster.demo import ensure_crd
from tests.localcluster.helpers import bare_cluster
from tests.support.objects import deployment, pod, replicaset

cluster = pytest.fixture(bare_cluster)
pytestmark = pytest.mark.backends("local", "real")


async def test_create_sets_uid_timestamp_and_generated_name(kube: KubeClient) -> None:
    created = await kube.create(R.PODS, pod(), namespace="default")
    meta = created["metadata"]
    assert meta["name"].startswith("p-") and len(meta["name"]) == len("p-") + 5
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) > 0


async def test_pod_admission_defaults(kube: KubeClient) -> None:
    created = await kube.create(R.PODS, pod("p"), namespace="default")
    spec = created["spec"]
    assert spec["restartPolicy"] == "Always" and spec["terminationGracePeriodSeconds"] == 30
    assert spec["dnsPolicy"] == "ClusterFirst" and spec["schedulerName"] == "default-scheduler"
    assert spec["enableServiceLinks"] is True and spec["priority"] == 0
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert spec["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
    tolerations = {(t["key"], t["effect"], t["tolerationSeconds"]) for t in spec["tolerations"]}
    assert tolerations == {
        ("node.kubernetes.io/not-ready", "NoExecute", 300),
        ("node.kubernetes.io/unreachable", "NoExecute", 300),
    }
    assert created["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


async def test_deployment_and_replicaset_defaults(kube: KubeClient) -> None:
    dep = await kube.create(R.DEPLOYMENTS, deployment("web"), namespace="default")
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
    }
    assert dep["spec"]["revisionHistoryLimit"] == 10 and dep["spec"]["progressDeadlineSeconds"] == 600
    rs_body = replicaset("rs")
    del rs_body["spec"]["replicas"]
    rs = await kube.create(R.REPLICASETS, rs_body, namespace="default")
    assert rs["spec"]["replicas"] == 1 and rs["metadata"]["generation"] == 1


async def test_generation_bumps_on_spec_change_only(kube: KubeClient) -> None:
    await kube.create(R.REPLICASETS, replicaset("rs"), namespace="default")
    labelled = await kube.patch(
        R.REPLICASETS, "rs", {"metadata": {"labels": {"x": "y"}}}, namespace="default"
    )
    assert labelled["metadata"]["generation"] == 1
    status = await kube.patch(
        R.REPLICASETS, "rs", {"status": {"replicas": 1}}, namespace="default", subresource="status"
    )
    assert status["metadata"]["generation"] == 1
    scaled = await kube.patch(R.REPLICASETS, "rs", {"spec": {"replicas": 3}}, namespace="default")
    assert scaled["metadata"]["generation"] == 2


async def test_deployment_generation_counts_annotation_changes_but_not_status_writes(
    kube: KubeClient,
) -> None:
    """kube-apiserver's deployment strategy: spec or annotations through the main resource bump
    the generation; `/status` keeps annotations it is sent, keeps the old labels, bumps nothing.
    A ReplicaSet's generation follows its spec alone, and its `/status` keeps new labels."""
    created = await kube.create(R.DEPLOYMENTS, deployment("d", replicas=1), namespace="default")
    assert created["metadata"]["generation"] == 1
    annotated = await kube.patch(
        R.DEPLOYMENTS, "d", {"metadata": {"annotations": {"a": "1"}}}, namespace="default"
    )
    assert annotated["metadata"]["generation"] == 2
    labelled = await kube.patch(R.DEPLOYMENTS, "d", {"metadata": {"labels": {"z": "1"}}}, namespace="default")
    assert labelled["metadata"]["generation"] == 2
    body = {
        "metadata": {"annotations": {"b": "2"}, "labels": {"x": "y"}},
        "spec": {"replicas": 5},
        "status": {"replicas": 0},
    }
    via_status = await kube.patch(R.DEPLOYMENTS, "d", body, namespace="default", subresource="status")
    assert via_status["metadata"]["generation"] == 2
    assert via_status["metadata"]["annotations"] == {"a": "1", "b": "2"}
    assert via_status["metadata"]["labels"] == {"z": "1"}
    assert via_status["spec"]["replicas"] == 1

    await kube.create(R.REPLICASETS, replicaset("r"), namespace="default")
    rs = await kube.patch(R.REPLICASETS, "r", {"metadata": {"annotations": {"a": "1"}}}, namespace="default")
    assert rs["metadata"]["generation"] == 1
    rs = await kube.patch(R.REPLICASETS, "r", body, namespace="default", subresource="status")
    assert rs["metadata"]["generation"] == 1
    assert rs["metadata"]["labels"] == {"x": "y"}
    assert rs["metadata"]["annotations"] == {"a": "1", "b": "2"}


async def test_pod_status_keeps_a_patchs_annotations_and_labels_but_not_owner_references(
    kube: KubeClient,
) -> None:
    """kube-apiserver's pod status strategy resets the spec and the owner references and keeps the
    rest of the metadata: the replacement surge answers a pod and lowers its deletion cost in one
    pods/status patch, guarded by the pod's resourceVersion."""
    created = await kube.create(R.PODS, pod("p", labels={"app": "web"}), namespace="default")
    version = created["metadata"]["resourceVersion"]
    patch = {
        "metadata": {
            "uid": created["metadata"]["uid"],
            "resourceVersion": version,
            "annotations": {"controller.kubernetes.io/pod-deletion-cost": "-2147483648"},
            "labels": {"moved": "yes"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u-1"}],
        },
        "spec": {"activeDeadlineSeconds": 5},
        "status": {"conditions": [{"type": "EvacuationInitiated", "status": "True"}]},
    }
    after = await kube.patch(
        R.PODS, "p", patch, namespace="default", subresource="status", patch_type="strategic"
    )
    assert after["metadata"]["annotations"] == {"controller.kubernetes.io/pod-deletion-cost": "-2147483648"}
    assert after["metadata"]["labels"] == {"app": "web", "moved": "yes"}
    assert "ownerReferences" not in after["metadata"]
    assert "activeDeadlineSeconds" not in after["spec"]
    assert {c["type"]: c["status"] for c in after["status"]["conditions"]}["EvacuationInitiated"] == "True"
    # the same guard again: the pod has moved on since, so the patch conflicts and changes nothing
    with pytest.raises(ApiError) as stale:
        await kube.patch(
            R.PODS, "p", patch, namespace="default", subresource="status", patch_type="strategic"
        )
    assert stale.value.status == 409


async def test_status_and_spec_are_written_through_their_own_endpoints(kube: KubeClient) -> None:
    await kube.create(R.REPLICASETS, replicaset("rs"), namespace="default")
    main = await kube.patch(
        R.REPLICASETS, "rs", {"spec": {"replicas": 2}, "status": {"replicas": 7}}, namespace="default"
    )
    assert main["spec"]["replicas"] == 2 and main["status"].get("replicas", 0) == 0
    sub = await kube.patch(
        R.REPLICASETS,
        "rs",
        {"spec": {"replicas": 5}, "status": {"replicas": 2}},
        namespace="default",
        subresource="status",
    )
    assert sub["spec"]["replicas"] == 2 and sub["status"]["replicas"] == 2


async def test_unknown_status_fields_are_pruned(kube: KubeClient) -> None:
    await kube.create(R.REPLICASETS, replicaset("rs"), namespace="default")
    patched = await kube.patch(
        R.REPLICASETS,
        "rs",
        {"status": {"replicas": 1, "replicasToEvacuate": 3}},
        namespace="default",
        subresource="status",
    )
    assert patched["status"] == {"replicas": 1}
    assert "replicasToEvacuate" not in (await kube.get(R.REPLICASETS, "rs", namespace="default"))["status"]


async def test_stale_resource_version_conflicts(kube: KubeClient) -> None:
    created = await kube.create(
        R.CONFIGMAPS, {"metadata": {"name": "cm"}, "data": {"a": "1"}}, namespace="default"
    )
    await kube.patch(R.CONFIGMAPS, "cm", {"data": {"a": "2"}}, namespace="default")
    with pytest.raises(ApiError) as put:
        await kube.replace(R.CONFIGMAPS, created, namespace="default")
    assert put.value.status == 409 and put.value.reason == "Conflict"
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "data": {"a": "3"}}
    with pytest.raises(ApiError) as patch:
        await kube.patch(R.CONFIGMAPS, "cm", stale, namespace="default")
    assert patch.value.status == 409


async def test_error_reasons_and_codes(kube: KubeClient) -> None:
    await kube.create(R.CONFIGMAPS, {"metadata": {"name": "cm"}}, namespace="default")
    with pytest.raises(ApiError) as exists:
        await kube.create(R.CONFIGMAPS, {"metadata": {"name": "cm"}}, namespace="default")
    assert (exists.value.status, exists.value.reason) == (409, "AlreadyExists")
    with pytest.raises(ApiError) as missing:
        await kube.get(R.CONFIGMAPS, "nope", namespace="default")
    assert (missing.value.status, missing.value.reason) == (404, "NotFound")
    assert missing.value.message == 'configmaps "nope" not found'
    with pytest.raises(ApiError) as no_ns:
        await kube.create(R.CONFIGMAPS, {"metadata": {"name": "cm"}}, namespace="absent")
    assert no_ns.value.status == 404 and 'namespaces "absent" not found' in no_ns.value.message
    with pytest.raises(ApiError) as wrong_method:
        await kube.request("PUT", "/api/v1/namespaces/default/configmaps")
    assert wrong_method.value.status == 405
    with pytest.raises(ApiError) as bad:
        await kube.request("GET", "/api/v1/pods", query={"labelSelector": "a in (b"})
    assert bad.value.status == 400


async def test_invalid_objects_get_422_with_causes(kube: KubeClient) -> None:
    body = replicaset("rs", replicas=-1)
    body["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    with pytest.raises(ApiError) as caught:
        await kube.create(R.REPLICASETS, body, namespace="default")
    assert caught.value.status == 422 and caught.value.reason == "Invalid"
    fields = {c["field"] for c in caught.value.details["causes"]}
    assert {"spec.replicas", "spec.template.metadata.labels"} <= fields
    with pytest.raises(ApiError) as name:
        await kube.create(R.CONFIGMAPS, {"metadata": {"name": "Not_A_Name"}}, namespace="default")
    assert name.value.status == 422 and name.value.details["causes"][0]["field"] == "metadata.name"


async def test_label_and_field_selectors(kube: KubeClient) -> None:
    await kube.create(R.PODS, pod("a", labels={"app": "x", "tier": "fe"}, node="node-1"), namespace="default")
    await kube.create(R.PODS, pod("b", labels={"app": "y"}), namespace="default")
    await kube.create(R.PODS, pod("c"), namespace="kube-system")

    async def names(**query: str) -> list[str]:
        listed = await kube.request("GET", "/api/v1/pods", query=query)
        return [p["metadata"]["name"] for p in listed["items"]]

    assert await names(labelSelector="app in (x,y),tier") == ["a"]
    assert await names(labelSelector="app!=x") == ["b", "c"]
    assert await names(labelSelector="!app") == ["c"]
    assert await names(labelSelector="app notin (x)") == ["b", "c"]
    assert await names(fieldSelector="spec.nodeName=node-1") == ["a"]
    assert await names(fieldSelector="spec.nodeName=") == ["b", "c"]
    assert await names(fieldSelector="metadata.namespace!=default") == ["c"]
    assert await names(fieldSelector="status.phase=Pending,metadata.name=b") == ["b"]
    nodes = await kube.request("GET", "/api/v1/nodes", query={"fieldSelector": "spec.unschedulable=false"})
    assert len(nodes["items"]) == 3
    with pytest.raises(ApiError) as unsupported:
        await names(fieldSelector="spec.foo=bar")
    assert unsupported.value.status == 400


async def test_list_pagination(kube: KubeClient) -> None:
    for i in range(5):
        await kube.create(R.CONFIGMAPS, {"metadata": {"name": f"cm-{i}"}}, namespace="default")
    first = await kube.list(R.CONFIGMAPS, namespace="default", limit=2)
    assert [c["metadata"]["name"] for c in first["items"]] == ["cm-0", "cm-1"]
    assert first["metadata"]["remainingItemCount"] == 3
    list_rv = first["metadata"]["resourceVersion"]
    second = await kube.list(
        R.CONFIGMAPS, namespace="default", limit=2, continue_token=first["metadata"]["continue"]
    )
    assert [c["metadata"]["name"] for c in second["items"]] == ["cm-2", "cm-3"]
    assert second["metadata"]["resourceVersion"] == list_rv
    everything = await kube.list_all(R.CONFIGMAPS, namespace="default", page_size=2)
    assert len(everything["items"] if isinstance(everything, dict) else everything) == 5


@pytest.mark.backends("local")
async def test_expired_continue_is_410(kube: KubeClient, cluster: LocalCluster) -> None:
    """The real server expires a continue token only at etcd compaction (minutes): local only,
    with the compactor's runs made by hand (see test_resource_versions for the full answer)."""
    for i in range(5):
        await kube.create(R.CONFIGMAPS, {"metadata": {"name": f"cm-{i}"}}, namespace="default")
    first = await kube.list(R.CONFIGMAPS, namespace="default", limit=2)
    second = await kube.list(
        R.CONFIGMAPS, namespace="default", limit=2, continue_token=first["metadata"]["continue"]
    )
    for i in range(3):
        await kube.patch(R.CONFIGMAPS, "cm-0", {"data": {"n": str(i)}}, namespace="default")
        cluster.storage.compact()
    with pytest.raises(ApiError) as expired:
        await kube.list(
            R.CONFIGMAPS, namespace="default", limit=2, continue_token=second["metadata"]["continue"]
        )
    assert (expired.value.status, expired.value.reason) == (410, "Expired")


async def test_graceful_pod_deletion(kube: KubeClient) -> None:
    await kube.create(R.PODS, pod("unscheduled"), namespace="default")
    await kube.delete(R.PODS, "unscheduled", namespace="default")
    with pytest.raises(ApiError):
        await kube.get(R.PODS, "unscheduled", namespace="default")

    await kube.create(R.PODS, pod("bound", node="node-1"), namespace="default")
    await kube.delete(R.PODS, "bound", namespace="default")
    terminating = await kube.get(R.PODS, "bound", namespace="default")
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    assert terminating["metadata"]["deletionTimestamp"]
    await kube.delete(R.PODS, "bound", namespace="default", grace_period_seconds=0)
    with pytest.raises(ApiError) as gone:
        await kube.get(R.PODS, "bound", namespace="default")
    assert gone.value.not_found


async def test_finalizers_hold_deletion_until_removed(kube: KubeClient) -> None:
    await kube.create(
        R.CONFIGMAPS, {"metadata": {"name": "cm", "finalizers": ["example.com/keep"]}}, namespace="default"
    )
    await kube.delete(R.CONFIGMAPS, "cm", namespace="default")
    held = await kube.get(R.CONFIGMAPS, "cm", namespace="default")
    assert held["metadata"]["deletionTimestamp"]
    with pytest.raises(ApiError) as add:
        await kube.patch(
            R.CONFIGMAPS, "cm", {"metadata": {"finalizers": ["example.com/keep", "new"]}}, namespace="default"
        )
    assert add.value.status == 422
    await kube.patch(R.CONFIGMAPS, "cm", {"metadata": {"finalizers": None}}, namespace="default")
    with pytest.raises(ApiError) as gone:
        await kube.get(R.CONFIGMAPS, "cm", namespace="default")
    assert gone.value.not_found


async def test_propagation_policy_is_recorded_as_finalizers(kube: KubeClient) -> None:
    await kube.create(R.REPLICASETS, replicaset("fg"), namespace="default")
    await kube.create(R.REPLICASETS, replicaset("orphan"), namespace="default")
    await kube.create(R.REPLICASETS, replicaset("bg"), namespace="default")
    await kube.delete(R.REPLICASETS, "fg", namespace="default", propagation_policy="Foreground")
    await kube.delete(R.REPLICASETS, "orphan", namespace="default", propagation_policy="Orphan")
    await kube.delete(R.REPLICASETS, "bg", namespace="default", propagation_policy="Background")
    assert (await kube.get(R.REPLICASETS, "fg", namespace="default"))["metadata"]["finalizers"] == [
        "foregroundDeletion"
    ]
    assert (await kube.get(R.REPLICASETS, "orphan", namespace="default"))["metadata"]["finalizers"] == [
        "orphan"
    ]
    with pytest.raises(ApiError):
        await kube.get(R.REPLICASETS, "bg", namespace="default")


async def test_delete_preconditions(kube: KubeClient) -> None:
    await kube.create(R.CONFIGMAPS, {"metadata": {"name": "cm"}}, namespace="default")
    with pytest.raises(ApiError) as caught:
        await kube.delete(R.CONFIGMAPS, "cm", namespace="default", preconditions={"uid": "other"})
    assert caught.value.status == 409


async def test_binding_sets_node_once(kube: KubeClient) -> None:
    await kube.create(R.PODS, pod("p"), namespace="default")
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "node-2"},
    }
    await kube.request("POST", "/api/v1/namespaces/default/pods/p/binding", body=binding)
    bound = await kube.get(R.PODS, "p", namespace="default")
    assert bound["spec"]["nodeName"] == "node-2"
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in bound["status"]["conditions"])
    with pytest.raises(ApiError) as again:
        await kube.request("POST", "/api/v1/namespaces/default/pods/p/binding", body=binding)
    assert again.value.status == 409


async def test_scale_subresource(kube: KubeClient) -> None:
    await kube.create(R.REPLICASETS, replicaset("rs", replicas=2), namespace="default")
    scale = await kube.request("GET", "/apis/apps/v1/namespaces/default/replicasets/rs/scale")
    assert (
        scale["kind"] == "Scale"
        and scale["spec"]["replicas"] == 2
        and scale["status"]["selector"] == "app=rs"
    )
    await kube.patch(R.REPLICASETS, "rs", {"spec": {"replicas": 4}}, namespace="default", subresource="scale")
    assert (await kube.get(R.REPLICASETS, "rs", namespace="default"))["spec"]["replicas"] == 4


async def test_noop_update_keeps_resource_version(kube: KubeClient) -> None:
    created = await kube.create(
        R.CONFIGMAPS, {"metadata": {"name": "cm"}, "data": {"a": "1"}}, namespace="default"
    )
    same = await kube.patch(R.CONFIGMAPS, "cm", {"data": {"a": "1"}}, namespace="default")
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_pdb_status_defaults_and_validation(kube: KubeClient) -> None:
    pdb = {
        "metadata": {"name": "pdb"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
    }
    created = await kube.create(R.PODDISRUPTIONBUDGETS, pdb, namespace="default")
    assert created["status"]["disruptionsAllowed"] == 0 and created["metadata"]["generation"] == 1
    both = {"metadata": {"name": "bad"}, "spec": {"minAvailable": 1, "maxUnavailable": 1}}
    with pytest.raises(ApiError) as caught:
        await kube.create(R.PODDISRUPTIONBUDGETS, both, namespace="default")
    assert caught.value.status == 422


async def test_namespace_deletion_removes_its_objects(kube: KubeClient) -> None:
    await kube.create(R.NAMESPACES, {"metadata": {"name": "tmp"}})
    created = await kube.create(R.CONFIGMAPS, {"metadata": {"name": "cm"}}, namespace="tmp")
    # as on a real cluster the namespace controller removes the content after the DELETE returns
    async with kube.watch(
        R.CONFIGMAPS, namespace="tmp", resource_version=created["metadata"]["resourceVersion"]
    ) as events:
        await kube.delete(R.NAMESPACES, "tmp")
        async for ev in events:
            if ev.type == "DELETED":
                break
    with pytest.raises(ApiError):
        await kube.get(R.CONFIGMAPS, "cm", namespace="tmp")


async def test_a_custom_resource_needs_its_kind_and_api_version(kube: KubeClient) -> None:
    """Custom resources are decoded as unstructured objects: unlike a built-in kind, the URL does
    not stand in for a missing `kind`."""
    await ensure_crd(kube)
    spec = {
        "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "x", "operator": "Exists"}]}]}
    }
    with pytest.raises(ApiError) as refused:
        await kube.create(R.NODEMAINTENANCES, {"metadata": {"name": "no-kind"}, "spec": spec})
    assert refused.value.status == 400
    assert "Object 'Kind' is missing" in refused.value.message
    typed = {"apiVersion": "maintenance.aiokcm.io/v1alpha1", "kind": "NodeMaintenance"}
    created = await kube.create(R.NODEMAINTENANCES, {**typed, "metadata": {"name": "typed"}, "spec": spec})
    assert created["kind"] == "NodeMaintenance"
    await kube.delete(R.NODEMAINTENANCES, "typed")
