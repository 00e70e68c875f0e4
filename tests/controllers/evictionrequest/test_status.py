"""Upstream's evictionrequest_controller_test.go tables (TestValidate, TestComputeEvictionConditions,
TestUpdateRequestersForEvictionStatusApply), plus aiokcm's responder-list validation and the
whole status of one Eviction computed at once."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.evictionrequest import status as st
from evictionapi import names
from evictionapi.responders import responders_annotation
from tests.controllers.evictionrequest.helpers import (
    EVICTOR,
    NOW,
    Obj,
    cond,
    eviction,
    intent,
    pod,
    request,
    request_deleted,
    requester,
    target,
    tr,
    ts,
)

FAILED, EVICTED = names.CONDITION_FAILED, names.CONDITION_TARGET_EVICTED
INVALID = names.REASON_EVICTION_INVALID


def invalid(message: str) -> list[Obj]:
    return [cond(FAILED, "True", INVALID, message), cond(EVICTED, "False", names.REASON_EVICTION_FAILED, "")]


def _grouped() -> Obj:
    obj = pod("my-pod", "uid-1")
    obj["spec"]["schedulingGroup"] = {"podGroupName": "my-podgroup"}
    return obj


UNSUPPORTED_SET = [
    {"type": EVICTED, "status": "False", "reason": names.REASON_EVICTION_FAILED, "message": ""},
    {"type": FAILED, "status": "True", "reason": INVALID, "message": "Unsupported target type."},
]
UNSUPPORTED_STALE = [
    {"type": FAILED, "status": "False", "reason": INVALID, "message": "Unsupported target type.",
     "lastTransitionTime": ts(seconds=-60)},
]  # fmt: skip


@pytest.mark.parametrize(
    ("has_evictions", "name", "pod_obj", "conditions", "duplicate", "test_eviction", "test_request", "expected",
     "changed"),
    [
        pytest.param(False, "my-pod", pod("my-pod", "uid-1"), [], False, False, True, None, False,
                     id="TestValidate/valid pod"),
        pytest.param(True, "my-pod", None, [], False, False, True, None, False,
                     id="TestValidate/pod not found after eviction"),
        pytest.param(True, "my-pod", pod("my-pod", "uid-2"), [], False, False, True, None, False,
                     id="TestValidate/UID mismatch after eviction"),
        pytest.param(False, "my-pod", None, [], False, False, True, invalid("Target pod not found."), True,
                     id="TestValidate/pod not found"),
        pytest.param(False, "my-pod", pod("my-pod", "uid-2"), [], False, False, True,
                     invalid("Target pod UID mismatch: expected uid-1, got uid-2."), True, id="TestValidate/UID mismatch"),
        pytest.param(False, "my-pod", _grouped(), [], False, True, True,
                     invalid("Target pod references a SchedulingGroup. Eviction is currently not supported."), True,
                     id="TestValidate/pod with PodGroup"),
        pytest.param(False, "my-pod", pod("my-pod", "uid-1"), [], True, True, False,
                     invalid("Active Eviction already exists for the same target."), True,
                     id="TestValidate/duplicate eviction"),
        pytest.param(False, None, None, [], False, True, True, invalid("Unsupported target type."), True,
                     id="TestValidate/empty target"),
        pytest.param(False, None, None, UNSUPPORTED_SET, False, True, True, invalid("Unsupported target type."), False,
                     id="TestValidate/empty target - condition already set"),
        pytest.param(False, None, None, UNSUPPORTED_STALE, False, True, True, invalid("Unsupported target type."), True,
                     id="TestValidate/empty target - updates existing condition"),
    ],
)  # fmt: skip
def test_validate(
    has_evictions: bool, name: str | None, pod_obj: Obj | None, conditions: list[Obj], duplicate: bool,
    test_eviction: bool, test_request: bool, expected: list[Obj] | None, changed: bool,
) -> None:  # fmt: skip
    t = target(name, "uid-1" if name else "", pod_obj)
    obj = {"status": {"conditions": conditions}}
    if test_eviction:
        failed, evicted, got_changed = st.validate_eviction(NOW, obj, t, duplicate)
        assert ([failed, evicted] if failed else None) == expected
        assert got_changed == changed
    if test_request:
        failed, evicted, got_changed = st.validate_eviction_request(NOW, obj, t, has_evictions)
        assert ([failed, evicted] if failed else None) == expected
        assert got_changed == changed


def test_invalid_responders_fail_a_request_before_any_eviction() -> None:
    """aiokcm's own: an annotation can declare anything; the reader's field errors are the message."""
    bad = pod("my-pod", "uid-1")
    bad["metadata"]["annotations"] = {names.POD_RESPONDERS_ANNOTATION: "not json"}
    t = target("my-pod", "uid-1", bad)
    problem = "Target pod has invalid eviction responders: annotation unreadable."
    failed, _, changed = st.validate_eviction_request(NOW, {}, t, False, problem)
    assert failed is not None and failed["reason"] == INVALID and failed["message"] == problem and changed
    assert st.validate_eviction_request(NOW, {}, t, True, problem) == (None, None, False)


AWAIT = names.REASON_AWAITING_EVICTION


@pytest.mark.parametrize(
    ("flags", "conditions", "expected", "changed"),
    [
        pytest.param("gone", [], [cond(FAILED, "False", names.REASON_SUCCEEDED, ""),
                                  cond(EVICTED, "True", names.REASON_POD_DELETED, "Target pod has been deleted.")], True,
                     id="TestComputeEvictionConditions/pod deleted"),
        pytest.param("gone waiting", [], [cond(FAILED, "False", AWAIT, ""), cond(EVICTED, "False", AWAIT, "")], True,
                     id="TestComputeEvictionConditions/pod deleted - waiting"),
        pytest.param("terminal", [], [cond(FAILED, "False", names.REASON_SUCCEEDED, ""),
                                      cond(EVICTED, "True", names.REASON_POD_TERMINAL, "Pod has reached terminal state.")],
                     True, id="TestComputeEvictionConditions/pod terminal"),
        pytest.param("terminal waiting", [], [cond(FAILED, "False", AWAIT, ""), cond(EVICTED, "False", AWAIT, "")], True,
                     id="TestComputeEvictionConditions/pod terminal - waiting"),
        pytest.param("canceled", [], [cond(FAILED, "True", names.REASON_CANCELED_DUE_TO_NO_REQUESTERS,
                                           "No active requesters with eviction intent."),
                                      cond(EVICTED, "False", names.REASON_EVICTION_FAILED, "")], True,
                     id="TestComputeEvictionConditions/is canceled"),
        pytest.param("done", [], [cond(FAILED, "True", names.REASON_NO_FURTHER_RESPONDER,
                                       "All responders have completed without evicting the target."),
                                  cond(EVICTED, "False", names.REASON_EVICTION_FAILED, "")], True,
                     id="TestComputeEvictionConditions/no progress"),
        pytest.param("", [], [cond(FAILED, "False", AWAIT, ""), cond(EVICTED, "False", AWAIT, "")], True,
                     id="TestComputeEvictionConditions/pending"),
        pytest.param("done", [
            {"type": EVICTED, "status": "False", "reason": names.REASON_EVICTION_FAILED, "message": ""},
            {"type": FAILED, "status": "True", "reason": names.REASON_NO_FURTHER_RESPONDER,
             "message": "All responders have completed without evicting the target."},
        ], [cond(FAILED, "True", names.REASON_NO_FURTHER_RESPONDER,
                 "All responders have completed without evicting the target."),
            cond(EVICTED, "False", names.REASON_EVICTION_FAILED, "")], False,
            id="TestComputeEvictionConditions/no progress - condition already set"),
        pytest.param("done", [{"type": FAILED, "status": "False", "reason": AWAIT, "message": "",
                               "lastTransitionTime": ts(seconds=-60)}],
                     [cond(FAILED, "True", names.REASON_NO_FURTHER_RESPONDER,
                           "All responders have completed without evicting the target."),
                      cond(EVICTED, "False", names.REASON_EVICTION_FAILED, "")], True,
                     id="TestComputeEvictionConditions/no progress - updates existing condition"),
    ],
)  # fmt: skip
def test_compute_eviction_conditions(
    flags: str, conditions: list[Obj], expected: list[Obj], changed: bool
) -> None:
    set_ = set(flags.split())
    failed, evicted, got_changed = st.compute_eviction_conditions(
        NOW, {"status": {"conditions": conditions}}, "waiting" in set_, "gone" in set_, "terminal" in set_,
        "canceled" in set_, "done" in set_,
    )  # fmt: skip
    assert [failed, evicted] == expected
    assert got_changed == changed


E, W = names.INTENT_EVICTION, names.INTENT_WITHDRAWN


def rq(n: int, *tweaks: Any) -> Obj:
    return request(f"requester-{n}", f"pod-{n}", requester(f"foo.example.com/{n}"), *tweaks)


def have(*pairs: tuple[int, str]) -> list[dict[str, str]]:
    return [{"name": f"foo.example.com/{n}", "intent": i} for n, i in pairs]


MANY_EXISTING = have((2, E), (3, E), (5, E), (1, W), (4, W), (6, W))
MANY_REQUESTS = [rq(1), rq(3), rq(5, request_deleted()), rq(7), rq(6, intent(W)), rq(8, request_deleted())]


@pytest.mark.parametrize(
    ("existing", "reqs", "limit", "expected", "changed"),
    [
        pytest.param([], [], 100, [], False, id="TestUpdateRequestersForEvictionStatusApply/no requesters"),
        pytest.param(have((2, E), (1, W)), [], 100, have((1, W), (2, W)), True,
                     id="TestUpdateRequestersForEvictionStatusApply/keep existing requesters, and withdraw if the old "
                     "ones are missing"),
        pytest.param(have((2, E), (1, W)), [rq(2, request_deleted())], 100, have((2, W), (1, W)), True,
                     id="TestUpdateRequestersForEvictionStatusApply/keep existing requesters, and withdraw if the old "
                     "is deleted"),
        pytest.param(MANY_EXISTING, MANY_REQUESTS, 100,
                     have((1, E), (3, E), (7, E), (6, W), (5, W), (8, W), (2, W), (4, W)), True,
                     id="TestUpdateRequestersForEvictionStatusApply/add and delete requesters and change intents"),
        pytest.param(MANY_EXISTING, MANY_REQUESTS, 5, have((1, E), (3, E), (7, E), (6, W), (5, W)), True,
                     id="TestUpdateRequestersForEvictionStatusApply/add and delete requesters and change intents "
                     "with limit"),
        pytest.param(have((2, E), (1, W)), [rq(2)], 100, have((2, E), (1, W)), False,
                     id="TestUpdateRequestersForEvictionStatusApply/no changes in requesters"),
    ],
)  # fmt: skip
def test_update_requesters(
    existing: list[Obj], reqs: list[Obj], limit: int, expected: list[Obj], changed: bool
) -> None:
    evict = eviction("foo", "foo", "foo-1")
    evict["status"]["requesters"] = existing
    assert st.update_requesters(evict, reqs, limit) == (expected, changed)


A = "a.example.com/responder-a"


def test_first_status_activates_the_highest_priority_responder() -> None:
    """A new Eviction: requesters listed, responders initialized and sorted, the first Active
    with a start time, conditions pending, a resync at the heartbeat deadline."""
    p = pod("my-pod", "uid-1")
    p["metadata"]["annotations"] = {names.POD_RESPONDERS_ANNOTATION: responders_annotation([(A, 5000)])}
    evict = eviction("pod-1-my-pod", "my-pod", "uid-1")
    evict["metadata"]["generation"] = 1
    plan = st.compute_eviction_status(NOW, evict, target("my-pod", "uid-1", p), [request("my-pod", "uid-1")])
    assert plan.changed and not plan.final
    assert plan.resync_after == names.HEARTBEAT_TIMEOUT_SECONDS
    assert plan.status["targetResponders"] == [
        tr(A, 5000, names.STATE_ACTIVE),
        tr(EVICTOR, 100, names.STATE_INACTIVE),
    ]
    assert plan.status["responders"] == [{"name": A, "startTime": ts()}, {"name": EVICTOR}]
    assert plan.status["requesters"] == [{"name": "foo.example.com/bar", "intent": E}]
    assert plan.status["observedGeneration"] == 1
    assert [c["reason"] for c in plan.status["conditions"]] == [AWAIT, AWAIT]


def test_responder_fields_of_other_writers_are_kept() -> None:
    """Only `startTime` is the controller's: a responder's heartbeat and message stay as written."""
    evict = eviction("pod-1-my-pod", "my-pod", "uid-1")
    evict["status"] = {
        "targetResponders": [tr(EVICTOR, 100, names.STATE_ACTIVE)],
        "responders": [
            {"name": EVICTOR, "startTime": ts(seconds=-10), "heartbeatTime": ts(), "message": "working"}
        ],
        "requesters": [{"name": "foo.example.com/bar", "intent": E}],
    }
    plan = st.compute_eviction_status(NOW, evict, target("my-pod", "uid-1", pod("my-pod", "uid-1")),
                                      [request("my-pod", "uid-1")])  # fmt: skip
    assert plan.status["responders"] == evict["status"]["responders"]
    assert plan.resync_after == names.HEARTBEAT_TIMEOUT_SECONDS
