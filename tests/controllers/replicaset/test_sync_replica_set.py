"""`syncReplicaSet` against in-memory caches and a recording client, ported from Go's
`pkg/controller/replicaset/replica_set_test.go` (each test names the one it ports)."""

from __future__ import annotations

import pytest

from apiclient.resources import REPLICASETS
from controllers.common.expectations import UIDTrackingControllerExpectations
from controllers.common.pods import pod_key
from informers import meta_key
from tests.controllers.replicaset.fakes import (
    FakeClient,
    FakeError,
    Obj,
    Rig,
    new_pod,
    new_pod_list,
    new_replica_set,
)

LABELS = {"foo": "bar"}


async def test_sync_replica_set_does_nothing() -> None:
    """TestSyncReplicaSetDoesNothing: 2 running pods, 2 replicas: a no-op."""
    rig = Rig()
    rs = new_replica_set(2, LABELS)
    rig.add_rs(rs)
    for pod in new_pod_list(2, "Running", LABELS, rs, "pod"):
        rig.add_pod(pod)
    await rig.sync(rs)
    rig.validate(0, 0, 0)


async def test_sync_replica_set_create_failures() -> None:
    """TestSyncReplicaSetCreateFailures: with a quota of 10, 100 replicas cost 10 creates, and the
    slow start stops after the batch that failed (1 + 2 + 4 + 8 calls at most)."""
    client = FakeClient(create_limit=10)
    rs = new_replica_set(100, LABELS)
    client.put(REPLICASETS, rs)
    rig = Rig(client)
    rig.add_rs(rs)
    with pytest.raises(FakeError):
        await rig.sync(rs)
    rig.validate(10, 0, 0)
    expected_limit, batch = 0, 1
    while expected_limit <= client.create_limit:
        expected_limit += batch
        batch *= 2
    assert client.create_calls <= expected_limit
    # The skipped and failed creations will never be observed: only the 10 made are waited for.
    exp = rig.expectations.get_expectations(meta_key(rs))
    assert exp is not None and exp.add == 10


async def test_sync_replica_set_dormancy() -> None:
    """TestSyncReplicaSetDormancy: expectations hold back creates but not the status, a failed
    create lowers them again, and the status is written only when it changed (2 writes)."""
    client = FakeClient()
    rig = Rig(client)
    rs = new_replica_set(2, LABELS)
    rig.add_rs(rs)
    for pod in new_pod_list(1, "Running", LABELS, rs, "pod"):
        rig.add_pod(pod)

    # Creates a replica and sets expectations.
    rs["status"] = {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}
    await rig.sync(rs)
    rig.validate(1, 0, 0)

    # Expectations prevent replicas but not an update on status.
    rs["status"] = {"replicas": 0, "readyReplicas": 0, "availableReplicas": 0}
    client.clear()
    await rig.sync(rs)
    rig.validate(0, 0, 0)

    # Lowering expectations leads to a sync that creates a replica; the create fails.
    rig.expectations.creation_observed(meta_key(rs))
    rs["status"] = {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}
    client.clear()
    client.err = FakeError("fake Error")
    with pytest.raises(FakeError):
        await rig.sync(rs)
    rig.validate(1, 0, 0)

    # The failed create needs no lowering of expectations: the next sync creates again.
    client.clear()
    client.err = None
    await rig.sync(rs)
    rig.validate(1, 0, 0)

    # Two status writes in the dormancy window: the zeroed status, then the ReplicaFailure condition.
    assert len(client.status_patches) == 2
    failure = client.status_patches[1]["status"]["conditions"][0]
    assert (failure["type"], failure["reason"], failure["message"]) == (
        "ReplicaFailure",
        "FailedCreate",
        "fake Error",
    )


async def test_status_counts_the_pods_the_sync_started_from() -> None:
    """`calculateStatus(rs, filteredPods, ...)`: pods created by this sync are counted by the
    sync that sees them in the cache, not by the one that created them."""
    client = FakeClient()
    rig = Rig(client)
    rs = new_replica_set(3, LABELS)
    rs["metadata"]["generation"] = 1
    rig.add_rs(rs)
    await rig.sync(rs)
    rig.validate(3, 0, 0)
    assert client.status_patches[-1]["status"]["replicas"] == 0
    assert client.status_patches[-1]["status"]["observedGeneration"] == 1


