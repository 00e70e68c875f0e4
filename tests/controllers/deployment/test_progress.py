"""Status and the Progressing / Available conditions computed from ReplicaSets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controllers.deployment import progress
from kubeutil.conditions import get_condition
from kubeutil.timestamps import format_time
from tests.controllers.deployment.builders import deployment, replica_set

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
