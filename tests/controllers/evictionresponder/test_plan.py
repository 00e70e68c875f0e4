"""The responder's decisions, case by case, from cached objects alone (`plan.plan`)."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.evictionresponder import plan as planner
from controllers.evictionresponder.plan import (
    HEARTBEAT_INTERVAL,
    MESSAGE_CANCELED,
    MESSAGE_DONE,
    MESSAGE_GONE,
    MESSAGE_REQUESTED,
    Facts,
    Step,
    plan,
)
from evictionapi import names
from tests.controllers.evictionresponder.builders import (
    NOW,
    deployment,
    eviction,
    others,
    ours,
    pod,
    replicaset,
)

Obj = dict[str, Any]


def facts(
    target: Obj | None,
    *,
    ev: Obj | None = None,
    rs: Obj | None = None,
    d: Obj | None = None,
    extra: list[Obj] | None = None,
    bare: bool = False,
) -> Facts:
    """The target `web-1` with its Deployment (or a ReplicaSet alone, `bare`) and two more pods."""
    rs = rs if rs is not None else replicaset(owner_kind=None if bare else "Deployment")
    d = None if bare else (d if d is not None else deployment())
    pods = ([target] if target is not None else []) + others(2) + (extra or [])
    return Facts(ev if ev is not None else eviction(), target, rs, d, pods)


def steps(f: Facts, **kwargs: Any) -> list[Step]:
    return plan(f, now=NOW, **kwargs).steps


# -- whose turn ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ev", "expected"),
    [
        pytest.param(eviction(listed=False), [], id="not-listed"),
        pytest.param(eviction(state=names.STATE_INACTIVE), [], id="inactive-waits"),
        pytest.param(eviction(initialised=False), [], id="active-before-its-status-is-initialised"),
        pytest.param(eviction(completed=True), [], id="completed-already"),
    ],
)
def test_it_acts_only_on_its_own_active_turn(ev: Obj, expected: list[Step]) -> None:
    assert steps(facts(pod(), ev=ev)) == expected


# -- asking for the surge --------------------------------------------------------------------------


def test_an_active_turn_marks_the_pod_and_reports() -> None:
    out = plan(facts(pod()), now=NOW)
    assert out.steps == [Step.MARK, Step.REPORT]
    assert out.message == MESSAGE_REQUESTED


def test_another_requesters_evacuation_is_followed_not_overwritten() -> None:
    """A NodeMaintenance asked first: the surge it starts is the one we need; no second mark."""
    target = pod(request=("True", "NodeMaintenance", 30), answer=("True", 20, ""))
    out = plan(facts(target, extra=[pod("web-4", node="node-3", ready=False)]), now=NOW)
    assert out.steps == [Step.REPORT]
    assert out.message == "surging a replacement (1/1 within maxSurge)"


def test_a_withdrawn_request_of_someone_else_is_replaced_by_ours() -> None:
    assert steps(facts(pod(request=("False", "NodeMaintenance", 30)))) == [Step.MARK, Step.REPORT]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param([], "surging a replacement (0/1 within maxSurge)", id="no-room-used-yet"),
        pytest.param(
            [pod("web-4", ready=False, node="node-3")],
            "surging a replacement (1/1 within maxSurge)",
            id="starting",
        ),
        pytest.param(
            [pod("web-4", node="node-3")],
            "replacement available; waiting for the ReplicaSet to remove the pod",
            id="replacement-available",
        ),
    ],
)
def test_progress_is_the_surge_in_use_out_of_max_surge(extra: list[Obj], message: str) -> None:
    out = plan(facts(pod(request=ours(), answer=("True", 3, "")), extra=extra), now=NOW)
    assert out.steps == [Step.REPORT]
    assert out.message == message
    assert out.requeue_after == planner.PROGRESS_REFRESH


def test_a_replicaset_alone_surges_one_pod() -> None:
    out = plan(facts(pod(request=ours(), answer=("True", 3, "")), bare=True), now=NOW)
    assert out.message == "surging a replacement (0/1 within maxSurge)"


# -- heartbeats ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heartbeat", "message", "reports"),
    [
        pytest.param(None, MESSAGE_REQUESTED, True, id="first-heartbeat"),
        pytest.param(60, MESSAGE_REQUESTED, False, id="same-message-within-3-minutes"),
        pytest.param(60, "something older", True, id="message-changed"),
        pytest.param(HEARTBEAT_INTERVAL, MESSAGE_REQUESTED, True, id="heartbeat-due"),
    ],
)
def test_heartbeats_at_most_every_three_minutes_unless_the_message_changes(
    heartbeat: float | None, message: str, reports: bool
) -> None:
    target = pod(request=ours(10))
    out = plan(facts(target, ev=eviction(heartbeat=heartbeat, message=message)), now=NOW)
    assert (Step.REPORT in out.steps) is reports
    assert out.requeue_after is not None and out.requeue_after <= HEARTBEAT_INTERVAL
    if heartbeat == 60:
        assert out.requeue_after <= HEARTBEAT_INTERVAL - 60


def test_heartbeats_keep_well_inside_the_apis_deadline() -> None:
    assert 20 <= HEARTBEAT_INTERVAL <= names.HEARTBEAT_TIMEOUT_SECONDS / 4


# -- completion ------------------------------------------------------------------------------------


def test_the_pod_gone_after_its_replacement_is_available_completes() -> None:
    out = plan(facts(None, extra=[pod("web-4", node="node-3")]), now=NOW)
    assert out.steps == [Step.COMPLETE]
    assert out.message == MESSAGE_DONE


def test_the_pod_gone_without_a_replacement_completes_saying_only_that() -> None:
    out = plan(facts(None), now=NOW)
    assert out.steps == [Step.COMPLETE]
    assert out.message == MESSAGE_GONE


def test_a_terminating_pod_is_reported_and_awaited() -> None:
    out = plan(facts(pod(request=ours(), answer=("True", 3, ""), terminating=True)), now=NOW)
    assert out.steps == [Step.REPORT]
    assert "terminating" in out.message


def test_a_terminal_pod_completes() -> None:
    out = plan(facts(pod(phase="Succeeded")), now=NOW)
    assert out.steps == [Step.COMPLETE]
    assert "Succeeded" in out.message


# -- handing over ----------------------------------------------------------------------------------


def test_the_surge_giving_up_completes_with_its_reason_and_withdraws_our_request() -> None:
    why = "no room under maxSurge to start a replacement within 600s"
    out = plan(facts(pod(request=ours(700), answer=("False", 1, why))), now=NOW)
    assert out.steps == [Step.COMPLETE, Step.WITHDRAW]
    assert why in out.message and "next responder" in out.message


def test_an_answer_to_an_earlier_request_is_not_a_give_up() -> None:
    out = plan(facts(pod(request=ours(5), answer=("False", 60, "old"))), now=NOW)
    assert out.steps == [Step.REPORT]
    assert out.message == MESSAGE_REQUESTED


def test_nobody_answering_in_time_hands_over() -> None:
    out = plan(facts(pod(request=ours(200)), bare=True), now=NOW, answer_timeout=120)
    assert out.steps == [Step.COMPLETE, Step.WITHDRAW]
    assert "nobody answered" in out.message


def test_waiting_for_an_answer_wakes_at_its_deadline() -> None:
    out = plan(facts(pod(request=ours(100)), ev=eviction(heartbeat=50, message=MESSAGE_REQUESTED)), now=NOW)
    assert out.steps == []
    assert out.requeue_after == pytest.approx(planner.ANSWER_TIMEOUT - 100)


@pytest.mark.parametrize(
    ("target", "rs", "d", "why"),
    [
        pytest.param(pod(owner_kind=None), None, None, "no ReplicaSet", id="bare-pod"),
        pytest.param(pod(owner_kind="StatefulSet"), None, None, "StatefulSet", id="statefulset-pod"),
        pytest.param(
            pod(), replicaset(owner_kind="Rollout"), None, "Rollout", id="replicaset-of-another-kind"
        ),
        pytest.param(pod(), None, deployment(strategy={"type": "Recreate"}), "Recreate", id="recreate"),
        pytest.param(
            pod(),
            None,
            deployment(
                strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
            ),
            "maxSurge is 0",
            id="max-surge-0",
        ),
        pytest.param(pod(), None, deployment(deleting=True), "being deleted", id="deployment-deleted"),
    ],
)
def test_pods_it_cannot_serve_complete_at_once(target: Obj, rs: Obj | None, d: Obj | None, why: str) -> None:
    out = plan(facts(target, rs=rs, d=d), now=NOW)
    assert out.steps == [Step.COMPLETE]
    assert why in out.message and "next responder" in out.message


# -- after our turn --------------------------------------------------------------------------------


def test_canceled_withdraws_our_request_and_says_so_once() -> None:
    ev = eviction(state=names.STATE_CANCELED, heartbeat=30, message=MESSAGE_REQUESTED)
    out = plan(facts(pod(request=ours(), answer=("True", 3, "")), ev=ev), now=NOW)
    assert out.steps == [Step.WITHDRAW, Step.FINAL_MESSAGE]
    assert out.message == MESSAGE_CANCELED
    said = eviction(state=names.STATE_CANCELED, heartbeat=30, message=MESSAGE_CANCELED)
    assert steps(facts(pod(), ev=said)) == []


def test_canceled_leaves_someone_elses_request_alone() -> None:
    ev = eviction(state=names.STATE_CANCELED, heartbeat=30, message=MESSAGE_CANCELED)
    assert steps(facts(pod(request=("True", "NodeMaintenance", 30)), ev=ev)) == []


@pytest.mark.parametrize(
    "ev",
    [
        pytest.param(eviction(state=names.STATE_INTERRUPTED, heartbeat=1300), id="interrupted"),
        pytest.param(eviction(state=names.STATE_COMPLETED, completed=True), id="completed"),
        pytest.param(eviction(completed=True), id="active-but-completed"),
    ],
)
def test_our_request_lives_only_while_we_work(ev: Obj) -> None:
    assert steps(facts(pod(request=ours()), ev=ev)) == [Step.WITHDRAW]