async def test_controller_update_requeue() -> None:
    """TestControllerUpdateRequeue: a failed status write fails the sync (so it is retried)."""
    client = FakeClient(status_err=FakeError("failed to update status"))
    rs = new_replica_set(1, LABELS)
    rig = Rig(client)
    rig.add_rs(rs)
    rs["status"] = {"replicas": 2}
    for pod in new_pod_list(1, "Running", LABELS, rs, "pod"):
        rig.add_pod(pod)
    with pytest.raises(FakeError, match="failed to update status"):
        await rig.sync(rs)


@pytest.mark.parametrize(("burst", "replicas"), [(5, 30), (5, 12), (3, 2)])
async def test_controller_burst_replicas(burst: int, replicas: int) -> None:
    """TestControllerBurstReplicas: scale up then down, at most `burst` creates or deletes per
    sync, each batch waited for until the cache saw every pod of it."""
    rs = new_replica_set(replicas, LABELS)
    client = FakeClient()
    client.put(REPLICASETS, rs)
    rig = Rig(client, burst_replicas=burst)
    rig.add_rs(rs)
    key = meta_key(rs)
    pods = new_pod_list(replicas, "Pending", LABELS, rs, "pod")

    for want in (replicas, 0):
        rs["spec"]["replicas"] = want
        rig.add_rs(rs)
        for _ in range(0, replicas, burst):
            await rig.sync(rs)
            active = rig.pods_in_cache()
            if want != 0:
                expected = min(want - active, burst)
                rig.validate(expected, 0, 0)
                # The watch events for all but one of the pods: none of them wakes the controller.
                for pod in pods[: expected - 1]:
                    rig.add_pod(pod)
                    rig.controller.add_pod(pod)
                exp = rig.expectations.get_expectations(key)
                assert exp is not None and exp.add == 1
            else:
                expected = min(active - want, burst)
                rig.validate(0, expected, 0)
                # Delete exactly the pods the controller waits for, all but the last one.
                waited = sorted(rig.expectations.get_uids(key) or ())
                stubs = [_stub(k, rs) for k in waited]
                for stub in stubs[:-1]:
                    rig.delete_pod(stub)
                    rig.controller.delete_pod(stub)
                exp = rig.expectations.get_expectations(key)
                assert exp is not None and exp.delete == 1

            # No action for any of the above pods.
            client.clear()
            await rig.sync(rs)
            rig.validate(0, 0, 0)

            # The last event lowers the expectations to 0: the next sync acts again.
            if want != 0:
                rig.add_pod(pods[expected - 1])
                rig.controller.add_pod(pods[expected - 1])
            else:
                waited = sorted(rig.expectations.get_uids(key) or ())
                assert len(waited) == 1
                last = _stub(waited[0], rs)
                rig.delete_pod(last)
                rig.controller.delete_pod(last)
            pods = pods[expected:]

        assert rig.pods_in_cache() == want
        pods = new_pod_list(want, "Running", LABELS, rs, "pod")


def _stub(key: str, rs: Obj) -> Obj:
    namespace, name = key.split("/")
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(rs["spec"]["selector"]["matchLabels"]),
            "ownerReferences": [
                {
                    "uid": rs["metadata"]["uid"],
                    "apiVersion": "v1",
                    "kind": "ReplicaSet",
                    "name": rs["metadata"]["name"],
                    "controller": True,
                }
            ],
        }
    }


async def test_rs_sync_expectations() -> None:
    """TestRSSyncExpectations: the expectations are read before the pods are listed, so a pod
    arriving in between is seen (no extra create)."""
    rig = Rig(burst_replicas=2)
    rs = new_replica_set(2, LABELS)
    rig.add_rs(rs)
    pods = new_pod_list(2, "Pending", LABELS, rs, "pod")
    rig.add_pod(pods[0])

    class Sneaky(UIDTrackingControllerExpectations):
        def satisfied_expectations(self, key: str) -> bool:
            rig.add_pod(pods[1])
            return True

    rig.controller.syncer.expectations = Sneaky()
    await rig.sync(rs)
    rig.validate(0, 0, 0)


