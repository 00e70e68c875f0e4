"""Status and the Progressing / Available conditions computed from ReplicaSets."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controllers.deployment import progress
from kubeutil.conditions import get_condition, remove_condition, set_condition
from kubeutil.timestamps import format_time
from tests.controllers.deployment.builders import deployment, replica_set
from tests.controllers.deployment.fakeclient import harness

Obj = dict[str, Any]

NOW = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def test_status_counts_come_from_replica_sets() -> None:
    d = deployment(3, generation=4)
    old = replica_set("old", 1, available=1, ready=1)
    new = replica_set("new", 3, available=1, ready=2)
    st = progress.calculate_status([old, new], new, d, now=NOW)
    assert st["observedGeneration"] == 4
    assert (st["replicas"], st["updatedReplicas"], st["readyReplicas"], st["availableReplicas"]) == (
        4,
        3,
        3,
        2,
    )
    assert st["unavailableReplicas"] == 2
    avail = get_condition(st, "Available")
    # 25% of 3 rounds down to 0 unavailable allowed: 2 available of 3 is not enough.
    assert avail is not None and avail["status"] == "False"


def test_available_condition_follows_max_unavailable() -> None:
    d = deployment(4, max_unavailable=1)
    new = replica_set("new", 4, available=2)
    st = progress.calculate_status([new], new, d, now=NOW)
    cond = get_condition(st, "Available")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "MinimumReplicasUnavailable")
    new = replica_set("new", 4, available=3)
    cond = get_condition(progress.calculate_status([new], new, d, now=NOW), "Available")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "MinimumReplicasAvailable")


def test_complete_rollout_reports_new_replica_set_available() -> None:
    d = deployment(2)
    new = replica_set("web-abc", 2)
    st = progress.rollout_status([new], new, d, now=NOW)
    cond = get_condition(st, "Progressing")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("True", "NewReplicaSetAvailable")
    assert "web-abc" in cond["message"]


def test_progress_refreshes_last_update_time_but_keeps_transition() -> None:
    earlier = format_time(NOW - timedelta(minutes=5))
    d = deployment(
        3,
        status={
            "replicas": 3,
            "updatedReplicas": 1,
            "availableReplicas": 2,
            "conditions": [
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "ReplicaSetUpdated",
                    "lastUpdateTime": earlier,
                    "lastTransitionTime": earlier,
                }
            ],
        },
    )
    old = replica_set("old", 1)
    new = replica_set("new", 2, available=1)
    st = progress.rollout_status([old, new], new, d, now=NOW)
    cond = get_condition(st, "Progressing")
    assert cond is not None
    assert cond["lastUpdateTime"] == format_time(NOW)
    assert cond["lastTransitionTime"] == earlier


def test_no_progress_past_deadline_times_out_and_stays_timed_out() -> None:
    long_ago = format_time(NOW - timedelta(seconds=700))
    status = {
        "replicas": 4,
        "updatedReplicas": 1,
        "availableReplicas": 3,
        "readyReplicas": 3,
        "conditions": [
            {
                "type": "Progressing",
                "status": "True",
                "reason": "ReplicaSetUpdated",
                "lastUpdateTime": long_ago,
                "lastTransitionTime": long_ago,
            }
        ],
    }
    d = deployment(3, status=status, progress_deadline=600)
    old = replica_set("old", 3)
    new = replica_set("new", 1, available=0, ready=0)
    st = progress.rollout_status([old, new], new, d, now=NOW)
    cond = get_condition(st, "Progressing")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "ProgressDeadlineExceeded")
    assert progress.requeue_stuck_after({**d, "status": st}, st, NOW) is None


def test_requeue_before_deadline() -> None:
    recent = format_time(NOW - timedelta(seconds=100))
    status = {
        "conditions": [
            {
                "type": "Progressing",
                "status": "True",
                "reason": "ReplicaSetUpdated",
                "lastUpdateTime": recent,
                "lastTransitionTime": recent,
            }
        ]
    }
    d = deployment(3, status=status, progress_deadline=600)
    after = progress.requeue_stuck_after(d, {"replicas": 3, "updatedReplicas": 1}, NOW)
    assert after == 501


def test_without_deadline_no_progressing_condition() -> None:
    d = deployment(1, progress_deadline=None)
    new = replica_set("new", 1)
    assert get_condition(progress.rollout_status([new], new, d, now=NOW), "Progressing") is None


def test_replica_failure_surfaces_new_replica_set_first() -> None:
    d = deployment(1)
    old = replica_set("old", 1)
    old["status"]["conditions"] = [
        {
            "type": "ReplicaFailure",
            "status": "True",
            "reason": "Old",
            "lastTransitionTime": "2024-01-01T00:00:00Z",
        }
    ]
    new = replica_set("new", 1)
    new["status"]["conditions"] = [
        {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "quota"}
    ]
    cond = get_condition(progress.rollout_status([old, new], new, d, now=NOW), "ReplicaFailure")
    assert cond is not None and cond["reason"] == "FailedCreate"
    new["status"]["conditions"] = []
    cond = get_condition(progress.rollout_status([old, new], new, d, now=NOW), "ReplicaFailure")
    assert cond is not None and cond["reason"] == "Old"
    old["status"]["conditions"] = []
    assert get_condition(progress.rollout_status([old, new], new, d, now=NOW), "ReplicaFailure") is None


# -- KCM's own cases (`deployment_util_test.go`, `progress_test.go`) ----------------------


def _rolling(desired: int, current: int, updated: int, available: int, unavailable: int, surge: int) -> Obj:
    return {
        "metadata": {},
        "spec": {
            "replicas": desired,
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": unavailable, "maxSurge": surge},
            },
        },
        "status": {"replicas": current, "updatedReplicas": updated, "availableReplicas": available},
    }


# `TestDeploymentComplete`.
@pytest.mark.parametrize(
    ("d", "expected"),
    [
        pytest.param(_rolling(5, 5, 5, 4, 1, 0), False, id="min but not all pods become available"),
        pytest.param(_rolling(5, 5, 5, 3, 1, 0), False, id="min availability is not honored"),
        pytest.param(_rolling(5, 5, 5, 5, 0, 0), True, id="complete"),
        pytest.param(_rolling(5, 5, 4, 5, 0, 0), False, id="all pods are available but not updated"),
        pytest.param(_rolling(1, 2, 1, 1, 0, 1), False, id="still running old pods"),
        pytest.param(_rolling(1, 1, 1, 0, 1, 1), False, id="one replica deployment never comes up"),
    ],
)
def test_deployment_complete(d: Obj, expected: bool) -> None:
    assert progress.deployment_complete(d, d["status"]) is expected


def _counts(current: int, updated: int, ready: int, available: int) -> Obj:
    return {
        "replicas": current,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
    }


# `TestDeploymentProgressing`.
@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(_counts(10, 4, 4, 4), _counts(10, 6, 4, 4), True, id="updated pods"),
        pytest.param(_counts(10, 4, 4, 4), _counts(10, 4, 4, 4), False, id="not progressing"),
        pytest.param(_counts(10, 4, 6, 6), _counts(8, 4, 6, 6), True, id="old pods removed"),
        pytest.param(_counts(10, 7, 3, 3), _counts(10, 6, 3, 3), False, id="less new pods"),
        pytest.param(_counts(10, 4, 7, 7), _counts(8, 8, 5, 5), True, id="less overall but more new pods"),
        pytest.param(_counts(10, 10, 9, 8), _counts(10, 10, 10, 8), True, id="more ready pods"),
        pytest.param(_counts(10, 10, 10, 9), _counts(10, 10, 10, 10), True, id="more available pods"),
    ],
)
def test_deployment_progressing(old: Obj, new: Obj, expected: bool) -> None:
    assert progress.deployment_progressing({"status": old}, new) is expected


def _at(minute: int, second: int) -> datetime:
    return datetime(2016, 1, 1, 0, minute, second, tzinfo=UTC)


def _with_progressing(reason: str, pds: int | None, since: datetime | None) -> Obj:
    cond: Obj = {"type": "Progressing", "status": "True", "reason": reason}
    if since is not None:
        cond["lastUpdateTime"] = format_time(since)
    spec: Obj = {} if pds is None else {"progressDeadlineSeconds": pds}
    return {"spec": spec, "status": {"conditions": [cond]}}


# `TestDeploymentTimedOut`.
@pytest.mark.parametrize(
    ("d", "now", "expected"),
    [
        pytest.param(_with_progressing("", None, _at(1, 9)), _at(1, 20), False, id="nil deadline"),
        pytest.param(_with_progressing("", 2**31 - 1, _at(1, 9)), _at(1, 20), False, id="infinite deadline"),
        pytest.param(_with_progressing("", 10, _at(1, 9)), _at(1, 20), True, id="10s, 11s since"),
        pytest.param(_with_progressing("", 10, _at(1, 11)), _at(1, 20), False, id="10s, 9s since"),
        pytest.param(
            _with_progressing("NewReplicaSetAvailable", None, None),
            _at(1, 20),
            False,
            id="previously complete",
        ),
        # Go reads a missing lastUpdateTime as the zero time: long past any deadline.
        pytest.param(_with_progressing("", 10, None), _at(1, 20), True, id="no lastUpdateTime"),
    ],
)
def test_deployment_timed_out(d: Obj, now: datetime, expected: bool) -> None:
    assert progress.deployment_timed_out(d, d["status"], now) is expected


def _current(pds: int | None, replicas: int, status: Obj, conditions: list[Obj] | None) -> Obj:
    """`currentDeployment` of progress_test.go: a Recreate Deployment named progress-test."""
    spec: Obj = {"replicas": replicas, "strategy": {"type": "Recreate"}}
    if pds is not None:
        spec["progressDeadlineSeconds"] = pds
    st = dict(status)
    if conditions is not None:
        st["conditions"] = [dict(c) for c in conditions]
    return {"metadata": {"name": "progress-test"}, "spec": spec, "status": st}


def _status(replicas: int, updated: int, available: int) -> Obj:
    return {"replicas": replicas, "updatedReplicas": updated, "availableReplicas": available}


STUCK_SINCE = datetime(2017, 2, 15, 18, 49, 0, tzinfo=UTC)
FAILED = [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]
STUCK = [{"type": "Progressing", "status": "True", "lastUpdateTime": format_time(STUCK_SINCE)}]


# `TestRequeueStuckDeployment`: the returned duration (-1: none) and the requeue it schedules
# (a second later, against clock skew; "now" through the rate limiter).
@pytest.mark.parametrize(
    ("d", "status", "now", "expected"),
    [
        pytest.param(
            _current(None, 4, _status(3, 3, 2), None), _status(3, 3, 2), STUCK_SINCE, -1, id="nil pds"
        ),
        pytest.param(
            _current(2**31 - 1, 4, _status(3, 3, 2), None),
            _status(3, 3, 2),
            STUCK_SINCE,
            -1,
            id="infinite pds",
        ),
        pytest.param(
            _current(60, 4, _status(3, 3, 2), None),
            _status(3, 3, 2),
            STUCK_SINCE,
            -1,
            id="no progressing condition",
        ),
        pytest.param(
            _current(60, 3, _status(3, 3, 3), None), _status(3, 3, 3), STUCK_SINCE, -1, id="complete"
        ),
        pytest.param(
            _current(60, 3, _status(3, 3, 0), FAILED), _status(3, 3, 0), STUCK_SINCE, -1, id="failed"
        ),
        pytest.param(
            _current(60, 3, _status(3, 3, 1), STUCK),
            _status(3, 3, 1),
            datetime(2017, 2, 15, 18, 49, 30, tzinfo=UTC),
            30,
            id="stuck - 30s",
        ),
        pytest.param(
            _current(60, 3, _status(3, 3, 1), STUCK),
            _status(3, 3, 1),
            datetime(2017, 2, 15, 18, 49, 59, tzinfo=UTC),
            1,
            id="stuck - 1s",
        ),
        pytest.param(
            _current(60, 3, _status(3, 3, 1), STUCK),
            _status(3, 3, 1),
            datetime(2017, 2, 15, 18, 49, 59, 1, tzinfo=UTC),
            0,
            id="less than a second => now",
        ),
        pytest.param(
            _current(60, 3, _status(3, 3, 1), STUCK),
            _status(3, 3, 1),
            datetime(2017, 2, 15, 18, 50, 0, tzinfo=UTC),
            0,
            id="now",
        ),
        pytest.param(
            _current(60, 3, _status(3, 3, 1), STUCK),
            _status(3, 3, 1),
            datetime(2017, 2, 15, 18, 50, 1, tzinfo=UTC),
            0,
            id="1s after deadline",
        ),
        pytest.param(
            _current(60, 3, _status(3, 3, 1), STUCK),
            _status(3, 3, 1),
            datetime(2017, 2, 15, 18, 51, 0, tzinfo=UTC),
            0,
            id="60s after deadline",
        ),
    ],
)
def test_requeue_stuck_deployment(d: Obj, status: Obj, now: datetime, expected: float) -> None:
    h = harness()
    assert h.sync.requeue_stuck_deployment(d, status, now) == expected
    if expected < 0:
        assert h.requeued == []
    elif expected == 0:
        assert h.requeued == [0.0]
    else:
        assert h.requeued == [expected + 1]
    assert progress.requeue_stuck_after(d, status, now) == (None if expected < 0 else h.requeued[0])


TEST_TIME = format_time(datetime(2017, 2, 15, 18, 49, 0, tzinfo=UTC))
FAILED_TIMED_OUT = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
NEW_RS_AVAILABLE = {
    "type": "Progressing",
    "status": "True",
    "reason": "NewReplicaSetAvailable",
    "lastUpdateTime": TEST_TIME,
    "lastTransitionTime": TEST_TIME,
}
REPLICA_SET_UPDATED = {
    "type": "Progressing",
    "status": "True",
    "reason": "ReplicaSetUpdated",
    "lastUpdateTime": TEST_TIME,
    "lastTransitionTime": TEST_TIME,
}


def _rs_available(name: str, spec: int, status: int, available: int) -> Obj:
    """`newRSWithAvailable`."""
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": spec, "template": {}},
        "status": {"replicas": status, "availableReplicas": available},
    }


@dataclass
class RolloutCase:
    d: Obj
    all_rss: list[Obj]
    new_rs: Obj | None
    status: str | None = None  # None: no Progressing condition expected
    reason: str = ""
    keeps_update: bool = False
    keeps_transition: bool = False


ROLLOUT_CASES = {
    "General: remove Progressing condition and do not estimate progress if no Progress Deadline": RolloutCase(
        _current(None, 3, _status(2, 2, 2), [REPLICA_SET_UPDATED]),
        [_rs_available("bar", 0, 1, 1)],
        _rs_available("foo", 3, 2, 2),
    ),
    "General: do not estimate progress of deployment with only one active ReplicaSet": RolloutCase(
        _current(60, 3, _status(3, 3, 3), [NEW_RS_AVAILABLE]),
        [_rs_available("bar", 3, 3, 3)],
        None,
        "True",
        "NewReplicaSetAvailable",
        keeps_update=True,
        keeps_transition=True,
    ),
    "DeploymentProgressing: dont update lastTransitionTime if already Progressing=True": RolloutCase(
        _current(60, 3, _status(2, 2, 2), [REPLICA_SET_UPDATED]),
        [_rs_available("bar", 0, 1, 1)],
        _rs_available("foo", 3, 2, 2),
        "True",
        "ReplicaSetUpdated",
        keeps_transition=True,
    ),
    "DeploymentProgressing: update everything if deployment has Progressing=False": RolloutCase(
        _current(60, 3, _status(2, 2, 2), [FAILED_TIMED_OUT]),
        [_rs_available("bar", 0, 1, 1)],
        _rs_available("foo", 3, 2, 2),
        "True",
        "ReplicaSetUpdated",
    ),
    "DeploymentProgressing: create Progressing condition if it does not exist": RolloutCase(
        _current(60, 3, _status(2, 2, 2), []),
        [_rs_available("bar", 0, 1, 1)],
        _rs_available("foo", 3, 2, 2),
        "True",
        "ReplicaSetUpdated",
    ),
    "DeploymentComplete: dont update lastTransitionTime if already Progressing=True": RolloutCase(
        _current(60, 3, _status(3, 3, 3), [REPLICA_SET_UPDATED]),
        [],
        _rs_available("foo", 3, 3, 3),
        "True",
        "NewReplicaSetAvailable",
        keeps_transition=True,
    ),
    "DeploymentComplete: update everything if deployment has Progressing=False": RolloutCase(
        _current(60, 3, _status(3, 3, 3), [FAILED_TIMED_OUT]),
        [],
        _rs_available("foo", 3, 3, 3),
        "True",
        "NewReplicaSetAvailable",
    ),
    "DeploymentComplete: create Progressing condition if it does not exist": RolloutCase(
        _current(60, 3, _status(3, 3, 3), []),
        [],
        _rs_available("foo", 3, 3, 3),
        "True",
        "NewReplicaSetAvailable",
    ),
    "DeploymentComplete: defend against NPE when newRS=nil": RolloutCase(
        _current(60, 0, _status(3, 3, 3), [REPLICA_SET_UPDATED]),
        [_rs_available("foo", 0, 0, 0)],
        None,
        "True",
        "NewReplicaSetAvailable",
    ),
    "DeploymentTimedOut: update status if rollout exceeds Progress Deadline": RolloutCase(
        _current(60, 3, _status(2, 2, 2), [REPLICA_SET_UPDATED]),
        [],
        _rs_available("foo", 3, 2, 2),
        "False",
        "ProgressDeadlineExceeded",
    ),
    "DeploymentTimedOut: do not update status if deployment has existing timedOut condition": RolloutCase(
        _current(60, 3, _status(2, 2, 2), [FAILED_TIMED_OUT]),
        [],
        _rs_available("foo", 3, 2, 2),
        "False",
        "ProgressDeadlineExceeded",
    ),
}


@pytest.mark.parametrize("case", ROLLOUT_CASES.values(), ids=ROLLOUT_CASES.keys())
async def test_sync_rollout_status(case: RolloutCase) -> None:
    """`TestSyncRolloutStatus`, through the write `sync_rollout_status` makes."""
    all_rss = [*case.all_rss, *([case.new_rs] if case.new_rs is not None else [])]
    d = copy.deepcopy(case.d)
    h = harness()
    await h.sync.sync_rollout_status(all_rss, case.new_rs, d)
    cond = get_condition(d["status"], "Progressing")
    if case.status is None:
        assert cond is None
        return
    assert cond is not None
    assert (cond["status"], cond["reason"]) == (case.status, case.reason)
    if case.keeps_update:
        assert cond["lastUpdateTime"] == TEST_TIME
    if case.keeps_transition:
        assert cond["lastTransitionTime"] == TEST_TIME


def test_rollout_messages_name_the_new_replica_set_or_the_deployment() -> None:
    d = _current(60, 3, _status(3, 3, 3), [])
    st = progress.rollout_status([_rs_available("foo", 3, 3, 3)], _rs_available("foo", 3, 3, 3), d, now=NOW)
    assert (get_condition(st, "Progressing") or {})[
        "message"
    ] == 'ReplicaSet "foo" has successfully progressed.'
    d = _current(60, 0, _status(3, 3, 3), [REPLICA_SET_UPDATED])
    st = progress.rollout_status([_rs_available("foo", 0, 0, 0)], None, d, now=NOW)
    cond = get_condition(st, "Progressing") or {}
    assert cond["message"] == 'Deployment "progress-test" has successfully progressed.'


# `TestGetCondition`, `TestSetCondition`, `TestRemoveCondition` on a Deployment's status.
PROGRESSING_FALSE = {"type": "Progressing", "status": "False", "reason": "ForSomeReason"}
PROGRESSING_TRUE = {"type": "Progressing", "status": "True", "reason": "BecauseItIs"}
AVAILABLE_TRUE = {"type": "Available", "status": "True", "reason": "AwesomeController"}


def test_get_set_and_remove_deployment_conditions() -> None:
    status: Obj = {"conditions": [dict(PROGRESSING_FALSE), dict(AVAILABLE_TRUE)]}
    assert get_condition(status, "Available") is not None
    assert get_condition(status, "ReplicaFailure") is None

    fresh: Obj = {}
    set_condition(fresh, dict(AVAILABLE_TRUE))
    assert fresh == {"conditions": [AVAILABLE_TRUE]}
    simple: Obj = {"conditions": [dict(PROGRESSING_FALSE)]}
    set_condition(simple, dict(AVAILABLE_TRUE))
    assert simple == {"conditions": [PROGRESSING_FALSE, AVAILABLE_TRUE]}
    overwrite: Obj = {"conditions": [dict(PROGRESSING_FALSE)]}
    set_condition(overwrite, dict(PROGRESSING_TRUE))
    assert overwrite == {"conditions": [PROGRESSING_TRUE]}

    empty: Obj = {}
    remove_condition(empty, "Progressing")
    assert not empty.get("conditions")
    one: Obj = {"conditions": [dict(PROGRESSING_FALSE)]}
    remove_condition(one, "Progressing")
    assert one == {"conditions": []}
    both: Obj = {"conditions": [dict(PROGRESSING_FALSE), dict(AVAILABLE_TRUE)]}
    remove_condition(both, "ReplicaFailure")
    assert both == {"conditions": [PROGRESSING_FALSE, AVAILABLE_TRUE]}
