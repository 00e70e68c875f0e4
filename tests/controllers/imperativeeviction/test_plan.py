"""The imperative evictor's pure decisions: upstream's `utils_test.go` tables, and the messages of its `sync`.

Ported from kubernetes/kubernetes `pkg/controller/imperativeevictionresponder/utils_test.go` at
127a4dea56311defa100d12e4416bbbf3c5b4b77; each case's id names the upstream test and case.
The message and timing cases below them pin what upstream's controller writes (its
`sync` and `evict`), which its integration test matches on.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apiclient import ApiError
from controllers.imperativeeviction import plan
from controllers.imperativeeviction.state import LastEvictionAttempts
from evictionapi import names
from kubeutil.timestamps import format_time

EVICTOR = names.IMPERATIVE_EVICTOR
POD_REF = {"name": "pod", "uid": "04c63289-90de-470b-8ce1-fa50d962ea10"}
NOW = datetime(2026, 7, 1, 12, 0, 0, tzinfo=UTC)


def eviction(labels: dict[str, str] | None = None, *, target: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {}, "spec": {}}
    if labels is not None:
        obj["metadata"]["labels"] = labels
    if target is not None:
        obj["spec"]["target"] = target
    return obj


# -- TestExponentialBackoff ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exponent", "want"),
    [
        pytest.param(1, 10.0, id="TestExponentialBackoff/calculates backoff"),
        pytest.param(10, 60.0, id="TestExponentialBackoff/calculates backoff with a maximum"),
        pytest.param(
            1000, 60.0, id="TestExponentialBackoff/calculates backoff with a maximum after an overflow"
        ),
        pytest.param(2**64 - 1, 60.0, id="an exponent past any float's range is the maximum"),
    ],
)
def test_exponential_backoff(exponent: int, want: float) -> None:
    assert plan.exponential_backoff(5.0, 60.0, exponent) == want


# -- TestShouldHandleEviction ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        pytest.param(
            eviction({EVICTOR: names.ROLE_RESPONDER}, target={"pod": POD_REF}), True,
            id="TestShouldHandleEviction/correct target",
        ),
        pytest.param(eviction({EVICTOR: names.ROLE_RESPONDER}), False, id="TestShouldHandleEviction/no target"),
        pytest.param(
            eviction({EVICTOR: names.ROLE_RESPONDER}, target={}), False, id="TestShouldHandleEviction/wrong target"
        ),
        pytest.param(
            eviction({EVICTOR: ""}, target={"pod": POD_REF}), False,
            id="TestShouldHandleEviction/missing participant label",
        ),
        pytest.param(
            eviction({EVICTOR: names.ROLE_REQUESTER}, target={"pod": POD_REF}), False,
            id="TestShouldHandleEviction/wrong participant label",
        ),
        pytest.param(
            eviction({EVICTOR: "invalid"}, target={"pod": POD_REF}), False,
            id="TestShouldHandleEviction/invalid participant label",
        ),
        pytest.param(eviction(target={"pod": POD_REF}), False, id="TestShouldHandleEviction/no participant label"),
        pytest.param(
            eviction({EVICTOR: names.ROLE_REQUESTER_RESPONDER}, target={"pod": POD_REF}), True,
            id="requester-responder is a responder too",
        ),
    ],
)  # fmt: skip
def test_should_handle(obj: dict[str, Any], want: bool) -> None:
    assert plan.should_handle(obj) is want


# -- TestHasLabelChanged ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(eviction(), eviction(), False, id="TestHasLabelChanged/no label"),
        pytest.param(
            eviction({EVICTOR: names.ROLE_RESPONDER, "foo": "bar"}),
            eviction({EVICTOR: names.ROLE_RESPONDER, "baz": "bar"}),
            False,
            id="TestHasLabelChanged/label stays the same",
        ),
        pytest.param(eviction(), eviction({EVICTOR: names.ROLE_RESPONDER}), True, id="TestHasLabelChanged/label introduced"),
        pytest.param(
            eviction({EVICTOR: names.ROLE_RESPONDER, "foo": "bar"}),
            eviction({EVICTOR: names.ROLE_REQUESTER}),
            True,
            id="TestHasLabelChanged/label changed",
        ),
        pytest.param(
            eviction({EVICTOR: names.ROLE_RESPONDER, "foo": "bar"}),
            eviction({EVICTOR: ""}),
            True,
            id="TestHasLabelChanged/label value removed",
        ),
        pytest.param(
            eviction({EVICTOR: names.ROLE_RESPONDER, "foo": "bar"}), eviction(), True,
            id="TestHasLabelChanged/label removed",
        ),
    ],
)  # fmt: skip
def test_label_changed(old: dict[str, Any], new: dict[str, Any], want: bool) -> None:
    assert plan.label_changed(old, new, EVICTOR) is want


# -- TestGetRecordedAttempts -----------------------------------------------------------------------

_FAILED = 'foo pod (uid="492fe0ed-e8ee-4ad4-900f-591e35d6d352") deletion via the /eviction subresource failed'


@pytest.mark.parametrize(
    ("message", "want"),
    [
        pytest.param("", 0, id="TestGetRecordedAttempts/missing message"),
        pytest.param('foo pod (uid="492fe0ed-e8ee-4ad4-900f-591e35d6d352") deletion', 0,
                     id="TestGetRecordedAttempts/missing attempts"),
        pytest.param(f'{_FAILED} (attempts=bar): pods "foo" is forbidden:', 0, id="TestGetRecordedAttempts/invalid attempts"),
        pytest.param(f'{_FAILED} (attempts=-7): pods "foo" is forbidden:', 0,
                     id="TestGetRecordedAttempts/negative number attempts"),
        pytest.param(f'{_FAILED} (attempts=0): pods "foo" is forbidden:', 0, id="TestGetRecordedAttempts/found 0"),
        pytest.param(f'{_FAILED} (attempts=1): pods "foo" is forbidden:', 1, id="TestGetRecordedAttempts/found 1"),
        pytest.param(f'{_FAILED} (attempts=007): pods "foo" is forbidden:', 7,
                     id="TestGetRecordedAttempts/found 7 with preceding zeros"),
        pytest.param(f'{_FAILED} (attempts=18446744073709551615): pods "foo" is forbidden:', 2**64 - 1,
                     id="TestGetRecordedAttempts/found MaxUint64"),
        pytest.param(f'{_FAILED} (attempts=18446744073709551616): pods "foo" is forbidden:', 0,
                     id="TestGetRecordedAttempts/MaxUint64 overflow"),
    ],
)  # fmt: skip
def test_recorded_attempts(message: str, want: int) -> None:
    assert plan.recorded_attempts(message) == want


# -- TestToResponderStatusApplyConfiguration -------------------------------------------------------


def test_responder_entry_keeps_every_time_set_and_sets_the_message() -> None:
    """TestToResponderStatusApplyConfiguration: the entry written back keeps the times already
    set, leaves out the unset ones, and carries the message (empty when there is none)."""
    now = format_time(NOW)
    last = {"name": "foo", "startTime": now, "heartbeatTime": now, "completionTime": now}
    entry = plan.responder_entry(last, "")
    assert entry == {
        "name": "foo",
        "startTime": now,
        "heartbeatTime": now,
        "completionTime": now,
        "message": "",
    }
    assert "expectedCompletionTime" not in entry

    last = {**last, "expectedCompletionTime": now, "message": "old"}
    entry = plan.responder_entry(last, "message")
    assert entry["expectedCompletionTime"] == now
    assert entry["message"] == "message"


# -- TestLastEvictionAttempts ----------------------------------------------------------------------


def test_last_eviction_attempts() -> None:
    """TestLastEvictionAttempts: set, get, remove by pod UID."""
    tracker = LastEvictionAttempts()
    uid = "c10bd213-64bf-4cfd-9b5a-2541fbbd5b02"
    tracker.set(uid, NOW)
    tracker.set("7d5c4d97-68bd-4a1c-8695-6ea49962caa7", NOW)
    tracker.set("7c4d5933-f269-4846-9e78-f56640d0ba6e", NOW + timedelta(seconds=1))
    assert tracker.get(uid) == NOW
    tracker.remove(uid)
    assert tracker.get(uid) is None
    assert len(tracker) == 2


# -- the controller's messages and timing (its sync and evict) -------------------------------------


def pod(
    *, uid: str = POD_REF["uid"], phase: str = "Running", deleting: datetime | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "pod", "namespace": "ns", "uid": uid}
    if deleting is not None:
        meta["deletionTimestamp"] = format_time(deleting)
    return {"metadata": meta, "status": {"phase": phase}}


EVICTED = plan.evicted_message("pod")


@pytest.mark.parametrize(
    ("target", "last", "want"),
    [
        pytest.param(None, "", plan.Assessment(completed=True, message='"pod" pod has been deleted and fully terminated'),
                     id="gone"),
        pytest.param(pod(uid="another"), "", plan.Assessment(
            completed=True, message='"pod" pod has been deleted and fully terminated'), id="replaced under its name"),
        pytest.param(pod(phase="Succeeded", deleting=NOW), "", plan.Assessment(
            completed=True, message='"pod" pod has been deleted and fully terminated (pod phase="Succeeded")'),
            id="deleted and terminal"),
        pytest.param(pod(deleting=NOW), "", plan.Assessment(
            message='"pod" pod has been been marked for deletion and is being terminated gracefully',
            expected_completion=NOW, requeue_after=180.0), id="terminating by someone else"),
        pytest.param(pod(deleting=NOW), EVICTED, plan.Assessment(
            message='"pod" pod has been been marked for deletion via the /eviction subresource '
                    "and is being terminated gracefully",
            expected_completion=NOW, requeue_after=180.0), id="terminating by our eviction: never evicted again"),
        pytest.param(pod(phase="Failed"), "", plan.Assessment(
            completed=True, message='"pod" pod has been fully terminated (pod phase="Failed")'), id="terminal"),
        pytest.param(pod(), "", plan.Assessment(evict=True), id="running: evict"),
    ],
)  # fmt: skip
def test_assess(target: dict[str, Any] | None, last: str, want: plan.Assessment) -> None:
    assert plan.assess(POD_REF, target, last) == want


def too_many_requests(retry_after: int | None = None, *, reason: str = "TooManyRequests") -> ApiError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": "needs 1 healthy pods"}]}
    if retry_after is not None:
        details["retryAfterSeconds"] = retry_after
    message = "Cannot evict pod as it would violate the pod's disruption budget."
    return ApiError(429, {"reason": reason, "message": message, "details": details})


PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.mark.parametrize(
    ("last", "exc", "want_message", "want_wait"),
    [
        pytest.param("", too_many_requests(), f'"pod" pod deletion via the /eviction subresource failed (attempts=1): {PDB_REFUSAL}', 5.0,
                     id="first refusal: 5 s"),
        pytest.param(plan.failed_message("pod", 1, "x"), too_many_requests(),
                     f'"pod" pod deletion via the /eviction subresource failed (attempts=2): {PDB_REFUSAL}', 10.0,
                     id="second refusal: 10 s"),
        pytest.param(plan.failed_message("pod", 20, "x"), too_many_requests(),
                     f'"pod" pod deletion via the /eviction subresource failed (attempts=21): {PDB_REFUSAL}', 600.0,
                     id="capped at 10 min"),
        pytest.param("", too_many_requests(30), f'"pod" pod deletion via the /eviction subresource failed (attempts=1): {PDB_REFUSAL}', 30.0,
                     id="the server's longer Retry-After wins"),
        pytest.param(plan.failed_message("pod", 4, "x"), too_many_requests(30),
                     f'"pod" pod deletion via the /eviction subresource failed (attempts=5): {PDB_REFUSAL}', 80.0,
                     id="a shorter Retry-After does not"),
        pytest.param("", too_many_requests(0, reason="ServerTimeout"), f'"pod" pod deletion via the /eviction subresource failed (attempts=1): {PDB_REFUSAL}', 5.0,
                     id="ServerTimeout asks for its delay even when 0"),
        pytest.param(plan.failed_message("pod", 2**64 - 1, "x"), too_many_requests(),
                     f'"pod" pod deletion via the /eviction subresource failed (attempts=0): {PDB_REFUSAL}', 600.0,
                     id="the count wraps as a uint64"),
        pytest.param("", TimeoutError("timed out"), '"pod" pod deletion via the /eviction subresource failed (attempts=1): timed out', 5.0,
                     id="no answer is a failure too"),
    ],
)  # fmt: skip
def test_after_failure(last: str, exc: BaseException, want_message: str, want_wait: float) -> None:
    assert plan.after_failure("pod", last, exc) == (want_message, want_wait)


@pytest.mark.parametrize(
    ("attempts", "since", "want"),
    [
        pytest.param(1, 0.0, 5.0, id="after the first failure: 5 s"),
        pytest.param(1, 5.0, 0.0, id="after the first failure, 5 s later: now"),
        pytest.param(2, 4.0, 6.0, id="after the second failure: 10 s"),
        pytest.param(8, 0.0, 600.0, id="after the eighth: 10 min"),
        pytest.param(0, 0.0, 5.0, id="no count recorded (a restarted manager): 5 s"),
    ],
)
def test_wait_before_retry(attempts: int, since: float, want: float) -> None:
    message = plan.failed_message("pod", attempts, "refused") if attempts else ""
    assert plan.wait_before_retry(message, NOW, NOW + timedelta(seconds=since)) == want


def entry(**fields: Any) -> dict[str, Any]:
    return {"name": EVICTOR, "startTime": format_time(NOW - timedelta(minutes=1)), **fields}


@pytest.mark.parametrize(
    ("last", "kwargs", "want"),
    [
        pytest.param(entry(), {"message": "m"}, entry(message="m", heartbeatTime=format_time(NOW)), id="first write"),
        pytest.param(entry(message="m", heartbeatTime=format_time(NOW - timedelta(seconds=60))), {"message": "m"}, None,
                     id="nothing new, heartbeat fresh: no write"),
        pytest.param(entry(message="m", heartbeatTime=format_time(NOW - timedelta(seconds=179))), {"message": "m"}, None,
                     id="heartbeat 179 s old: not due"),
        pytest.param(entry(message="m", heartbeatTime=format_time(NOW - timedelta(seconds=180))), {"message": "m"},
                     entry(message="m", heartbeatTime=format_time(NOW)), id="heartbeat due after 3 min"),
        pytest.param(entry(message="m", heartbeatTime=format_time(NOW - timedelta(seconds=10))), {"message": "n"},
                     entry(message="n", heartbeatTime=format_time(NOW)), id="a new message"),
        pytest.param(entry(message="m", heartbeatTime=format_time(NOW)),
                     {"message": "m", "expected_completion": NOW + timedelta(seconds=30)},
                     entry(message="m", heartbeatTime=format_time(NOW),
                           expectedCompletionTime=format_time(NOW + timedelta(seconds=30))), id="a new expected completion"),
        pytest.param(entry(message="m", heartbeatTime=format_time(NOW)),
                     {"message": "m", "expected_completion": NOW - timedelta(seconds=30)},
                     entry(message="m", heartbeatTime=format_time(NOW), expectedCompletionTime=format_time(NOW)),
                     id="an expected completion in the past is now"),
        pytest.param(entry(message="m", heartbeatTime=format_time(NOW)), {"message": "done", "completed": True},
                     entry(message="done", heartbeatTime=format_time(NOW), expectedCompletionTime=format_time(NOW),
                           completionTime=format_time(NOW)), id="completed"),
        pytest.param(entry(), {"message": "x" * 5000}, entry(message="x" * 4000, heartbeatTime=format_time(NOW)),
                     id="message cut to 4000"),
    ],
)  # fmt: skip
def test_status_update(last: dict[str, Any], kwargs: dict[str, Any], want: dict[str, Any] | None) -> None:
    args = {"completed": False, "expected_completion": None, **kwargs}
    assert plan.status_update(last, now=NOW, **args) == want


def test_entries_are_found_by_name() -> None:
    obj = {
        "status": {
            "targetResponders": [
                {"name": "a.example.com/x", "priority": 20000, "state": names.STATE_COMPLETED},
                {"name": EVICTOR, "priority": 100, "state": names.STATE_ACTIVE},
            ],
            "responders": [{"name": "a.example.com/x"}, {"name": EVICTOR, "message": "m"}],
        }
    }
    assert plan.target_responder(obj) == {"name": EVICTOR, "priority": 100, "state": names.STATE_ACTIVE}
    assert plan.responder_status(obj) == {"name": EVICTOR, "message": "m"}
    assert plan.responder_index(obj) == 1
    assert plan.responder_status({"status": {}}) is None


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ({"annotations": {"kubernetes.io/config.mirror": "abc"}}, "mirror pod"),
        ({"ownerReferences": [{"kind": "DaemonSet", "name": "agent", "controller": True}]}, 'DaemonSet "agent"'),
        # an owner that is not the controller, or another kind, does not keep the evictor away
        ({"ownerReferences": [{"kind": "DaemonSet", "name": "agent"}]}, ""),
        ({"ownerReferences": [{"kind": "ReplicaSet", "name": "web-1", "controller": True}]}, ""),
    ],
)  # fmt: skip
def test_mirror_and_daemonset_pods_are_left_alone(meta: dict[str, Any], reason: str) -> None:
    pod = {"metadata": {"name": "p", "uid": "u", **meta}, "status": {"phase": "Running"}}
    got = plan.assess({"name": "p", "uid": "u"}, pod, "")
    if reason:
        assert got.completed and not got.evict and reason in got.message
    else:
        assert got.evict and not got.completed
