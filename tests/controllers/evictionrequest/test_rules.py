"""Upstream's evictionrequest_utils_test.go tables (TestNewEvictionName, TestFindRelevantEviction,
TestConvertToEvictionRequestConditions, TestCompareConditionTransitionTime,
TestHasEvictionRequestCompleted, TestHasEvictionRequestEvictionIntent,
TestEvictionRequestAsOwnerReference, TestComputeEvictionLabels, TestEvictionLabelsNeedSSAUpdate,
TestShouldDeferCompletion, TestSortTargetResponders)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from controllers.evictionrequest import rules
from evictionapi import names
from tests.controllers.evictionrequest.helpers import (
    EVICTOR,
    NOW,
    Obj,
    condition,
    condition_true,
    created_at,
    eviction,
    eviction_responders,
    intent,
    labels,
    pod,
    pod_deleted_at,
    request,
    request_deleted,
    requester,
    target,
    ts,
)

FAILED, EVICTED = names.CONDITION_FAILED, names.CONDITION_TARGET_EVICTED
NFR, DELETED, AWAITING = (
    names.REASON_NO_FURTHER_RESPONDER,
    names.REASON_POD_DELETED,
    names.REASON_AWAITING_EVICTION,
)
OLDER, OLDEST, LATER = ts(seconds=-3600), ts(seconds=-3601), ts(seconds=3600)


@pytest.mark.parametrize(
    ("t", "evictions", "expected"),
    [
        pytest.param(target(None, "", None), [], "", id="TestNewEvictionName/empty target"),
        pytest.param(
            target("foo", "uid-1", None), [], "pod-1-foo", id="TestNewEvictionName/picks first name"
        ),
        pytest.param(
            target("foo", "uid-1", None),
            [eviction(f"pod-{n}-foo", "foo", f"uid-{n}") for n in (0, 1, 3, 4, 7)],
            "pod-8-foo",
            id="TestNewEvictionName/picks the next name",
        ),
        pytest.param(
            target("a" * 253, "uid-1", None), [], "pod-1-" + "a" * 247, id="TestNewEvictionName/too long name"
        ),
        pytest.param(
            target("a" * 252 + "b", "uid-2", None),
            [eviction("pod-1-" + "a" * 247, "a" * 252 + "c", "uid-1")],
            "pod-2-" + "a" * 247,
            id="TestNewEvictionName/too long name with eviction",
        ),
    ],
)
def test_new_eviction_name(t: Any, evictions: list[Obj], expected: str) -> None:
    assert rules.new_eviction_name(t, evictions) == expected


def ev(name: str, *tweaks: Any) -> Obj:
    return eviction(name, "foo", "uid-1", *tweaks)


@pytest.mark.parametrize(
    ("evictions", "expected", "should_create"),
    [
        pytest.param([], None, True, id="TestFindRelevantEviction/no evictions"),
        pytest.param(
            [
                ev("pod-1-foo"), ev("pod-2-foo", created_at(OLDER)), ev("pod-3-foo", condition_true(FAILED, NFR)),
                ev("pod-4-foo"), ev("pod-5-foo", created_at(OLDEST)),
                ev("pod-6-foo", condition_true(EVICTED, DELETED, OLDEST)), ev("pod-7-foo", condition_true(EVICTED, DELETED)),
                ev("pod-8-foo"),
            ],
            "pod-7-foo", False, id="TestFindRelevantEviction/latest succeeded eviction",
        ),
        pytest.param(
            [ev("pod-1-foo", created_at(OLDER)), ev("pod-2-foo", condition_true(FAILED, NFR)),
             ev("pod-3-foo", created_at(OLDEST))],
            "pod-3-foo", False, id="TestFindRelevantEviction/oldest active eviction",
        ),
        pytest.param(
            [
                ev("pod-1-foo", created_at(OLDER)), ev("pod-2-foo", created_at(OLDEST), condition_true(FAILED, NFR)),
                ev("pod-3-foo", created_at(OLDEST), condition(EVICTED, "False", AWAITING, OLDEST),
                   condition(FAILED, "False", AWAITING, OLDEST)),
                ev("pod-4-foo", created_at(OLDER)),
            ],
            "pod-3-foo", False, id="TestFindRelevantEviction/oldest active eviction with conditions",
        ),
        pytest.param(
            [ev("pod-1-foo", condition_true(FAILED, NFR, OLDEST)), ev("pod-2-foo", condition_true(FAILED, NFR))],
            "pod-2-foo", True, id="TestFindRelevantEviction/latest failed eviction",
        ),
    ],
)  # fmt: skip
def test_find_relevant_eviction(evictions: list[Obj], expected: str | None, should_create: bool) -> None:
    shuffled = list(evictions)
    random.Random(4563).shuffle(shuffled)
    relevant, create = rules.find_relevant_eviction(shuffled)
    assert (relevant["metadata"]["name"] if relevant else None) == expected
    assert create == should_create


def c(type_: str, status: str, reason: str, message: str, at: str | None = None) -> Obj:
    out: Obj = {"type": type_, "status": status, "reason": reason, "message": message}
    if at is not None:
        out["lastTransitionTime"] = at
    return out


OLD = ts(seconds=-60)
RESPONDER_COND = c("ResponderCondition", "True", "foo", "msg2")


@pytest.mark.parametrize(
    ("existing", "from_eviction", "expected", "changed"),
    [
        pytest.param(
            [], [RESPONDER_COND, c(EVICTED, "True", DELETED, "msg"), c(FAILED, "False", names.REASON_SUCCEEDED, "msg2")],
            c(EVICTED, "True", DELETED, "msg", ts()), True,
            id="TestConvertToEvictionRequestConditions/find and set correct condition",
        ),
        pytest.param(
            [c(FAILED, "False", names.REASON_SUCCEEDED, "msg2"), c(EVICTED, "False", AWAITING, "awaiting", OLD)],
            [RESPONDER_COND, c(EVICTED, "True", DELETED, "msg", ts()), c(FAILED, "False", names.REASON_SUCCEEDED, "msg2", ts())],
            c(EVICTED, "True", DELETED, "msg", ts()), True,
            id="TestConvertToEvictionRequestConditions/find and update correct condition",
        ),
        pytest.param(
            [c(FAILED, "False", names.REASON_SUCCEEDED, "msg2"), c(EVICTED, "True", DELETED, "ms3", OLD)],
            [RESPONDER_COND, c(EVICTED, "True", DELETED, "msg"), c(FAILED, "False", names.REASON_SUCCEEDED, "msg2")],
            c(EVICTED, "True", DELETED, "msg", OLD), True,
            id="TestConvertToEvictionRequestConditions/find and update correct condition without transition",
        ),
        pytest.param(
            [], [RESPONDER_COND, c(FAILED, "False", names.REASON_SUCCEEDED, "msg2")],
            c(EVICTED, "False", AWAITING, rules.AWAITING_MESSAGE, ts()), True,
            id="TestConvertToEvictionRequestConditions/cannot find the correct condition",
        ),
        pytest.param(
            [], None, c(EVICTED, "False", AWAITING, rules.AWAITING_MESSAGE, ts()), True,
            id="TestConvertToEvictionRequestConditions/cannot find the correct condition: no eviction",
        ),
        pytest.param(
            [c(EVICTED, "True", DELETED, "msg", OLD)],
            [RESPONDER_COND, c(EVICTED, "True", DELETED, "msg"), c(FAILED, "False", names.REASON_SUCCEEDED, "msg2")],
            c(EVICTED, "True", DELETED, "msg", OLD), False,
            id="TestConvertToEvictionRequestConditions/find correct condition with no change",
        ),
    ],
)  # fmt: skip
def test_convert_to_request_condition(
    existing: list[Obj], from_eviction: list[Obj] | None, expected: Obj, changed: bool
) -> None:
    req: Obj = {"status": {"conditions": existing}}
    source = {"status": {"conditions": from_eviction}} if from_eviction else None
    got, got_changed = rules.convert_to_request_condition(NOW, req, source, EVICTED)
    assert got == expected
    assert got_changed == changed


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        pytest.param(ev("pod-1-foo"), ev("pod-2-foo"), 0, id="TestCompareConditionTransitionTime/no conditions"),
        pytest.param(ev("pod-1-foo", condition_true(FAILED, NFR)), ev("pod-2-foo", condition_true(FAILED, NFR)), 0,
                     id="TestCompareConditionTransitionTime/same transition time"),
        pytest.param(ev("pod-1-foo"), ev("pod-2-foo", condition_true(FAILED, NFR)), -1,
                     id="TestCompareConditionTransitionTime/no a condition"),
        pytest.param(ev("pod-1-foo", condition_true(FAILED, NFR)), ev("pod-2-foo"), 1,
                     id="TestCompareConditionTransitionTime/no b condition"),
        pytest.param(ev("pod-1-foo", condition_true(FAILED, NFR, LATER)), ev("pod-2-foo", condition_true(FAILED, NFR)), 1,
                     id="TestCompareConditionTransitionTime/a is newest"),
        pytest.param(ev("pod-1-foo", condition_true(FAILED, NFR)), ev("pod-2-foo", condition_true(FAILED, NFR, LATER)), -1,
                     id="TestCompareConditionTransitionTime/b is newest"),
    ],
)  # fmt: skip
def test_compare_condition_transition_time(a: Obj, b: Obj, expected: int) -> None:
    assert rules.compare_condition_transition_time(a, b, FAILED) == expected


@pytest.mark.parametrize(
    ("req", "expected"),
    [
        pytest.param(request("foo", "uid-1", condition(EVICTED, "True", DELETED)), True,
                     id="TestHasEvictionRequestCompleted/completed - target evicted"),
        pytest.param(request("foo", "uid-1", condition(FAILED, "True", names.REASON_EVICTION_INVALID)), True,
                     id="TestHasEvictionRequestCompleted/completed - invalid"),
        pytest.param(request("foo", "uid-1", condition(FAILED, "True", NFR)), False,
                     id="TestHasEvictionRequestCompleted/in progress - with last failed eviction"),
        pytest.param(request("foo", "uid-1", condition(EVICTED, "False", AWAITING), condition(FAILED, "False", AWAITING)),
                     False, id="TestHasEvictionRequestCompleted/in progress"),
    ],
)  # fmt: skip
def test_has_eviction_request_completed(req: Obj, expected: bool) -> None:
    assert rules.has_eviction_request_completed(req) == expected


E, W = intent(names.INTENT_EVICTION), intent(names.INTENT_WITHDRAWN)


@pytest.mark.parametrize(
    ("reqs", "expected"),
    [
        pytest.param([request("foo1", "uid-1", E), request("foo2", "uid-1", E), request("foo3", "uid-1", E)], True,
                     id="TestHasEvictionRequestEvictionIntent/multiple intents"),
        pytest.param([request(f"foo{i}", "uid-1", E if i == 4 else W) for i in range(1, 7)], True,
                     id="TestHasEvictionRequestEvictionIntent/single intent"),
        pytest.param([request(f"foo{i}", "uid-1", *((E, request_deleted()) if i == 4 else (W,))) for i in range(1, 7)],
                     False, id="TestHasEvictionRequestEvictionIntent/withdrawn"),
    ],
)  # fmt: skip
def test_has_eviction_intent(reqs: list[Obj], expected: bool) -> None:
    assert rules.has_eviction_intent(reqs) == expected


@pytest.mark.parametrize("group", [names.BUILTIN_GROUP, names.AIOKCM_GROUP])
def test_owner_reference(group: str) -> None:
    """TestEvictionRequestAsOwnerReference, in either served group."""
    req = request("foo1", "uid-1")
    assert rules.owner_reference(req, group) == {
        "apiVersion": f"{group}/v1alpha1",
        "kind": "EvictionRequest",
        "name": "foo",
        "uid": "uid-foo",
    }


RA, RB = "responder-a.example.com/a", "responder-b.example.com/b"
REQ, RESP, BOTH = names.ROLE_REQUESTER, names.ROLE_RESPONDER, names.ROLE_REQUESTER_RESPONDER
PREVIOUS = {"foo": "bar", "foo.example.com/1": REQ, RA: BOTH, RB: RESP, EVICTOR: RESP}


@pytest.mark.parametrize(
    ("evict", "t", "reqs", "expected"),
    [
        pytest.param(
            ev("pod-1-foo", labels({"foo": "bar"})),
            target("my-pod", "uid-1", pod("my-pod", "uid-1", eviction_responders((RA, 1000), (RB, 15000)))),
            [request("pod-1", "requester-1", requester("foo.example.com/1")), request("pod-2", "requester-2", requester(RA))],
            {"foo.example.com/1": REQ, RA: BOTH, RB: RESP, EVICTOR: RESP},
            id="TestComputeEvictionLabels/computes labels",
        ),
        pytest.param(
            ev("pod-1-foo", labels(PREVIOUS)), target("my-pod", "uid-1", None),
            [request("pod-1", "requester-1", requester("foo.example.com/1")), request("pod-2", "requester-2", requester(RA))],
            {"foo.example.com/1": REQ, RA: BOTH, RB: RESP, EVICTOR: RESP},
            id="TestComputeEvictionLabels/target gone persists labels",
        ),
        pytest.param(
            ev("pod-1-foo", labels(PREVIOUS)), target("my-pod", "uid-1", None),
            [request("pod-3", "requester-3", requester("bar.example.com/1")), request("pod-4", "requester-4", requester(RB))],
            {"bar.example.com/1": REQ, RA: RESP, RB: BOTH, EVICTOR: RESP},
            id="TestComputeEvictionLabels/target gone persists labels, but requesters rotated",
        ),
    ],
)  # fmt: skip
def test_compute_eviction_labels(evict: Obj, t: Any, reqs: list[Obj], expected: dict[str, str]) -> None:
    assert rules.compute_eviction_labels(evict, t, reqs) == expected


@pytest.mark.parametrize(
    ("old", "new", "needs_update"),
    [
        pytest.param(None, {"foo": "bar"}, True, id="TestEvictionLabelsNeedSSAUpdate/new label"),
        pytest.param({"foo": "bar"}, {"foo": "baz"}, True, id="TestEvictionLabelsNeedSSAUpdate/label update"),
        pytest.param({"baz": "bar", "foo.example.com/bar": REQ}, {"baz": "bar"}, True,
                     id="TestEvictionLabelsNeedSSAUpdate/removed requester update"),
        pytest.param({"baz": "bar", "foo.example.com/bar": RESP}, None, False,
                     id="TestEvictionLabelsNeedSSAUpdate/removal of other values not registered requester update"),
    ],
)  # fmt: skip
def test_eviction_labels_need_update(
    old: dict[str, str] | None, new: dict[str, str] | None, needs_update: bool
) -> None:
    assert rules.eviction_labels_need_update(old, new) == needs_update


def deleting(seconds: float) -> Any:
    return target("my-pod", "uid-1", pod("my-pod", "uid-1", pod_deleted_at(ts(seconds=seconds))))


@pytest.mark.parametrize(
    ("status", "t", "expected"),
    [
        pytest.param(None, deleting(-1), None, id="TestShouldDeferCompletion/no responder status"),
        pytest.param({"completionTime": ts()}, deleting(-1), None,
                     id="TestShouldDeferCompletion/responder with completion time"),
        pytest.param({}, target("my-pod", "uid-1", None), None, id="TestShouldDeferCompletion/no pod"),
        pytest.param({}, target("my-pod", "uid-1", pod("my-pod", "uid-1")), None,
                     id="TestShouldDeferCompletion/no deletion timestamp"),
        pytest.param({}, deleting(60), 65.0, id="TestShouldDeferCompletion/planned deletion should defer"),
        pytest.param({}, deleting(-1), 4.0, id="TestShouldDeferCompletion/recent deletion should defer"),
        pytest.param({}, deleting(-5), None, id="TestShouldDeferCompletion/old deletion should not defer"),
    ],
)  # fmt: skip
def test_should_defer_completion(status: Obj | None, t: Any, expected: float | None) -> None:
    assert rules.should_defer_completion(NOW, status, t) == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param([], [], id="TestSortTargetResponders/empty"),
        pytest.param(
            [{"name": "bar", "priority": 3}, {"name": "foo", "priority": 5}, {"name": "baz", "priority": 4}],
            [{"name": "foo", "priority": 5}, {"name": "baz", "priority": 4}, {"name": "bar", "priority": 3}],
            id="TestSortTargetResponders/sort",
        ),
        pytest.param(
            [{"name": "b.example.io/x", "priority": 5}, {"name": "a.example.com/x", "priority": 5},
             {"name": "example.com/y", "priority": 5}, {"name": "example.com/x", "priority": 5}],
            [{"name": "example.com/x", "priority": 5}, {"name": "example.com/y", "priority": 5},
             {"name": "a.example.com/x", "priority": 5}, {"name": "b.example.io/x", "priority": 5}],
            id="ties by domain read from the top, then key (validation.SortTargetResponders)",
        ),
    ],
)  # fmt: skip
def test_sort_target_responders(given: list[Obj], expected: list[Obj]) -> None:
    assert rules.sort_target_responders(given) == expected
