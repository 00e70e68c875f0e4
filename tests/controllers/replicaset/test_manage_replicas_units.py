"""`manageReplicas`' parts on their own, ported from Go's `pkg/controller/replicaset/replica_set_test.go`:
the slow-start batches, which pods a scale-down deletes, and which ReplicaSets and pods are related."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controllers.common.ranking import pods_to_delete
from controllers.replicaset.sync import slow_start_batch
from tests.controllers.replicaset.fakes import Obj, Rig, new_pod, new_replica_set

NOW = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)


class FakeErr(Exception):
    pass


@pytest.mark.parametrize(
    ("name", "count", "call_limit", "successes", "fails", "calls"),
    [
        ("callLimit = 0 (all fail)", 10, 0, 0, True, 1),  # the first batch: at least one call
        ("callLimit = count (all succeed)", 10, 10, 10, False, 10),  # 1 + 2 + 4 + 3
        ("callLimit < count (some succeed)", 10, 5, 5, True, 7),  # 1 + 2 + 4
    ],
)
async def test_slow_start_batch(
    name: str, count: int, call_limit: int, successes: int, fails: bool, calls: int
) -> None:
    """TestSlowStartBatch: successes counted, the first error returned, no batch after a failing one."""
    fake_err = FakeErr("fake error")
    call_count = 0

    async def fn() -> None:
        nonlocal call_count
        call_count += 1
        if call_count > call_limit:
            raise fake_err

    got, err = await slow_start_batch(count, 1, fn)
    assert got == successes
    assert (err is fake_err) if fails else (err is None)
    assert call_count == calls


def _pods() -> dict[str, Obj]:
    rs = new_replica_set(1, {"name": "foo"})
    unscheduled_pending = new_pod("unscheduled-pending-pod", rs, "Pending", owned=True)
    scheduled_pending = new_pod("scheduled-pending-pod", rs, "Pending", owned=True)
    scheduled_pending["spec"]["nodeName"] = "fake-node"
    not_ready = new_pod("scheduled-running-not-ready-pod", rs, "Running", owned=True)
    not_ready["spec"]["nodeName"] = "fake-node"
    not_ready["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    ready1 = new_pod("scheduled-running-ready-pod-on-node-1", rs, "Running", owned=True)
    ready1["spec"]["nodeName"] = "fake-node-1"
    ready2 = new_pod("scheduled-running-ready-pod-on-node-2", rs, "Running", owned=True)
    ready2["spec"]["nodeName"] = "fake-node-2"
    return {
        "unscheduled": unscheduled_pending,
        "pending": scheduled_pending,
        "notready": not_ready,
        "ready1": ready1,
        "ready2": ready2,
    }


P = _pods()

# (name, pods, related (None: the pods), diff, expected) by the names above
GET_PODS_TO_DELETE = [
    ("len(pods) = 0 (i.e., diff = 0 too)", [], None, 0, []),
    ("diff = len(pods)", ["notready", "ready1"], None, 2, ["notready", "ready1"]),
    ("diff < len(pods)", ["ready1", "notready"], None, 1, ["notready"]),
    (
        "various pod phases and conditions, diff = len(pods)",
        ["ready1", "ready1", "ready2", "notready", "pending", "unscheduled"],
        None,
        6,
        ["ready1", "ready1", "ready2", "notready", "pending", "unscheduled"],
    ),
    (
        "various pod phases and conditions, diff = len(pods), relatedPods empty",
        ["ready1", "ready1", "ready2", "notready", "pending", "unscheduled"],
        [],
        6,
        ["ready1", "ready1", "ready2", "notready", "pending", "unscheduled"],
    ),
    ("scheduled vs unscheduled, diff < len(pods)", ["pending", "unscheduled"], None, 1, ["unscheduled"]),
    (
        "ready vs not-ready, diff < len(pods)",
        ["ready1", "notready", "notready"],
        None,
        2,
        ["notready", "notready"],
    ),
    (
        "ready and colocated with another ready pod vs not colocated, diff < len(pods)",
        ["ready1", "ready2"],
        ["ready1", "ready2", "ready2"],
        1,
        ["ready2"],
    ),
    ("pending vs running, diff < len(pods)", ["pending", "notready"], None, 1, ["pending"]),
    (
        "various pod phases and conditions, diff < len(pods)",
        ["ready1", "ready2", "notready", "pending", "unscheduled"],
        None,
        3,
        ["unscheduled", "pending", "notready"],
    ),
]


@pytest.mark.parametrize(
    ("name", "pods", "related", "diff", "expected"),
    GET_PODS_TO_DELETE,
    ids=[c[0] for c in GET_PODS_TO_DELETE],
)
def test_get_pods_to_delete(
    name: str, pods: list[str], related: list[str] | None, diff: int, expected: list[str]
) -> None:
    """TestGetPodsToDelete."""
    filtered = [P[n] for n in pods]
    related_pods = filtered if related is None else [P[n] for n in related]
    got = pods_to_delete(filtered, related_pods, diff, NOW)
    assert got == [P[n] for n in expected]


def _owned_by(uid: str, rs: Obj) -> Obj:
    rs["metadata"]["ownerReferences"][0]["uid"] = uid
    return rs


def _replica_sets() -> dict[str, Obj]:
    some = new_replica_set(1, {"foo": "bar"}, name="rs1")
    related = new_replica_set(1, {"foo": "baz"}, name="rs2")
    unrelated = _owned_by("456", new_replica_set(1, {"foo": "quux"}, name="rs3"))
    pending_deletion = _owned_by("789", new_replica_set(1, {"foo": "xyzzy"}, name="rs4"))
    pending_deletion["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"some": some, "related": related, "unrelated": unrelated, "pending": pending_deletion}


def test_get_replica_sets_with_same_controller() -> None:
    """TestGetReplicaSetsWithSameController (the cache accumulates across the cases, as in Go)."""
    rss = _replica_sets()
    rig = Rig()
    cases = [
        ("a ReplicaSet pending deletion", ["pending", "unrelated"], "pending", ["rs4"]),
        ("only the given ReplicaSet without related ones", ["some", "unrelated"], "some", ["rs1"]),
        (
            "the given and related ReplicaSets, not unrelated ones",
            ["some", "related", "unrelated"],
            "some",
            ["rs1", "rs2"],
        ),
    ]
    for name, present, target, expected in cases:
        for n in present:
            rig.add_rs(rss[n])
        got = rig.controller.syncer.replica_sets_with_same_controller(rss[target])
        assert sorted(r["metadata"]["name"] for r in got) == expected, name


def test_related_pods_lookup() -> None:
    """TestRelatedPodsLookup, on one node: related pods are those any ReplicaSet of the same
    controller selects (ours reads them on the candidates' nodes only)."""
    rss = _replica_sets()

    def pod(name: str, rs: Obj) -> Obj:
        p = new_pod(name, rs, "Running", owned=True)
        p["spec"]["nodeName"] = "node"
        return p

    pod1, pod2 = pod("pod1", rss["some"]), pod("pod2", rss["some"])
    pod3, pod4 = pod("pod3", rss["related"]), pod("pod4", rss["unrelated"])
    rig = Rig()
    cases = [
        (
            "a pod even if its ReplicaSet is pending deletion",
            ["pending", "unrelated"],
            [pod("pod", rss["pending"])],
            "pending",
            ["pod"],
        ),
        (
            "only the ReplicaSet's own pods without related ones",
            ["some", "unrelated"],
            [pod1, pod2, pod4],
            "some",
            ["pod1", "pod2"],
        ),
        (
            "own and related ReplicaSets' pods, not unrelated ones",
            ["some", "related", "unrelated"],
            [pod1, pod2, pod3, pod4],
            "some",
            ["pod1", "pod2", "pod3"],
        ),
    ]
    for name, present, pods, target, expected in cases:
        for n in present:
            rig.add_rs(rss[n])
        for p in pods:
            rig.add_pod(p)
            rig.controller.add_pod(p)
        got = rig.controller.syncer.related_pods(rss[target], pods)
        assert sorted(p["metadata"]["name"] for p in got) == expected, name
