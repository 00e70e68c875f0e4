"""The evacuation step planner: surge first, release only what keeps availability."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controllers.deployment import evacuation
from tests.controllers.deployment.builders import deployment, pod, replica_set

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def test_single_replica_surges_then_waits_then_releases() -> None:
    d = deployment(1)  # 25% surge rounds up to 1
    rs = replica_set("web-1", 1)
    p = evacuation.plan(d, rs, [pod("a", requested=True)], now=NOW)
    assert (p.step, p.replicas) == ("surge", 2)
    rs = replica_set("web-1", 2, available=1)
    surge_pending = [pod("a", requested=True), pod("b", ready=False, node="node-2")]
    p = evacuation.plan(d, rs, surge_pending, now=NOW)
    assert (p.step, p.replicas) == ("wait", 2)
    surge_ready = [pod("a", requested=True), pod("b", node="node-2")]
    p = evacuation.plan(d, rs, surge_ready, now=NOW)
    assert (p.step, p.replicas) == ("release", 1)


def test_three_replicas_move_one_at_a_time_within_surge() -> None:
    d = deployment(3)  # surge 1, unavailable 0
    pods = [pod(n, requested=True) for n in "abc"]
    assert evacuation.plan(d, replica_set("r", 3), pods, now=NOW).replicas == 4
    pods.append(pod("s1", node="node-2"))
    p = evacuation.plan(d, replica_set("r", 4), pods, now=NOW)
    assert (p.step, p.replicas) == ("release", 3)


def test_bigger_surge_moves_more_at_once() -> None:
    d = deployment(4, max_surge=2)
    pods = [pod(n, requested=True) for n in "abc"] + [pod("d", node="node-2")]
    assert evacuation.plan(d, replica_set("r", 4), pods, now=NOW).replicas == 6


def test_nothing_happens_until_replica_set_settles() -> None:
    d = deployment(1)
    rs = replica_set("r", 1, actual=2)  # the ReplicaSet controller has not removed the pod yet
    p = evacuation.plan(d, rs, [pod("a", requested=True), pod("b", node="node-2")], now=NOW)
    assert (p.step, p.replicas) == ("settling", None)
    rs = replica_set("r", 2, generation=3, observed=2)
    assert evacuation.plan(d, rs, [pod("a", requested=True), pod("b")], now=NOW).step == "settling"


def test_withdrawn_request_scales_back_to_spec() -> None:
    d = deployment(3)
    rs = replica_set("r", 4)
    pods = [pod(n) for n in "abcd"]
    p = evacuation.plan(d, rs, pods, now=NOW)
    assert (p.step, p.replicas) == ("idle", 3)


def test_unavailable_requested_pod_can_go_at_once() -> None:
    d = deployment(1)
    rs = replica_set("r", 2, available=0)
    pods = [pod("a", requested=True, ready=False), pod("b", ready=False, node="node-2")]
    assert evacuation.plan(d, rs, pods, now=NOW).replicas == 1


def test_user_scale_down_mid_surge_stays_within_budget() -> None:
    d = deployment(1)  # was 3, surge 1 applied -> spec 4
    rs = replica_set("r", 4)
    pods = [pod(n, requested=True) for n in "abc"] + [pod("s", ready=False, node="node-2")]
    p = evacuation.plan(d, rs, pods, now=NOW)
    # 3 available, 1 wanted: 2 requested pods can go right away.
    assert (p.step, p.replicas) == ("release", 2)


def test_user_scale_up_mid_evacuation_surges_on_new_size() -> None:
    d = deployment(5)  # surge ceil(1.25) = 2
    pods = [pod(n, requested=True) for n in "abc"] + [pod("s", node="node-2")]
    p = evacuation.plan(d, replica_set("r", 4), pods, now=NOW)
    assert (p.step, p.replicas) == ("surge", 7)


def test_terminating_pods_do_not_count() -> None:
    d = deployment(1)
    rs = replica_set("r", 1)
    p = evacuation.plan(d, rs, [pod("a", requested=True, terminating=True), pod("b", node="node-2")], now=NOW)
    assert (p.step, p.replicas) == ("idle", 1)


@pytest.mark.parametrize(
    ("kwargs", "answers"),
    [
        ({}, True),
        ({"max_surge": 0, "max_unavailable": 1}, False),
        ({"strategy": "Recreate"}, False),
    ],
)
def test_who_can_answer(kwargs: dict[str, object], answers: bool) -> None:
    d = deployment(3, **kwargs)  # type: ignore[arg-type]
    assert evacuation.can_answer(d, [replica_set("r", 3)]) is answers


def test_paused_mid_rollout_cannot_answer_but_paused_steady_can() -> None:
    d = deployment(3, paused=True)
    assert evacuation.can_answer(d, [replica_set("r", 3)])
    assert not evacuation.can_answer(d, [replica_set("a", 2), replica_set("b", 2)])


def test_steady_replica_set_only_without_pending_rollout() -> None:
    d = deployment(3)
    new = replica_set("new", 3)
    old = replica_set("old", 0)
    assert evacuation.steady_replica_set(d, new, [old]) is new
    assert evacuation.steady_replica_set(d, new, [replica_set("old", 1)]) is None
    # Template changed, new ReplicaSet not created yet: a rollout is pending.
    assert evacuation.steady_replica_set(d, None, [replica_set("old", 3)]) is None
    paused = deployment(3, paused=True)
    only_old = replica_set("old", 3)
    assert evacuation.steady_replica_set(paused, None, [only_old]) is only_old


def test_rolling_cleanup_never_counts_a_ready_requested_pod_as_unhealthy() -> None:
    from controllers.deployment.rolling import unhealthy_deletions_first

    # The ReplicaSet controller deletes requested pods first: a ready requested pod comes before
    # the not-ready surge pod, so "clean up one unhealthy pod" would cost availability.
    pods = [pod("a", requested=True), pod("b"), pod("s", ready=False, node="node-2")]
    assert unhealthy_deletions_first(pods, 0, NOW) == 0
    pods = [pod("a", requested=True, ready=False), pod("b"), pod("s", ready=False, node="node-2")]
    assert unhealthy_deletions_first(pods, 0, NOW) == 2
    assert unhealthy_deletions_first([pod("b"), pod("s", ready=False)], 0, NOW) == 1


def test_requests_arriving_mid_surge_top_the_surge_up_to_the_budget() -> None:
    # The drain asks its pods one by one: a Deployment that saw one request and surged by one
    # replaces the next two as soon as it sees them, not after the first replacement is ready.
    d = deployment(3, max_surge=3)
    pods = [pod(n, requested=True) for n in "abc"] + [pod("s1", ready=False, node="node-2")]
    p = evacuation.plan(d, replica_set("r", 4, available=3), pods, now=NOW)
    assert (p.step, p.replicas) == ("surge", 6)
    # Within a budget of 1 the surge stays at one replacement at a time.
    d = deployment(3, max_surge=1)
    p = evacuation.plan(d, replica_set("r", 4, available=3), pods, now=NOW)
    assert (p.step, p.replicas) == ("wait", 4)