async def test_delete_controller_and_expectations() -> None:
    """TestDeleteControllerAndExpectations: deleting the ReplicaSet drops its expectations, and a
    late observation of the old record changes nothing."""
    rs = new_replica_set(1, LABELS)
    rig = Rig(burst_replicas=10)
    rig.add_rs(rs)
    key = meta_key(rs)
    await rig.sync(rs)
    rig.validate(1, 0, 0)
    rig.client.clear()
    old = rig.expectations.get_expectations(key)
    assert old is not None

    rig.delete_rs(rs)
    rig.controller.delete_rs(rs)
    await rig.sync(key)
    assert rig.expectations.get_expectations(key) is None

    old.add -= 1  # a concurrent addPod holding the old record
    rig.controller.pod_informer.store.replace([])
    await rig.sync(key)
    rig.validate(0, 0, 0)


async def test_expectations_on_recreate() -> None:
    """TestExpectationsOnRecreate: a ReplicaSet deleted and created again under the same name
    starts with fresh expectations."""
    rig = Rig(burst_replicas=100)
    old = new_replica_set(1, LABELS)
    rig.add_rs(old)
    rig.controller.add_rs(old)
    assert await rig.queued() == [meta_key(old)]
    await rig.sync(old)
    rig.validate(1, 0, 0)
    rig.client.clear()
    key = meta_key(old)
    exp = rig.expectations.get_expectations(key)
    assert exp is not None and not exp.fulfilled()
    assert await rig.queued() == []

    rig.delete_rs(old)
    rig.controller.delete_rs(old)
    assert rig.expectations.get_expectations(key) is None
    assert await rig.queued() == [key]  # skip the sync for the delete event

    new = {**old, "metadata": {**old["metadata"], "uid": "another-uid"}}
    rig.add_rs(new)
    rig.controller.add_rs(new)
    assert await rig.queued() == [key]
    await rig.sync(key)
    exp = rig.expectations.get_expectations(key)
    assert exp is not None and not exp.fulfilled()
    rig.validate(1, 0, 0)


async def test_do_not_patch_pod_with_other_control_ref() -> None:
    """TestDoNotPatchPodWithOtherControlRef: a matching pod controlled by another controller is
    neither patched nor counted: 2 creates."""
    rs = new_replica_set(2, LABELS)
    client = FakeClient()
    client.put(REPLICASETS, rs)
    rig = Rig(client)
    rig.add_rs(rs)
    pod = new_pod("pod", rs, "Running", owned=True)
    pod["metadata"]["ownerReferences"] = [
        {
            "uid": "another-uid",
            "apiVersion": "v1beta1",
            "kind": "ReplicaSet",
            "name": "AnotherRS",
            "controller": True,
        }
    ]
    rig.add_pod(pod)
    await rig.sync(rs)
    rig.validate(2, 0, 0)


async def test_patch_pod_fails() -> None:
    """TestPatchPodFails: both adoptions fail, the sync fails with the error (and is retried)."""
    rs = new_replica_set(2, LABELS)
    client = FakeClient(err=FakeError("fake Error"))
    client.put(REPLICASETS, rs)
    rig = Rig(client)
    rig.add_rs(rs)
    rig.add_pod(new_pod("pod1", rs, "Running", owned=False))
    rig.add_pod(new_pod("pod2", rs, "Running", owned=False))
    with pytest.raises(Exception, match="fake Error"):
        await rig.sync(rs)
    rig.validate(0, 0, 2)


