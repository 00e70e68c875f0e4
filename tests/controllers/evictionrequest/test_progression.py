"""Upstream's eviction_utils_test.go tables (TestEvictionCondition,
TestGetOrInitializeTargetResponders, TestComputeResponderProgression,
TestSortEvictionRequestsByRelevance)."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.evictionrequest import progression, rules
from controllers.evictionrequest.progression import HEARTBEAT_TIMEOUT
from evictionapi import names
from tests.controllers.evictionrequest.helpers import (
    EVICTOR,
    NOW,
    Obj,
    condition,
    condition_true,
    eviction,
    eviction_responders,
    intent,
    pod,
    pod_deleted_at,
    request,
    request_created,
    request_deleted,
    requester,
    state_for,
    target,
    target_responders,
    tr,
    ts,
)

INACTIVE, ACTIVE, DONE = names.STATE_INACTIVE, names.STATE_ACTIVE, names.STATE_COMPLETED
INTERRUPTED, CANCELED = names.STATE_INTERRUPTED, names.STATE_CANCELED
A, B = "a.example.com/responder-a", "b.example.com/responder-b"


@pytest.mark.parametrize(
    ("evict", "succeeded", "failed"),
    [
        pytest.param(eviction("pod-1-foo", "foo", "uid-1", condition_true("Failed", names.REASON_NO_FURTHER_RESPONDER)),
                     False, True, id="TestEvictionCondition/failed"),
        pytest.param(eviction("pod-1-foo", "foo", "uid-1", condition_true("TargetEvicted", names.REASON_POD_DELETED)),
                     True, False, id="TestEvictionCondition/succeeded"),
        pytest.param(eviction("pod-1-foo", "foo", "uid-1",
                              condition("Failed", "False", names.REASON_NO_FURTHER_RESPONDER)),
                     False, False, id="TestEvictionCondition/in progress"),
    ],
)  # fmt: skip
def test_eviction_condition(evict: Obj, succeeded: bool, failed: bool) -> None:
    assert rules.has_eviction_failed(evict) == failed
    assert rules.has_eviction_succeeded(evict) == succeeded
    assert rules.has_eviction_completed(evict) == (failed or succeeded)


@pytest.mark.parametrize(
    ("t", "evict", "want", "changed"),
    [
        # Upstream lists the pod's order (sorted afterwards); aiokcm's reader returns it sorted.
        pytest.param(
            target("my-pod", "uid-1", pod("my-pod", "uid-1", eviction_responders((A, 1000), (B, 15000)))), {},
            [tr(B, 15000, INACTIVE), tr(A, 1000, INACTIVE), tr(EVICTOR, 100, INACTIVE)], True,
            id="TestGetOrInitializeTargetResponders/pod with responders + default ones",
        ),
        pytest.param(target("my-pod", "uid-1", pod("my-pod", "uid-1")), {}, [tr(EVICTOR, 100, INACTIVE)], True,
                     id="TestGetOrInitializeTargetResponders/pod with just default responders"),
        pytest.param(target("my-pod", "uid-1", None), {}, [], False,
                     id="TestGetOrInitializeTargetResponders/pod not found"),
        pytest.param(
            target("my-pod", "uid-1", pod("my-pod", "uid-1", eviction_responders((A, 1000), (B, 15000)))),
            eviction("pod-1-my-pod", "my-pod", "uid-1", target_responders("foo.example.com/bar", "foo.example.com/baz"),
                     state_for(ACTIVE, 0)),
            [tr("foo.example.com/bar", 5000, ACTIVE), tr("foo.example.com/baz", 4999, INACTIVE)], False,
            id="TestGetOrInitializeTargetResponders/pod with responders + default ones changed, "
            "but copied from the last status instead",
        ),
    ],
)  # fmt: skip
def test_get_or_initialize_target_responders(t: Any, evict: Obj, want: list[Obj], changed: bool) -> None:
    assert progression.get_or_initialize_target_responders(evict, t) == (want, changed)


NO_POD = target("my-pod", "uid-1", None)
LIVE_POD = target("my-pod", "uid-1", pod("my-pod", "uid-1"))


def three(a: str, b: str, c: str) -> list[Obj]:
    return [tr("responder-a", 15000, a), tr("responder-b", 1000, b), tr(EVICTOR, 100, c)]


def two(a: str, b: str) -> list[Obj]:
    return [tr("responder-a", 15000, a), tr("responder-b", 1000, b)]


def st(name: str, *, start: str | None = None, heartbeat: str | None = None, done: str | None = None) -> Obj:
    out: Obj = {"name": name}
    for key, value in (("startTime", start), ("heartbeatTime", heartbeat), ("completionTime", done)):
        if value is not None:
            out[key] = value
    return out


FINISHED = {"start": ts(), "done": ts()}
DELETED_6S_AGO = target("my-pod", "uid-1", pod("my-pod", "uid-1", pod_deleted_at(ts(seconds=-6))))
DELETED_4S_AGO = target("my-pod", "uid-1", pod("my-pod", "uid-1", pod_deleted_at(ts(seconds=-4))))


@pytest.mark.parametrize(
    ("t", "flags", "statuses", "given", "expected", "done", "resync"),
    [
        pytest.param(NO_POD, "", [], [], [], True, None, id="TestComputeResponderProgression/empty"),
        pytest.param(NO_POD, "", [], three(INACTIVE, INACTIVE, INACTIVE), three(ACTIVE, INACTIVE, INACTIVE), False,
                     HEARTBEAT_TIMEOUT, id="TestComputeResponderProgression/activate the first one"),
        pytest.param(NO_POD, "", [st("responder-a", **FINISHED), st("responder-b"), st(EVICTOR)],
                     three(ACTIVE, INACTIVE, INACTIVE), three(DONE, ACTIVE, INACTIVE), False, HEARTBEAT_TIMEOUT,
                     id="TestComputeResponderProgression/activate the second one"),
        pytest.param(NO_POD, "", [st("responder-a", **FINISHED), st("responder-b", **FINISHED), st(EVICTOR)],
                     three(DONE, ACTIVE, INACTIVE), three(DONE, DONE, ACTIVE), False, HEARTBEAT_TIMEOUT,
                     id="TestComputeResponderProgression/activate the third one"),
        pytest.param(NO_POD, "", [st("responder-a", **FINISHED), st("responder-b", **FINISHED), st(EVICTOR, **FINISHED)],
                     three(DONE, DONE, ACTIVE), three(DONE, DONE, DONE), False, None,
                     id="TestComputeResponderProgression/complete the third one"),
        pytest.param(NO_POD, "", [st("responder-a", **FINISHED), st("responder-b", **FINISHED), st(EVICTOR, **FINISHED)],
                     three(DONE, DONE, DONE), three(DONE, DONE, DONE), True, None,
                     id="TestComputeResponderProgression/no change after completion"),
        pytest.param(NO_POD, "", [st("responder-a", **FINISHED), st("responder-b", **FINISHED), st(EVICTOR, start=ts())],
                     three(DONE, DONE, INTERRUPTED), three(DONE, DONE, INTERRUPTED), True, None,
                     id="TestComputeResponderProgression/no change after last interruption"),
        pytest.param(NO_POD, "", [st("responder-a", **FINISHED), st("responder-b", **FINISHED), st(EVICTOR, start=ts())],
                     three(DONE, DONE, CANCELED), three(DONE, DONE, CANCELED), True, None,
                     id="TestComputeResponderProgression/no change after last cancellation"),
        pytest.param(NO_POD, "", [st("responder-a", start=ts(seconds=-60)), st("responder-b")],
                     two(ACTIVE, INACTIVE), two(ACTIVE, INACTIVE), False, HEARTBEAT_TIMEOUT - 60,
                     id="TestComputeResponderProgression/reschedule resync according to the start time"),
        pytest.param(NO_POD, "", [st("responder-a", start=ts(seconds=-1500), heartbeat=ts(seconds=-120)), st("responder-b")],
                     two(ACTIVE, INACTIVE), two(ACTIVE, INACTIVE), False, HEARTBEAT_TIMEOUT - 120,
                     id="TestComputeResponderProgression/reschedule resync according to the heartbeat time"),
        pytest.param(NO_POD, "", [st("responder-a", start=ts(seconds=-1500), heartbeat=ts(seconds=-1200)), st("responder-b")],
                     two(ACTIVE, INACTIVE), two(INTERRUPTED, ACTIVE), False, HEARTBEAT_TIMEOUT,
                     id="TestComputeResponderProgression/interrupt the first after the heartbeat has elapsed "
                     "and activate the second one"),
        pytest.param(NO_POD, "", [st("responder-a", start=ts(seconds=-1260)), st("responder-b")],
                     two(ACTIVE, INACTIVE), two(INTERRUPTED, ACTIVE), False, HEARTBEAT_TIMEOUT,
                     id="TestComputeResponderProgression/interrupt the first after the heartbeat (start time "
                     "fallback has elapsed and activate the second one"),
        pytest.param(NO_POD, "gone", [st("responder-a", **FINISHED), st("responder-b")],
                     two(ACTIVE, INACTIVE), two(DONE, INACTIVE), False, None,
                     id="TestComputeResponderProgression/complete after the target is gone"),
        pytest.param(NO_POD, "terminal", [st("responder-a", **FINISHED), st("responder-b")],
                     two(ACTIVE, INACTIVE), two(DONE, INACTIVE), False, None,
                     id="TestComputeResponderProgression/complete after the target is terminal with completion time set"),
        pytest.param(NO_POD, "gone", [st("responder-a", start=ts()), st("responder-b")],
                     two(ACTIVE, INACTIVE), two(INTERRUPTED, INACTIVE), False, None,
                     id="TestComputeResponderProgression/interrupt after the target is gone without completion time set"),
        pytest.param(DELETED_6S_AGO, "terminal", [st("responder-a", start=ts()), st("responder-b")],
                     two(ACTIVE, INACTIVE), two(INTERRUPTED, INACTIVE), False, None,
                     id="TestComputeResponderProgression/interrupt after the target is terminal without completion "
                     "time set"),
        pytest.param(DELETED_4S_AGO, "terminal", [st("responder-a", start=ts()), st("responder-b")],
                     two(ACTIVE, INACTIVE), two(ACTIVE, INACTIVE), False, 1.0,
                     id="TestComputeResponderProgression/wait for completionTime after the target is terminal"),
        pytest.param(LIVE_POD, "canceled", [st("responder-a", start=ts()), st("responder-b")],
                     two(ACTIVE, INACTIVE), two(CANCELED, INACTIVE), False, None,
                     id="TestComputeResponderProgression/cancel active responder"),
        pytest.param(LIVE_POD, "canceled", [st("responder-a", start=ts()), st("responder-b")],
                     two(INACTIVE, INACTIVE), two(INACTIVE, INACTIVE), False, None,
                     id="TestComputeResponderProgression/cancel non active responder"),
    ],
)  # fmt: skip
def test_compute_responder_progression(
    t: Any,
    flags: str,
    statuses: list[Obj],
    given: list[Obj],
    expected: list[Obj],
    done: bool,
    resync: float | None,
) -> None:
    evict = eviction("foo", "foo", "foo-1")
    evict["status"]["responders"] = statuses
    responders = [dict(r) for r in given]
    got_done, got_resync = progression.compute_responder_progression(
        NOW, evict, responders, t, flags == "gone", flags == "terminal", flags == "canceled"
    )
    assert got_done == done
    assert got_resync == resync
    assert responders == expected


def test_sort_eviction_requests_by_relevance() -> None:
    """TestSortEvictionRequestsByRelevance/sort requesters (and /no requesters)."""
    assert progression.sort_eviction_requests_by_relevance([]) == []

    def r(n: int, *tweaks: Any) -> Obj:
        return request(f"requester-{n}", f"pod-{n}", requester(f"foo.example.com/{n}"), *tweaks)

    never = request_created(None)
    withdrawn = intent(names.INTENT_WITHDRAWN)
    given = [
        r(2, never), r(4, never, withdrawn), r(1), r(3), r(5, request_deleted()), r(7), r(6, withdrawn),
        r(8, request_deleted()), r(9, request_deleted(), withdrawn),
    ]  # fmt: skip
    ordered = progression.sort_eviction_requests_by_relevance(given)
    assert [o["spec"]["requester"].rsplit("/", 1)[1] for o in ordered] == [
        "1",
        "3",
        "7",
        "6",
        "5",
        "8",
        "9",
        "2",
        "4",
    ]
