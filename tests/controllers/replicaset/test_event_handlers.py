"""The ReplicaSet controller's informer handlers: which keys they queue and what they tell the
expectations, ported from Go's `pkg/controller/replicaset/replica_set_test.go`."""

from __future__ import annotations

from typing import Any

from controllers.common.pods import pod_key
from informers import meta_key
from tests.controllers.replicaset.fakes import Obj, Rig, new_pod, new_pod_list, new_replica_set, tombstone

LABELS = {"foo": "bar"}


def _rs(name: str, namespace: str | None, selector: dict[str, str] | None) -> Obj:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if namespace is not None:
        meta["namespace"] = namespace
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["selector"] = {"matchLabels": selector}
    return {"metadata": meta, "spec": spec}


def test_pod_controller_lookup() -> None:
    """TestPodControllerLookup: pods without labels match nothing; a ReplicaSet matches only in
    its namespace."""
    rig = Rig()
    basic = _rs("basic", None, None)
    rig.add_rs(basic)
    assert rig.controller.pod_replicasets({"metadata": {"name": "foo1", "namespace": ""}}) == []

    rig.add_rs(_rs("foo", None, {"foo": "bar"}))
    pod = {"metadata": {"name": "foo2", "namespace": "ns", "labels": {"foo": "bar"}}}
    assert rig.controller.pod_replicasets(pod) == []

    rig.add_rs(_rs("bar", "ns", {"foo": "bar"}))
    pod = {"metadata": {"name": "foo3", "namespace": "ns", "labels": {"foo": "bar"}}}
    assert [r["metadata"]["name"] for r in rig.controller.pod_replicasets(pod)] == ["bar"]


def test_a_pod_without_labels_matches_no_replica_set_even_a_does_not_exist_one() -> None:
    """`GetPodReplicaSets` returns nothing for a pod without labels, whatever the selectors."""
    rig = Rig()
    rs = {
        "metadata": {"name": "absent", "namespace": "ns", "uid": "u"},
        "spec": {"selector": {"matchExpressions": [{"key": "foo", "operator": "DoesNotExist"}]}},
    }
    rig.add_rs(rs)
    assert rig.controller.pod_replicasets({"metadata": {"name": "p", "namespace": "ns"}}) == []
    labelled = {"metadata": {"name": "p", "namespace": "ns", "labels": {"other": "x"}}}
    assert [r["metadata"]["name"] for r in rig.controller.pod_replicasets(labelled)] == ["absent"]


async def test_delete_final_state_unknown() -> None:
    """TestDeleteFinalStateUnknown: a tombstone queues the deleted pod's ReplicaSet."""
    rig = Rig()
    rs = new_replica_set(1, LABELS)
    rig.add_rs(rs)
    pod = new_pod_list(1, "Running", LABELS, rs, "pod")[0]
    rig.controller.delete_pod(tombstone(pod))
    assert await rig.queued() == [meta_key(rs)]


async def test_update_pods() -> None:
    """TestUpdatePods: which ReplicaSets a pod update wakes."""
    rig = Rig()
    rs1 = new_replica_set(1, {"foo": "bar"})
    rig.add_rs(rs1)
    rs2 = {**rs1, "metadata": {**rs1["metadata"], "name": "barfoo", "uid": "uid-barfoo"}}
    rs2["spec"] = {**rs1["spec"], "selector": {"matchLabels": {"bar": "foo"}}}
    rig.add_rs(rs2)
    ref1 = {
        "uid": rs1["metadata"]["uid"],
        "apiVersion": "v1",
        "kind": "ReplicaSet",
        "name": "foobar",
        "controller": True,
    }
    ref2 = {
        "uid": "uid-barfoo",
        "apiVersion": "v1",
        "kind": "ReplicaSet",
        "name": "barfoo",
        "controller": True,
    }

    def pod(labels: dict[str, str], refs: list[Obj] | None, rv: str) -> Obj:
        p = new_pod_list(1, "Running", {"foo": "bar"}, rs1, "pod")[0]
        p["metadata"].update(labels=labels, resourceVersion=rv)
        if refs is None:
            p["metadata"].pop("ownerReferences")
        else:
            p["metadata"]["ownerReferences"] = refs
        return p

    # case 1: a pod with a ControllerRef: only its owner, whatever the labels now match.
    rig.controller.update_pod(pod({"foo": "bar"}, [ref1], "1"), pod({"bar": "foo"}, [ref1], "2"))
    assert await rig.queued() == ["default/foobar"]

    # case 2: the ControllerRef removed (orphaned): the old owner and the label-matching ReplicaSet.
    rig.controller.update_pod(pod({"bar": "foo"}, [ref2], "1"), pod({"bar": "foo"}, None, "2"))
    assert await rig.queued() == ["default/barfoo"]

    # case 3: orphaned by rs1, labels matching rs2: both.
    rig.controller.update_pod(pod({"bar": "foo"}, [ref1], "1"), pod({"bar": "foo"}, None, "2"))
    assert sorted(await rig.queued()) == ["default/barfoo", "default/foobar"]

    # case 4: the ControllerRef kept, labels changed: the owner.
    rig.controller.update_pod(pod({"foo": "bar"}, [ref2], "1"), pod({"bar": "foo"}, [ref2], "2"))
    assert await rig.queued() == ["default/barfoo"]