async def test_do_not_adopt_or_create_if_being_deleted() -> None:
    """TestDoNotAdoptOrCreateIfBeingDeleted: a ReplicaSet being deleted adopts and creates nothing."""
    rs = new_replica_set(2, LABELS)
    rs["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    client = FakeClient()
    client.put(REPLICASETS, rs)
    rig = Rig(client)
    rig.add_rs(rs)
    rig.add_pod(new_pod("pod1", rs, "Running", owned=False))
    await rig.sync(rs)
    rig.validate(0, 0, 0)


async def test_do_not_adopt_or_create_if_being_deleted_race() -> None:
    """TestDoNotAdoptOrCreateIfBeingDeletedRace: the cache says alive, the fresh read says
    deleted: the sync aborts with an error, adopting and creating nothing."""
    rs = new_replica_set(2, LABELS)
    fresh = {**rs, "metadata": {**rs["metadata"], "deletionTimestamp": "2024-01-01T00:00:00Z"}}
    client = FakeClient()
    client.put(REPLICASETS, fresh)
    rig = Rig(client)
    rig.add_rs(rs)
    rig.add_pod(new_pod("pod1", rs, "Running", owned=False))
    with pytest.raises(Exception, match="has just been deleted"):
        await rig.sync(rs)
    rig.validate(0, 0, 0)


async def test_failed_deletes_lower_expectations_and_mark_the_condition() -> None:
    """`manageReplicas`' delete path: a failed delete is observed at once (the informer will never
    see it) and fails the sync; the condition says FailedDelete with DeletePod's message."""
    from apiclient import ApiError

    rs = new_replica_set(1, LABELS)
    client = FakeClient(err=ApiError(500, {"reason": "InternalError", "message": "etcd is down"}))
    rig = Rig(client)
    rig.add_rs(rs)
    for pod in new_pod_list(3, "Running", LABELS, rs, "pod"):
        rig.add_pod(pod)
    with pytest.raises(ApiError):
        await rig.sync(rs)
    rig.validate(0, 2, 0)
    assert rig.expectations.satisfied_expectations(meta_key(rs))
    cond = client.status_patches[-1]["status"]["conditions"][0]
    assert (cond["reason"], cond["message"]) == ("FailedDelete", "unable to delete pods: etcd is down")
    assert [e.reason for e in rig.events.events] == ["FailedDelete", "FailedDelete"]
    assert rig.events.events[0].message == "Error deleting: etcd is down"


async def test_deleting_a_pod_already_gone_is_no_failure() -> None:
    """`manageReplicas`: a 404 on delete lowers the expectations and is not an error."""
    from apiclient import ApiError

    rs = new_replica_set(1, LABELS)
    client = FakeClient(err=ApiError(404, {"reason": "NotFound", "message": 'pods "pod0" not found'}))
    rig = Rig(client)
    rig.add_rs(rs)
    pods = new_pod_list(2, "Running", LABELS, rs, "pod")
    for pod in pods:
        rig.add_pod(pod)
    await rig.sync(rs)
    rig.validate(0, 1, 0)
    assert rig.expectations.satisfied_expectations(meta_key(rs))
    assert rig.events.reasons() == []


async def test_a_template_without_labels_fails_the_create_without_an_event() -> None:
    """`createPods`: "unable to create pods, no labels" is returned before any request or event."""
    rs = new_replica_set(2, LABELS)
    rs["spec"]["template"]["metadata"]["labels"] = {}
    rig = Rig()
    rig.add_rs(rs)
    with pytest.raises(ValueError, match="unable to create pods, no labels"):
        await rig.sync(rs)
    rig.validate(0, 0, 0)
    assert rig.events.reasons() == []
    assert rig.expectations.satisfied_expectations(meta_key(rs))  # the skipped create is not waited for
    cond = rig.client.status_patches[-1]["status"]["conditions"][0]
    assert (cond["reason"], cond["message"]) == ("FailedCreate", "unable to create pods, no labels")


def test_pod_keys() -> None:
    """TestGetPodKeys."""
    rs = new_replica_set(1, {"name": "foo"})
    pods = [new_pod("pod1", rs, "Running", owned=True), new_pod("pod2", rs, "Running", owned=True)]
    none: list[Obj] = []
    assert [pod_key(p) for p in none] == []
    assert [pod_key(p) for p in pods] == ["default/pod1", "default/pod2"]
