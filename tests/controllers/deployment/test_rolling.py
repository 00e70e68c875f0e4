"""One step of a rolling update, case for case with KCM's `rolling_test.go`."""

from __future__ import annotations

import pytest

from apiclient import ApiError
from apiclient.resources import REPLICASETS
from controllers.deployment import rolling
from tests.controllers.deployment.fakeclient import FakeClient, harness
from tests.controllers.deployment.kcm_objects import new_deployment, rs


# `TestDeploymentController_reconcileNewReplicaSet` (the cases without the terminating-pods gates).
@pytest.mark.parametrize(
    ("deployment_replicas", "max_surge", "old_replicas", "new_replicas", "expected_new"),
    [
        pytest.param(10, 0, 10, 0, None, id="should not scale up when old replica set is fully saturated"),
        pytest.param(10, 2, 10, 0, 2, id="should scale up according to the maxSurge when old is saturated"),
        pytest.param(10, 2, 5, 0, 7, id="should scale up according to the maxSurge"),
        pytest.param(10, 2, 10, 2, None, id="should not scale when maxSurge is fully saturated"),
        pytest.param(10, 2, 2, 11, 10, id="should scale down when there are replicas above maxSurge"),
    ],
)
async def test_reconcile_new_replica_set(
    deployment_replicas: int, max_surge: int, old_replicas: int, new_replicas: int, expected_new: int | None
) -> None:
    new_rs = rs("foo-v2", new_replicas)
    old_rs = rs("foo-v2", old_replicas)
    d = new_deployment("foo", deployment_replicas, None, max_surge, 0, {"foo": "bar"})
    h = harness()
    scaled = await rolling.reconcile_new_replica_set(h.sync, [new_rs, old_rs], new_rs, d)
    if expected_new is None:
        assert not scaled
        assert h.client.writes() == []
        return
    assert scaled
    writes = h.client.writes()
    assert len(writes) == 1
    assert writes[0].body["spec"]["replicas"] == expected_new


# `TestDeploymentController_reconcileOldReplicaSets`. The Go fake answers an update with an empty
# ReplicaSet; here the client holds the ReplicaSets, so the old one's final size is checked too.
@pytest.mark.parametrize(
    ("max_unavailable", "old_replicas", "new_replicas", "ready_old", "ready_new", "expected_old"),
    [
        (0, 10, 0, 10, 0, 9),
        (2, 10, 0, 10, 0, 8),
        # unhealthy replicas of the old ReplicaSet are cleaned up
        (2, 10, 0, 8, 0, 8),
        # one unhealthy replica cleaned up and one ready pod scaled down
        (2, 10, 0, 9, 0, 8),
        # the new ReplicaSet's unavailable pods keep the old one from scaling down further
        (2, 8, 2, 8, 0, None),
    ],
)
async def test_reconcile_old_replica_sets(
    max_unavailable: int,
    old_replicas: int,
    new_replicas: int,
    ready_old: int,
    ready_new: int,
    expected_old: int | None,
) -> None:
    new_rs = rs("foo-new", new_replicas, {"foo": "new"})
    new_rs["status"]["availableReplicas"] = ready_new
    old_rs = rs("foo-old", old_replicas, {"foo": "old"})
    old_rs["status"]["availableReplicas"] = ready_old
    d = new_deployment("foo", 10, None, 0, max_unavailable, {"foo": "new"})
    client = FakeClient()
    client.add(REPLICASETS, old_rs)
    client.add(REPLICASETS, new_rs)
    h = harness(client=client)
    scaled = await rolling.reconcile_old_replica_sets(h.sync, [old_rs, new_rs], [old_rs], new_rs, d, {})
    assert scaled == (expected_old is not None)
    if expected_old is not None:
        assert h.client.scaled() == {"foo-old": expected_old}


