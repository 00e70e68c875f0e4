"""Scaling events, history cleanup and the writes around them, case for case with KCM's
`sync_test.go` (`TestScale`, `TestDeploymentController_cleanupDeployment`,
`TestDeploymentController_cleanupDeploymentOrder`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from apiclient import ApiError
from apiclient.resources import DEPLOYMENTS, REPLICASETS
from controllers.common.deploymentstrategy import max_surge
from controllers.deployment import util
from tests.controllers.deployment.fakeclient import FakeClient, harness
from tests.controllers.deployment.kcm_objects import new_deployment, new_rs_with_status, rs

Obj = dict[str, Any]

NEW = "2016-05-20T02:00:00Z"
OLD = "2016-05-20T01:00:00Z"
OLDER = "2016-05-20T00:00:00Z"


def _updated_template(replicas: int) -> Obj:
    d = new_deployment("foo", replicas, None, None, None, {"foo": "bar"})
    d["spec"]["template"]["metadata"]["labels"]["another"] = "label"
    return d


@dataclass
class ScaleCase:
    deployment: Obj
    old_deployment: Obj
    new_rs: Obj | None
    old_rss: list[Obj]
    expected_new: int | None
    expected_old: list[int]
    wasnt_updated: set[str] = field(default_factory=set)
    desired_replicas_annotations: dict[str, int] = field(default_factory=dict)


def _saturated_but_broken() -> Obj:
    out = rs("foo-v2", 2, None, NEW)
    out["status"]["availableReplicas"] = 0
    return out


SCALE_CASES = {
    "normal scaling event: 10 -> 12": ScaleCase(
        new_deployment("foo", 12), new_deployment("foo", 10), rs("foo-v1", 10, None, NEW), [], 12, []
    ),
    "normal scaling event: 10 -> 5": ScaleCase(
        new_deployment("foo", 5), new_deployment("foo", 10), rs("foo-v1", 10, None, NEW), [], 5, []
    ),
    "proportional scaling: 5 -> 10": ScaleCase(
        new_deployment("foo", 10),
        new_deployment("foo", 5),
        rs("foo-v2", 2, None, NEW),
        [rs("foo-v1", 3, None, OLD)],
        4,
        [6],
    ),
    "proportional scaling: 5 -> 3": ScaleCase(
        new_deployment("foo", 3),
        new_deployment("foo", 5),
        rs("foo-v2", 2, None, NEW),
        [rs("foo-v1", 3, None, OLD)],
        1,
        [2],
    ),
    "proportional scaling: 9 -> 4": ScaleCase(
        new_deployment("foo", 4),
        new_deployment("foo", 9),
        rs("foo-v2", 8, None, NEW),
        [rs("foo-v1", 1, None, OLD)],
        4,
        [0],
    ),
    "proportional scaling: 7 -> 10": ScaleCase(
        new_deployment("foo", 10),
        new_deployment("foo", 7),
        rs("foo-v3", 2, None, NEW),
        [rs("foo-v2", 3, None, OLD), rs("foo-v1", 2, None, OLDER)],
        3,
        [4, 3],
    ),
    "proportional scaling: 13 -> 8": ScaleCase(
        new_deployment("foo", 8),
        new_deployment("foo", 13),
        rs("foo-v3", 2, None, NEW),
        [rs("foo-v2", 8, None, OLD), rs("foo-v1", 3, None, OLDER)],
        1,
        [5, 2],
    ),
    # Scales up the new replica set.
    "leftover distribution: 3 -> 4": ScaleCase(
        new_deployment("foo", 4),
        new_deployment("foo", 3),
        rs("foo-v3", 1, None, NEW),
        [rs("foo-v2", 1, None, OLD), rs("foo-v1", 1, None, OLDER)],
        2,
        [1, 1],
    ),
    # Scales down the older replica set.
    "leftover distribution: 3 -> 2": ScaleCase(
        new_deployment("foo", 2),
        new_deployment("foo", 3),
        rs("foo-v3", 1, None, NEW),
        [rs("foo-v2", 1, None, OLD), rs("foo-v1", 1, None, OLDER)],
        1,
        [1, 0],
    ),
    # Scales up the latest replica set first.
    "proportional scaling (no new rs): 4 -> 5": ScaleCase(
        new_deployment("foo", 5),
        new_deployment("foo", 4),
        None,
        [rs("foo-v2", 2, None, OLD), rs("foo-v1", 2, None, OLDER)],
        None,
        [3, 2],
    ),
    # Scales down to zero.
    "proportional scaling: 6 -> 0": ScaleCase(
        new_deployment("foo", 0),
        new_deployment("foo", 6),
        rs("foo-v3", 3, None, NEW),
        [rs("foo-v2", 2, None, OLD), rs("foo-v1", 1, None, OLDER)],
        0,
        [0, 0],
    ),
    # Scales up from zero.
    "proportional scaling: 0 -> 6": ScaleCase(
        new_deployment("foo", 6),
        new_deployment("foo", 6),
        rs("foo-v3", 0, None, NEW),
        [rs("foo-v2", 0, None, OLD), rs("foo-v1", 0, None, OLDER)],
        6,
        [0, 0],
        wasnt_updated={"foo-v2", "foo-v1"},
    ),
    # deployment.spec.replicas == 3 (foo-v1 == foo-v2 == foo-v3 == 1), scaled to 5: foo-v3 and
    # foo-v2 should grow by one, but foo-v2 fails to update.
    "failed rs update": ScaleCase(
        new_deployment("foo", 5),
        new_deployment("foo", 5),
        rs("foo-v3", 2, None, NEW),
        [rs("foo-v2", 1, None, OLD), rs("foo-v1", 1, None, OLDER)],
        2,
        [2, 1],
        wasnt_updated={"foo-v3", "foo-v1"},
        desired_replicas_annotations={"foo-v2": 3},
    ),
    "deployment with surge pods": ScaleCase(
        new_deployment("foo", 20, None, 2),
        new_deployment("foo", 10, None, 2),
        rs("foo-v2", 6, None, NEW),
        [rs("foo-v1", 6, None, OLD)],
        11,
        [11],
    ),
    "change both surge and size": ScaleCase(
        new_deployment("foo", 50, None, 6),
        new_deployment("foo", 10, None, 3),
        rs("foo-v2", 5, None, NEW),
        [rs("foo-v1", 8, None, OLD)],
        22,
        [34],
    ),
    "change both size and template": ScaleCase(
        _updated_template(14),
        new_deployment("foo", 10, None, None, None, {"foo": "bar"}),
        None,
        [rs("foo-v2", 7, None, NEW), rs("foo-v1", 3, None, OLD)],
        None,
        [10, 4],
    ),
    "saturated but broken new replica set does not affect old pods": ScaleCase(
        new_deployment("foo", 2, None, 1, 1),
        new_deployment("foo", 2, None, 1, 1),
        _saturated_but_broken(),
        [rs("foo-v1", 1, None, OLD)],
        2,
        [1],
    ),
}


@pytest.mark.parametrize("case", SCALE_CASES.values(), ids=SCALE_CASES.keys())
async def test_scale(case: ScaleCase) -> None:
    """`TestScale`: the ReplicaSets carry the replicas annotations the old Deployment left."""
    for replica_set in [case.new_rs, *case.old_rss]:
        if replica_set is None:
            continue
        desired = case.desired_replicas_annotations.get(
            util.name_of(replica_set), case.old_deployment["spec"]["replicas"]
        )
        annotations = replica_set["metadata"].setdefault("annotations", {})
        util.set_replicas_annotations(annotations, desired, desired + max_surge(case.old_deployment))
    h = harness()
    await h.sync.scale(case.deployment, case.new_rs, case.old_rss)

    sizes = {util.name_of(r): r["spec"]["replicas"] for r in [case.new_rs, *case.old_rss] if r is not None}
    for name, replicas in h.client.scaled().items():
        if name not in case.wasnt_updated:
            sizes[name] = replicas
    if case.expected_new is not None and case.new_rs is not None:
        assert sizes[util.name_of(case.new_rs)] == case.expected_new
    assert [sizes[util.name_of(r)] for r in case.old_rss] == case.expected_old


async def test_proportional_scaling_writes_in_the_order_the_sizes_are_worked_out() -> None:
    """Largest first, newer first among equals when scaling up (`ReplicaSetsBySizeNewer`): a
    write that fails part-way leaves the same ReplicaSets scaled as under KCM."""
    d = new_deployment("foo", 5)
    old = new_deployment("foo", 3)
    rss = [rs("foo-v1", 1, None, OLDER), rs("foo-v3", 2, None, NEW), rs("foo-v2", 1, None, OLD)]
    for r in rss:
        util.set_replicas_annotations(r["metadata"].setdefault("annotations", {}), 3, 3 + max_surge(old))
    h = harness()
    await h.sync.scale(d, rss[1], [rss[0], rss[2]])
    assert [a.name for a in h.client.writes()] == ["foo-v3", "foo-v2", "foo-v1"]


# `TestDeploymentController_cleanupDeployment`.
def _already_deleted() -> Obj:
    out = new_rs_with_status("foo-1", 0, 0, {"foo": "bar"})
    out["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return out


SEL = {"foo": "bar"}


@pytest.mark.parametrize(
    ("old_rss", "limit", "expected_deletions"),
    [
        (
            [
                new_rs_with_status("foo-1", 0, 0, SEL),
                new_rs_with_status("foo-2", 0, 0, SEL),
                new_rs_with_status("foo-3", 0, 0, SEL),
            ],
            1,
            2,
        ),
        # Only the ReplicaSet with spec.replicas = status.replicas = 0 goes.
        (
            [
                new_rs_with_status("foo-1", 0, 0, SEL),
                new_rs_with_status("foo-2", 0, 1, SEL),
                new_rs_with_status("foo-3", 1, 0, SEL),
                new_rs_with_status("foo-4", 1, 1, SEL),
            ],
            0,
            1,
        ),
        ([new_rs_with_status("foo-1", 0, 0, SEL), new_rs_with_status("foo-2", 0, 0, SEL)], 0, 2),
        ([new_rs_with_status("foo-1", 1, 1, SEL), new_rs_with_status("foo-2", 1, 1, SEL)], 0, 0),
        ([_already_deleted()], 0, 0),
        # unlimited revisionHistoryLimit
        (
            [
                new_rs_with_status("foo-1", 0, 0, SEL),
                new_rs_with_status("foo-2", 0, 0, SEL),
                new_rs_with_status("foo-3", 0, 0, SEL),
            ],
            2**31 - 1,
            0,
        ),
    ],
)
async def test_cleanup_deployment(old_rss: list[Obj], limit: int, expected_deletions: int) -> None:
    client = FakeClient()
    for r in old_rss:
        client.add(REPLICASETS, r)
    h = harness(client=client)
    await h.sync.cleanup_deployment(old_rss, new_deployment("foo", 1, limit, None, None, SEL))
    assert len(h.client.deleted()) == expected_deletions


def _rs_with_revision(name: str, replicas: int, created: str, revision: str) -> Obj:
    out = rs(name, replicas, SEL, created)
    if revision:
        out["metadata"]["annotations"] = {util.REVISION_ANNOTATION: revision}
    out["status"] = {"replicas": replicas}
    return out


T0, T1, T2, T3 = (f"2024-01-01T00:0{i}:00Z" for i in range(4))


# `TestDeploymentController_cleanupDeploymentOrder`: creation order is foo-1 < foo-2 < foo-3 < foo-4.
@pytest.mark.parametrize(
    ("old_rss", "limit", "expected_deleted"),
    [
        # revision order: rs1 < rs2, delete rs1
        ([_rs_with_revision("foo-1", 0, T0, "1"), _rs_with_revision("foo-2", 0, T1, "2")], 1, {"foo-1"}),
        # revision order: rs2 < rs1, delete rs2
        ([_rs_with_revision("foo-1", 0, T0, "2"), _rs_with_revision("foo-2", 0, T1, "1")], 1, {"foo-2"}),
        # rs1 has a revision but rs2 has none, delete rs2
        ([_rs_with_revision("foo-1", 0, T0, "1"), _rs_with_revision("foo-2", 0, T1, "")], 1, {"foo-2"}),
        # rs1 has no revision while rs2 has one, delete rs1
        ([_rs_with_revision("foo-1", 0, T0, ""), _rs_with_revision("foo-2", 0, T1, "2")], 1, {"foo-1"}),
        # revision order: rs1 < rs2 < rs3, but rs1 has replicas, delete rs2
        (
            [
                _rs_with_revision("foo-1", 1, T0, "1"),
                _rs_with_revision("foo-2", 0, T1, "2"),
                _rs_with_revision("foo-3", 0, T2, "3"),
            ],
            1,
            {"foo-2"},
        ),
        # revision order: rs1 < rs2 < rs3, both rs1 and rs2 have replicas, delete nothing
        (
            [
                _rs_with_revision("foo-1", 1, T0, "1"),
                _rs_with_revision("foo-2", 1, T1, "2"),
                _rs_with_revision("foo-3", 0, T2, "3"),
            ],
            1,
            set(),
        ),
        # revision order: rs2 < rs4 < rs1 < rs3, delete rs2 and rs4
        (
            [
                _rs_with_revision("foo-1", 0, T0, "3"),
                _rs_with_revision("foo-2", 0, T1, "1"),
                _rs_with_revision("foo-3", 0, T2, "4"),
                _rs_with_revision("foo-4", 0, T3, "2"),
            ],
            2,
            {"foo-2", "foo-4"},
        ),
    ],
)
async def test_cleanup_deployment_order(old_rss: list[Obj], limit: int, expected_deleted: set[str]) -> None:
    client = FakeClient()
    for r in old_rss:
        client.add(REPLICASETS, r)
    h = harness(client=client)
    await h.sync.cleanup_deployment(old_rss, new_deployment("foo", 1, limit, None, None, SEL))
    assert set(h.client.deleted()) == expected_deleted


# -- the writes around a scale ------------------------------------------------------------


async def test_scaling_events_read_as_kcm_words_them() -> None:
    """`scaleReplicaSet`: "Scaled up replica set foo-v1 to 12" (no "from", as in KCM v1.24)."""
    h = harness()
    d = new_deployment("foo", 12)
    new_rs = rs("foo-v1", 10, None, NEW)
    await h.sync.scale(d, new_rs, [])
    assert [(e.reason, e.message) for e in h.recorder.events] == [
        ("ScalingReplicaSet", "Scaled up replica set foo-v1 to 12")
    ]


async def test_a_scale_that_changes_only_annotations_records_no_event() -> None:
    """The replicas annotations are brought up to date without an event when the size stays."""
    h = harness()
    d = new_deployment("foo", 2, None, 1, 1)
    new_rs = rs("foo-v2", 2, None, NEW)
    old_rs = rs("foo-v1", 1, None, OLD)
    for r in (new_rs, old_rs):
        util.set_replicas_annotations(r["metadata"].setdefault("annotations", {}), 1, 2)
    await h.sync.scale(d, new_rs, [old_rs])
    assert {a.name for a in h.client.writes()} == {"foo-v2", "foo-v1"}
    assert all(
        a.body["metadata"]["annotations"]
        == {util.DESIRED_REPLICAS_ANNOTATION: "2", util.MAX_REPLICAS_ANNOTATION: "3"}
        for a in h.client.writes()
    )
    assert h.recorder.events == []


async def test_a_paused_deployment_with_a_rollback_in_flight_keeps_its_history() -> None:
    """`sync`: history is cleaned up while paused only when no rollback is asked for."""
    d = new_deployment("foo", 1, 0, None, None, SEL)
    d["spec"]["paused"] = True
    d["metadata"]["annotations"][util.ROLLBACK_TO_ANNOTATION] = "1"
    stale = new_rs_with_status("foo-1", 0, 0, SEL)
    stale["metadata"]["uid"] = "foo-1-uid"
    client = FakeClient()
    client.add(REPLICASETS, stale)
    client.add(DEPLOYMENTS, d)
    h = harness(client=client)
    await h.sync.sync(d, [stale])
    assert h.client.deleted() == []
    del d["metadata"]["annotations"][util.ROLLBACK_TO_ANNOTATION]
    await h.sync.sync(d, [stale])
    assert h.client.deleted() == ["foo-1"]


async def test_a_new_replica_set_is_announced_as_kcm_announces_it() -> None:
    """`getNewReplicaSet`: "Scaled up replica set <name> to <n>", then Progressing=True with
    NewReplicaSetCreated in the same status write as the revision."""
    d = new_deployment("foo", 3, None, 1, None, SEL)
    d["spec"]["progressDeadlineSeconds"] = 600
    client = FakeClient()
    client.add(DEPLOYMENTS, d)
    h = harness(client=client)
    new_rs, old_rss = await h.sync.get_all_replica_sets_and_sync_revision(d, [], create_if_not_existed=True)
    assert new_rs is not None and old_rss == []
    name = util.name_of(new_rs)
    assert [(e.reason, e.message) for e in h.recorder.events] == [
        ("ScalingReplicaSet", f"Scaled up replica set {name} to 3")
    ]
    assert util.annotations_of(d)[util.REVISION_ANNOTATION] == "1"
    cond = next(c for c in d["status"]["conditions"] if c["type"] == "Progressing")
    assert (cond["status"], cond["reason"]) == ("True", "NewReplicaSetCreated")


@pytest.mark.parametrize("deadline", [None, 600])
async def test_a_failed_create_is_reported_on_the_deployment_only_with_a_deadline(
    deadline: int | None,
) -> None:
    """KCM sets Progressing=False (ReplicaSetCreateError) only when it estimates progress, and
    always records the warning event; the create's error is the one returned."""
    d = new_deployment("foo", 3, None, 1, None, SEL)
    if deadline is not None:
        d["spec"]["progressDeadlineSeconds"] = deadline
    client = FakeClient()
    client.add(DEPLOYMENTS, d)
    h = harness(client=client)
    template_hash = util.compute_hash(dict(util.template_of(d)), None)
    client.failing.add((REPLICASETS.plural, f"foo-{template_hash}"))
    with pytest.raises(ApiError) as raised:
        await h.sync.get_all_replica_sets_and_sync_revision(d, [], create_if_not_existed=True)
    assert raised.value.status == 500
    status_writes = [a for a in client.writes() if a.resource == DEPLOYMENTS.plural]
    assert len(status_writes) == (1 if deadline else 0)
    if deadline:
        cond = next(c for c in d["status"]["conditions"] if c["type"] == "Progressing")
        assert (cond["status"], cond["reason"]) == ("False", "ReplicaSetCreateError")
    assert [e.reason for e in h.recorder.events] == ["ReplicaSetCreateError"]


async def test_a_create_refused_by_a_terminating_namespace_is_not_reported() -> None:
    d = new_deployment("foo", 3, None, 1, None, SEL)
    d["spec"]["progressDeadlineSeconds"] = 600

    class Terminating(FakeClient):
        async def create(self, res: Any, body: Obj, *, namespace: str | None = None, **_: Any) -> Obj:
            causes = [{"reason": "NamespaceTerminating", "message": "namespace default is terminating"}]
            raise ApiError(403, {"reason": "Forbidden", "details": {"causes": causes}})

    h = harness(client=Terminating())
    with pytest.raises(ApiError):
        await h.sync.get_all_replica_sets_and_sync_revision(d, [], create_if_not_existed=True)
    assert h.client.writes() == []
    assert h.recorder.events == []
