"""Ports of Go's `pkg/controller/controller_utils_test.go` table tests: expectations, active-pod
filtering, the two deletion orders (`ActivePods`, `ActivePodsWithRanks` and its gates), the pod
template hash and the pod built from a template."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controllers.common.expectations import ControllerExpectations, UIDTrackingControllerExpectations
from controllers.common.pods import filter_active_pods, pod_key
from controllers.common.podtemplate import pod_from_template, pods_prefix
from controllers.common.ranking import _facts, less, sort_active_pods
from controllers.deployment.util import compute_hash
from kubeutil.timestamps import format_time

Obj = dict[str, Any]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_257_894_000.0  # 2009-11-10 23:00:00 UTC

    def __call__(self) -> float:
        return self.now


def test_controller_expectations() -> None:
    """TestControllerExpectations: counts may go below zero, a new record replaces the old, and
    the record expires after its TTL."""
    ttl = 30.0
    clock = FakeClock()
    e = ControllerExpectations(clock=clock, timeout=ttl)
    adds, dels = 10, 30
    key = "default/foobar"
    e.set_expectations(key, adds, dels)
    for _ in range(adds + 1):
        e.creation_observed(key)
    assert not e.satisfied_expectations(key)  # there are still delete expectations
    for _ in range(dels + 1):
        e.deletion_observed(key)
    exp = e.get_expectations(key)
    assert exp is not None and (exp.add, exp.delete) == (-1, -1)
    assert e.satisfied_expectations(key)

    e.set_expectations(key, 1, 2)  # the next round of syncs: old expectations are cleared
    exp = e.get_expectations(key)
    assert exp is not None and (exp.add, exp.delete) == (1, 2)

    clock.now += ttl + 0.001
    assert e.satisfied_expectations(key)  # expired


def test_uid_expectations() -> None:
    """TestUIDExpectations: each controller is satisfied once every pod it deletes was seen gone."""
    uid_exp = UIDTrackingControllerExpectations()
    rc_to_pods: dict[str, list[str]] = {}
    for i in range(4):
        key = f"default/rc-{i}"
        pod_keys = [
            pod_key({"metadata": {"namespace": "default", "name": f"pod{j}-rc-{i}"}}) for j in range(5)
        ]
        rc_to_pods[key] = pod_keys
        uid_exp.expect_deletions(key, pod_keys)
    keys = list(rc_to_pods)
    random.Random(1).shuffle(keys)
    for key in keys:
        assert not uid_exp.satisfied_expectations(key)
        for p in rc_to_pods[key]:
            uid_exp.deletion_observed(key, p)
        assert uid_exp.satisfied_expectations(key)
        uid_exp.delete_expectations(key)
        assert uid_exp.get_uids(key) is None


def test_active_pod_filtering() -> None:
    """TestActivePodFiltering: Succeeded and Failed pods are not active."""
    pods = [
        {"metadata": {"name": f"pod{i}", "namespace": "default"}, "status": {"phase": "Running"}}
        for i in range(5)
    ]
    pods[0]["status"]["phase"] = "Succeeded"
    pods[1]["status"]["phase"] = "Failed"
    assert {p["metadata"]["name"] for p in filter_active_pods(pods)} == {"pod2", "pod3", "pod4"}


NOW = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)  # whole seconds, as metav1.Time serializes
THEN = NOW - timedelta(days=30)


def _ready(since: datetime | None) -> list[Obj]:
    cond: Obj = {"type": "Ready", "status": "True"}
    if since is not None:
        cond["lastTransitionTime"] = format_time(since)
    return [cond]


def test_sorting_active_pods() -> None:
    """TestSortingActivePods: `sort.Sort(ActivePods(...))` of shuffled pods gives the same order."""

    def pod(i: int, node: str, phase: str, **status: Any) -> Obj:
        return {
            "metadata": {"name": f"pod{i}", "namespace": "default"},
            "spec": {"nodeName": node} if node else {},
            "status": {"phase": phase, **status},
        }

    restarts_3_0 = [{"restartCount": 3}, {"restartCount": 0}]
    restarts_2_1 = [{"restartCount": 2}, {"restartCount": 1}]
    pods = [
        pod(0, "", "Pending"),  # not scheduled yet
        pod(1, "bar", "Pending"),  # scheduled but pending
        pod(2, "foo", "Unknown"),
        pod(3, "foo", "Running"),  # running but not ready
        pod(
            4, "foo", "Running", conditions=_ready(None), containerStatuses=restarts_3_0
        ),  # no transition time
        pod(5, "foo", "Running", conditions=_ready(NOW), containerStatuses=restarts_3_0),
        pod(6, "foo", "Running", conditions=_ready(THEN), containerStatuses=restarts_3_0),  # ready longer
        pod(7, "foo", "Running", conditions=_ready(THEN), containerStatuses=restarts_2_1),  # fewer restarts
        pod(8, "foo", "Running", conditions=_ready(THEN), containerStatuses=restarts_2_1),  # older
    ]
    pods[7]["metadata"]["creationTimestamp"] = format_time(NOW)
    pods[8]["metadata"]["creationTimestamp"] = format_time(THEN)
    expected = [p["metadata"]["name"] for p in pods]
    rng = random.Random(20)
    for _ in range(20):
        shuffled = pods[:]
        rng.shuffle(shuffled)
        assert [p["metadata"]["name"] for p in sort_active_pods(shuffled)] == expected


ZERO = None  # metav1.Time{}


def _rank_pod(
    name: str,
    node: str,
    phase: str,
    ready: bool,
    restarts: int,
    ready_since: datetime | None,
    created: datetime | None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    """The `pod` closure of TestSortingActivePodsWithRanks (no UID: ties between equal buckets hold)."""
    meta: Obj = {"name": name}
    if created is not None:
        meta["creationTimestamp"] = format_time(created)
    if annotations:
        meta["annotations"] = annotations
    status: Obj = {"phase": phase}
    if ready:
        status["conditions"] = _ready(ready_since)
        status["containerStatuses"] = [{"restartCount": restarts}]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


H2, H5, H8 = NOW - timedelta(hours=2), NOW - timedelta(hours=5), NOW - timedelta(hours=8)
COST = "controller.kubernetes.io/pod-deletion-cost"
unscheduled = _rank_pod("unscheduled", "", "Pending", False, 0, ZERO, ZERO)
scheduled_pending = _rank_pod("pending", "node", "Pending", False, 0, ZERO, ZERO)
unknown_phase = _rank_pod("unknown-phase", "node", "Unknown", False, 0, ZERO, ZERO)
running_not_ready = _rank_pod("not-ready", "node", "Running", False, 0, ZERO, ZERO)
ready_no_ltt = _rank_pod("ready-no-last-transition-time", "node", "Running", True, 0, ZERO, ZERO)
ready_now = _rank_pod("ready-now", "node", "Running", True, 0, NOW, NOW)
ready_then = _rank_pod("ready-then", "node", "Running", True, 0, THEN, THEN)
ready_now_high_restarts = _rank_pod("ready-high-restarts", "node", "Running", True, 9001, NOW, NOW)
ready_now_created_then = _rank_pod("ready-now-created-then", "node", "Running", True, 0, NOW, THEN)
low_cost = _rank_pod("low-deletion-cost", "node", "Running", True, 0, NOW, THEN, {COST: "10"})
high_cost = _rank_pod("high-deletion-cost", "node", "Running", True, 0, NOW, THEN, {COST: "100"})
unscheduled_5h = _rank_pod("unscheduled-5-hours", "", "Pending", False, 0, H5, H5)
unscheduled_8h = _rank_pod("unscheduled-10-hours", "", "Pending", False, 0, H8, H8)
ready_2h = _rank_pod("ready-2-hours", "", "Running", True, 0, H2, THEN)
ready_5h = _rank_pod("ready-5-hours", "", "Running", True, 0, H5, THEN)
ready_8h = _rank_pod("ready-10-hours", "", "Running", True, 0, H8, THEN)


def _less(p1: Obj, r1: int, p2: Obj, r2: int, **gates: bool) -> bool:
    return less(_facts(p1, r1), _facts(p2, r2), NOW, **gates)


EQUAL = [
    (unscheduled, None),
    (scheduled_pending, None),
    (unknown_phase, None),
    (running_not_ready, None),
    (ready_now_created_then, None),
    (ready_now, None),
    (ready_then, None),
    (ready_now_high_restarts, None),
    (unscheduled_5h, unscheduled_8h),  # the same logarithmic bucket of age
    (ready_5h, ready_8h),  # the same logarithmic bucket of time ready
]


@pytest.mark.parametrize(("p1", "p2"), EQUAL, ids=[p[0]["metadata"]["name"] for p in EQUAL])
def test_sorting_active_pods_with_ranks_equal(p1: Obj, p2: Obj | None) -> None:
    """TestSortingActivePodsWithRanks, equalityTests (LogarithmicScaleDown on)."""
    p2 = p2 if p2 is not None else p1
    assert not _less(p1, 1, p2, 1) and not _less(p2, 1, p1, 1)


INEQUAL: list[tuple[Obj, int, Obj, int, bool]] = [
    (unscheduled, 1, scheduled_pending, 2, True),
    (unscheduled, 2, scheduled_pending, 1, True),
    (scheduled_pending, 1, unknown_phase, 2, True),
    (unknown_phase, 1, running_not_ready, 2, True),
    (running_not_ready, 1, ready_no_ltt, 1, True),
    (ready_no_ltt, 1, ready_now, 1, True),
    (ready_now, 2, ready_no_ltt, 1, True),
    (ready_now, 1, ready_then, 1, True),
    (ready_now, 2, ready_then, 1, True),
    (ready_now_high_restarts, 1, ready_now, 1, True),
    (ready_now, 2, ready_now_high_restarts, 1, True),
    (ready_now, 1, ready_now_created_then, 1, True),
    (ready_now_created_then, 2, ready_now, 1, True),
    (low_cost, 2, high_cost, 1, True),
    (high_cost, 2, low_cost, 1, False),  # PodDeletionCost off: the rank decides
    (ready_2h, 1, ready_5h, 1, True),
]


@pytest.mark.parametrize(
    ("lesser", "lesser_rank", "greater", "greater_rank", "deletion_cost"),
    INEQUAL,
    ids=[f"test{i}" for i in range(len(INEQUAL))],
)
def test_sorting_active_pods_with_ranks_less(
    lesser: Obj, lesser_rank: int, greater: Obj, greater_rank: int, deletion_cost: bool
) -> None:
    """TestSortingActivePodsWithRanks, inequalityTests."""
    gates = {"pod_deletion_cost": deletion_cost}
    assert _less(lesser, lesser_rank, greater, greater_rank, **gates)
    assert not _less(greater, greater_rank, lesser, lesser_rank, **gates)


def test_without_logarithmic_scale_down_the_more_recent_time_goes_first() -> None:
    """`LogarithmicScaleDown` off: times compare as they are (`afterOrZero`), no buckets, no UIDs."""
    off = {"logarithmic_scale_down": False}
    assert _less(unscheduled_5h, 1, unscheduled_8h, 1, **off)
    assert not _less(unscheduled_8h, 1, unscheduled_5h, 1, **off)
    assert _less(ready_5h, 1, ready_8h, 1, **off)
    assert not _less(ready_8h, 1, ready_5h, 1, **off)
    assert _less(ready_no_ltt, 1, ready_now, 1, **off)  # a zero time still goes first
    # With the gate on, the same bucket falls to the UID: the lower one goes first.
    a = {**unscheduled_8h, "metadata": {**unscheduled_8h["metadata"], "uid": "a"}}
    b = {**unscheduled_5h, "metadata": {**unscheduled_5h["metadata"], "uid": "b"}}
    assert _less(a, 1, b, 1) and not _less(b, 1, a, 1)
    assert _less(b, 1, a, 1, **off)


def test_without_pod_deletion_cost_the_annotation_is_ignored() -> None:
    """`PodDeletionCost` off: equal pods but for the cost are equal."""
    off = {"pod_deletion_cost": False}
    assert not _less(low_cost, 1, high_cost, 1, **off) and not _less(high_cost, 1, low_cost, 1, **off)
    assert _less(low_cost, 1, high_cost, 1)


@pytest.mark.parametrize(
    ("collision_count", "other_collision_count"),
    [(1, 2), (None, 2**31 - 1)],
    ids=["simple", "using math.MaxInt64"],
)
def test_compute_hash(collision_count: int | None, other_collision_count: int) -> None:
    """TestComputeHash: another collision count gives another hash."""
    template: Obj = {}
    assert compute_hash(template, collision_count) != compute_hash(template, other_collision_count)


def _controller() -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "foobar", "namespace": "default", "uid": "rc-uid", "resourceVersion": "18"},
        "spec": {
            "replicas": 1,
            "selector": {"foo": "bar"},
            "template": {
                "metadata": {"labels": {"name": "foo", "type": "production"}},
                "spec": {
                    "containers": [{"image": "foo/bar", "imagePullPolicy": "IfNotPresent"}],
                    "restartPolicy": "Always",
                    "dnsPolicy": "Default",
                    "nodeSelector": {"baz": "blah"},
                },
            },
        },
    }


def test_create_pods() -> None:
    """TestCreatePods / TestCreatePodsWithGenerateName: the pod sent carries the template's labels
    and spec, `<controller>-` as generateName and the controller reference."""
    rc = _controller()
    ref = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "name": "foobar",
        "uid": "rc-uid",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    pod = pod_from_template(rc["spec"]["template"], rc, ref)
    assert pod["metadata"]["labels"] == rc["spec"]["template"]["metadata"]["labels"]
    assert pod["metadata"]["generateName"] == "foobar-"
    assert pod["metadata"]["ownerReferences"] == [ref]
    assert pod["spec"] == rc["spec"]["template"]["spec"]


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        ("foobar", "foobar-"),
        ("a" * 252, "a" * 252 + "-"),
        ("a" * 253, "a" * 253 + "-"),  # validated as `maskTrailingDash` leaves it: 253 characters
        ("a" * 254, "a" * 254),
        ("Foo", "Foo"),
        ("", ""),
    ],
    ids=["plain", "252", "253", "254", "uppercase", "empty"],
)
def test_pods_prefix(name: str, prefix: str) -> None:
    """`getPodsPrefix`: the dash only when `ValidatePodName(prefix, true)` accepts it."""
    assert pods_prefix(name) == prefix