# `TestDeploymentController_cleanupUnhealthyReplicas`.
@pytest.mark.parametrize(
    ("old_replicas", "ready_pods", "max_cleanup", "expected_cleanup"),
    [(10, 8, 1, 1), (10, 8, 3, 2), (10, 8, 0, 0), (10, 10, 3, 0)],
)
async def test_cleanup_unhealthy_replicas(
    old_replicas: int, ready_pods: int, max_cleanup: int, expected_cleanup: int
) -> None:
    old_rs = rs("foo-v2", old_replicas)
    old_rs["status"]["availableReplicas"] = ready_pods
    d = new_deployment("foo", 10, None, 2, 2)
    h = harness()
    _, cleaned = await rolling.cleanup_unhealthy_replicas(h.sync, [old_rs], d, max_cleanup, {})
    assert cleaned == expected_cleanup
    if expected_cleanup:
        assert h.client.scaled() == {"foo-v2": old_replicas - expected_cleanup}


# `TestDeploymentController_scaleDownOldReplicaSetsForRollingUpdate`.
@pytest.mark.parametrize(
    ("max_unavailable", "ready_pods", "old_replicas", "expected_old"),
    [(0, 10, 10, 9), (2, 10, 10, 8), (2, 8, 10, None), (2, 10, 0, None), (2, 1, 10, None)],
)
async def test_scale_down_old_replica_sets_for_rolling_update(
    max_unavailable: int, ready_pods: int, old_replicas: int, expected_old: int | None
) -> None:
    old_rs = rs("foo-v2", old_replicas)
    old_rs["status"]["availableReplicas"] = ready_pods
    d = new_deployment("foo", 10, None, 0, max_unavailable, {"foo": "bar"})
    h = harness()
    scaled = await rolling.scale_down_old_replica_sets_for_rolling_update(h.sync, [old_rs], [old_rs], d)
    if expected_old is None:
        assert scaled == 0
        return
    assert scaled > 0
    writes = h.client.writes()
    assert len(writes) == 1
    assert writes[0].body["spec"]["replicas"] == expected_old


async def test_a_failed_scale_down_is_not_the_syncs_error() -> None:
    """`reconcileOldReplicaSets` answers "nothing scaled" when a write fails, so the rollout goes
    on to its status as under KCM."""
    old_rs = rs("foo-old", 10, {"foo": "old"})
    old_rs["status"]["availableReplicas"] = 8
    new_rs = rs("foo-new", 0, {"foo": "new"})
    d = new_deployment("foo", 10, None, 0, 2, {"foo": "new"})
    client = FakeClient(failing={(REPLICASETS.plural, "foo-old")})
    h = harness(client=client)
    assert not await rolling.reconcile_old_replica_sets(h.sync, [old_rs, new_rs], [old_rs], new_rs, d, {})
    assert [a.name for a in client.writes()] == ["foo-old"]


async def test_a_rollout_whose_scale_down_failed_writes_its_status_then_comes_back() -> None:
    """The status is written as under KCM, then the write's error is raised, so the key comes
    back rate-limited: after a dropped write no ReplicaSet event may ever wake the rollout."""
    old_rs = rs("foo-old", 10, {"foo": "old"})
    old_rs["metadata"]["uid"] = "old-uid"
    old_rs["status"]["availableReplicas"] = 10
    d = new_deployment("foo", 10, None, 0, 2, {"foo": "new"})
    new_rs = rs("foo-new", 10, {"foo": "new"})
    new_rs["metadata"]["uid"] = "new-uid"
    new_rs["spec"]["template"] = d["spec"]["template"]
    new_rs["status"]["availableReplicas"] = 0
    new_rs["metadata"]["annotations"] = {
        "deployment.kubernetes.io/revision": "2",
        "deployment.kubernetes.io/desired-replicas": "10",
        "deployment.kubernetes.io/max-replicas": "10",
    }
    client = FakeClient(failing={(REPLICASETS.plural, "foo-old")})
    h = harness(client=client)

    with pytest.raises(ApiError) as raised:
        await rolling.rollout_rolling(h.sync, d, [old_rs, new_rs])

    assert raised.value.status == 500
    written = [(a.resource, a.name, a.subresource) for a in client.writes()]
    assert ("replicasets", "foo-old", None) in written, written
    assert ("deployments", "foo", "status") in written, written
