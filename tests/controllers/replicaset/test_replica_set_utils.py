"""`calculateStatus` and the ReplicaSet condition helpers, ported from Go's
`pkg/controller/replicaset/replica_set_utils_test.go` and the condition tests of
`replica_set_test.go`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controllers.replicaset.sync import calculate_status
from kubeutil.conditions import get_condition, remove_condition, set_condition
from tests.controllers.replicaset.fakes import Obj, new_pod, new_replica_set

NOW = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)

LABEL_MAP = {"name": "foo"}
FULL_LABEL_MAP = {"name": "foo", "type": "production"}


def _counts(status: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        status["replicas"],
        status["fullyLabeledReplicas"],
        status["readyReplicas"],
        status["availableReplicas"],
    )


def _status_cases() -> list[tuple[str, Obj, list[Obj], tuple[int, int, int, int]]]:
    not_fully_labelled = new_replica_set(1, LABEL_MAP)
    fully_labelled = new_replica_set(2, FULL_LABEL_MAP)
    long_min_ready = new_replica_set(1, FULL_LABEL_MAP)
    long_min_ready["spec"]["minReadySeconds"] = 3600

    def pod(name: str, rs: Obj, phase: str = "Running") -> Obj:
        return new_pod(name, rs, phase, owned=True)

    return [
        ("1 fully labelled pod", fully_labelled, [pod("pod1", fully_labelled)], (1, 1, 1, 1)),
        ("1 not fully labelled pod", not_fully_labelled, [pod("pod1", not_fully_labelled)], (1, 0, 1, 1)),
        (
            "2 fully labelled pods",
            fully_labelled,
            [pod("pod1", fully_labelled), pod("pod2", fully_labelled)],
            (2, 2, 2, 2),
        ),
        (
            "2 not fully labelled pods",
            not_fully_labelled,
            [pod("pod1", not_fully_labelled), pod("pod2", not_fully_labelled)],
            (2, 0, 2, 2),
        ),
        (
            "1 fully labelled pod, 1 not fully labelled pod",
            not_fully_labelled,
            [pod("pod1", not_fully_labelled), pod("pod2", fully_labelled)],
            (2, 1, 2, 2),
        ),
        ("1 non-ready pod", fully_labelled, [pod("pod1", fully_labelled, "Pending")], (1, 1, 0, 0)),
        # Ready with no transition time: never available under minReadySeconds.
        ("1 ready but non-available pod", long_min_ready, [pod("pod1", long_min_ready)], (1, 1, 1, 0)),
    ]


@pytest.mark.parametrize(
    ("name", "rs", "pods", "expected"), _status_cases(), ids=[c[0] for c in _status_cases()]
)
def test_calculate_status(name: str, rs: Obj, pods: list[Obj], expected: tuple[int, int, int, int]) -> None:
    """TestCalculateStatus."""
    status = calculate_status(rs, pods, None, NOW)
    assert _counts(status) == expected
    assert not status.get("conditions")


def _condition_cases() -> list[tuple[str, Obj, list[Obj], BaseException | None, list[Obj]]]:
    rs = new_replica_set(2, LABEL_MAP)
    failing = new_replica_set(10, LABEL_MAP)
    failing["status"]["conditions"] = [{"type": "ReplicaFailure", "status": "True"}]

    def pods(owner: Obj, n: int) -> list[Obj]:
        return [new_pod(f"pod{i + 1}", owner, "Running", owned=True) for i in range(n)]

    err = RuntimeError("fake manageReplicasErr")
    return [
        (
            "manageReplicasErr != nil && failureCond == nil, diff < 0",
            rs,
            pods(rs, 1),
            err,
            [
                {
                    "type": "ReplicaFailure",
                    "status": "True",
                    "reason": "FailedCreate",
                    "message": "fake manageReplicasErr",
                }
            ],
        ),
        (
            "manageReplicasErr != nil && failureCond == nil, diff > 0",
            rs,
            pods(rs, 3),
            err,
            [
                {
                    "type": "ReplicaFailure",
                    "status": "True",
                    "reason": "FailedDelete",
                    "message": "fake manageReplicasErr",
                }
            ],
        ),
        ("manageReplicasErr == nil && failureCond != nil", failing, pods(failing, 1), None, []),
        (
            "manageReplicasErr != nil && failureCond != nil",
            failing,
            pods(failing, 1),
            err,
            [{"type": "ReplicaFailure", "status": "True"}],
        ),
        ("manageReplicasErr == nil && failureCond == nil", rs, pods(rs, 1), None, []),
    ]


@pytest.mark.parametrize(
    ("name", "rs", "pods", "err", "expected"), _condition_cases(), ids=[c[0] for c in _condition_cases()]
)
def test_calculate_status_conditions(
    name: str, rs: Obj, pods: list[Obj], err: BaseException | None, expected: list[Obj]
) -> None:
    """TestCalculateStatusConditions: the transition time is whatever was stamped."""
    conditions = [dict(c) for c in calculate_status(rs, pods, err, NOW).get("conditions") or []]
    for cond in conditions:
        if cond.get("lastTransitionTime") and not any("lastTransitionTime" in e for e in expected):
            cond.pop("lastTransitionTime")
    assert conditions == expected


def test_calculate_status_does_not_touch_the_cached_status() -> None:
    """`rs = rs.DeepCopy()` before `calculateStatus`: the cached object is never written."""
    rs = new_replica_set(2, LABEL_MAP)
    rs["status"] = {"conditions": [{"type": "ReplicaFailure", "status": "True"}], "replicas": 7}
    calculate_status(rs, [], None, NOW)
    assert rs["status"] == {"conditions": [{"type": "ReplicaFailure", "status": "True"}], "replicas": 7}


IMAGE_PULL_BACK_OFF = {"type": "ImagePullBackOff", "status": "True", "reason": "NonExistentImage"}
REPLICA_FAILURE = {"type": "ReplicaFailure", "status": "True", "reason": "OtherFailure"}
REPLICA_FAILURE_2 = {"type": "ReplicaFailure", "status": "True", "reason": "AnotherFailure"}


@pytest.mark.parametrize(("cond_type", "exists"), [("ReplicaFailure", True), ("ImagePullBackOff", False)])
def test_get_condition(cond_type: str, exists: bool) -> None:
    """TestGetCondition."""
    status = {"conditions": [dict(REPLICA_FAILURE)]}
    assert (get_condition(status, cond_type) is not None) is exists


@pytest.mark.parametrize(
    ("name", "conditions", "cond", "expected"),
    [
        ("set for the first time", [], REPLICA_FAILURE, [REPLICA_FAILURE]),
        ("simple set", [IMAGE_PULL_BACK_OFF], REPLICA_FAILURE, [IMAGE_PULL_BACK_OFF, REPLICA_FAILURE]),
        ("overwrite", [REPLICA_FAILURE], REPLICA_FAILURE_2, [REPLICA_FAILURE_2]),
    ],
)
def test_set_condition(name: str, conditions: list[Obj], cond: Obj, expected: list[Obj]) -> None:
    """TestSetCondition (types, statuses and reasons; the transition time is the helper's to keep)."""
    status: dict[str, Any] = {"conditions": [dict(c) for c in conditions]}
    set_condition(status, dict(cond))
    got = [{k: c[k] for k in ("type", "status", "reason")} for c in status["conditions"]]
    assert got == expected


@pytest.mark.parametrize(
    ("name", "conditions", "cond_type", "expected"),
    [
        ("remove from empty status", [], "ReplicaFailure", []),
        ("simple remove", [REPLICA_FAILURE], "ReplicaFailure", []),
        ("doesn't remove anything", [REPLICA_FAILURE], "ImagePullBackOff", [REPLICA_FAILURE]),
    ],
)
def test_remove_condition(name: str, conditions: list[Obj], cond_type: str, expected: list[Obj]) -> None:
    """TestRemoveCondition."""
    status: dict[str, Any] = {"conditions": [dict(c) for c in conditions]}
    remove_condition(status, cond_type)
    assert (status.get("conditions") or []) == expected