async def test_a_change_of_any_field_of_the_controller_ref_wakes_the_old_owner() -> None:
    """`updatePod` compares the whole ControllerRef (Go's DeepEqual), not only its UID."""
    rig = Rig()
    rs1 = new_replica_set(1, {"foo": "bar"})
    rig.add_rs(rs1)
    rs2 = {**rs1, "metadata": {**rs1["metadata"], "name": "barfoo"}}  # same UID, another name
    rig.add_rs(rs2)
    old = new_pod("p", rs1, "Running", owned=True)
    old["metadata"]["resourceVersion"] = "1"
    cur = {**old, "metadata": {**old["metadata"], "resourceVersion": "2"}}
    cur["metadata"]["ownerReferences"] = [{**old["metadata"]["ownerReferences"][0], "name": "barfoo"}]
    rig.controller.update_pod(old, cur)
    assert sorted(await rig.queued()) == ["default/barfoo", "default/foobar"]


async def test_a_resync_with_the_same_resource_version_queues_nothing() -> None:
    """`updatePod`: two versions of a pod always differ in resourceVersion; the same one is a resync."""
    rig = Rig()
    rs = new_replica_set(1, LABELS)
    rig.add_rs(rs)
    pod = new_pod("p", rs, "Running", owned=True)
    pod["metadata"]["resourceVersion"] = "7"
    rig.controller.update_pod(pod, pod)
    assert await rig.queued() == []


async def test_overlapping_rss() -> None:
    """TestOverlappingRSs: of nine ReplicaSets selecting the pod, only its controller is synced."""
    rig = Rig(burst_replicas=10)
    controllers = []
    for j in range(1, 10):
        rs = new_replica_set(1, LABELS, name=f"rs{j}")
        rs["metadata"]["creationTimestamp"] = "2014-11-30T00:00:00Z"
        controllers.append(rs)
    for rs in reversed(controllers):
        rig.add_rs(rs)
    rs = controllers[3]
    pod = new_pod_list(1, "Pending", LABELS, rs, "pod")[0]
    pod["metadata"]["ownerReferences"] = [
        {
            "uid": rs["metadata"]["uid"],
            "apiVersion": "v1",
            "kind": "ReplicaSet",
            "name": rs["metadata"]["name"],
            "controller": True,
        }
    ]
    rig.controller.add_pod(pod)
    assert await rig.queued() == [meta_key(rs)]


async def test_deletion_timestamp() -> None:
    """TestDeletionTimestamp: a pod seen with a deletionTimestamp is a deletion, counted once."""
    rig = Rig(burst_replicas=10)
    rs = new_replica_set(1, LABELS)
    rig.add_rs(rs)
    key = meta_key(rs)
    pod = new_pod_list(1, "Pending", LABELS, rs, "pod")[0]
    pod["metadata"].update(deletionTimestamp="2024-01-01T00:00:00Z", resourceVersion="1")
    rig.expectations.expect_deletions(key, [pod_key(pod)])

    # A pod added with a deletion timestamp decrements deletions, not creations.
    rig.controller.add_pod(pod)
    assert await rig.queued() == [key]
    exp = rig.expectations.get_expectations(key)
    assert exp is not None and exp.fulfilled()

    # An update from no deletion timestamp to one is a deletion.
    old = new_pod_list(1, "Pending", LABELS, rs, "pod")[0]
    old["metadata"]["resourceVersion"] = "2"
    rig.expectations.expect_deletions(key, [pod_key(pod)])
    rig.controller.update_pod(old, pod)
    assert await rig.queued() == [key]
    exp = rig.expectations.get_expectations(key)
    assert exp is not None and exp.fulfilled()

    # An update of the deletion timestamp itself is not a second deletion.
    second = {
        "metadata": {
            "namespace": pod["metadata"]["namespace"],
            "name": "secondPod",
            "labels": pod["metadata"]["labels"],
            "ownerReferences": [
                {
                    "uid": rs["metadata"]["uid"],
                    "apiVersion": "v1",
                    "kind": "ReplicaSet",
                    "name": "foobar",
                    "controller": True,
                }
            ],
        }
    }
    rig.expectations.expect_deletions(key, [pod_key(second)])
    old["metadata"].update(deletionTimestamp="2024-01-01T00:00:00Z", resourceVersion="2")
    rig.controller.update_pod(old, pod)
    exp = rig.expectations.get_expectations(key)
    assert exp is not None and not exp.fulfilled()

    # The delete event of a pod counted at its deletionTimestamp is ignored too.
    rig.controller.delete_pod(pod)
    exp = rig.expectations.get_expectations(key)
    assert exp is not None and not exp.fulfilled()

    # Deleting the second pod clears the expectations.
    await rig.queued()
    rig.controller.delete_pod(second)
    assert await rig.queued() == [key]
    exp = rig.expectations.get_expectations(key)
    assert exp is not None and exp.fulfilled()
