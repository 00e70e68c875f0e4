"""Which pods a drain asks to leave, and when it falls back to eviction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controllers.nodemaintenance import drain
from controllers.nodemaintenance.drain import Action, format_time, plan_pod

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def pod(
    *,
    owner_kind: str | None = "ReplicaSet",
    mirror: bool = False,
    phase: str = "Running",
    conditions: list[dict[str, Any]] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "u1"}
    if owner_kind:
        meta["ownerReferences"] = [{"kind": owner_kind, "name": "o", "uid": "o1", "controller": True}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    if deleting:
        meta["deletionTimestamp"] = format_time(NOW)
    return {"metadata": meta, "spec": {"nodeName": "n1"}, "status": {"phase": phase, "conditions": conditions or []}}


def cond(type_: str, status: str, *, reason: str = "NodeMaintenance", ago: float = 0.0) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "lastTransitionTime": format_time(NOW - timedelta(seconds=ago))}


def plan(p: dict[str, Any], *, draining: bool = True, timeout: float = 180.0) -> Action:
    return plan_pod(p, draining=draining, timeout=timeout, now=NOW).action


def test_daemonset_mirror_and_finished_pods_are_skipped() -> None:
    assert plan(pod(owner_kind="DaemonSet")) is Action.NONE
    assert plan(pod(mirror=True)) is Action.NONE
    assert plan(pod(phase="Succeeded")) is Action.NONE
    assert plan(pod(owner_kind=None)) is Action.REQUEST  # bare pods get the chance to be evacuated too


def test_request_then_wait_then_evict_after_the_timeout() -> None:
    assert plan(pod()) is Action.REQUEST
    waiting = plan_pod(pod(conditions=[cond("EvacuationRequest", "True", ago=60)]), draining=True, timeout=180, now=NOW)
    assert waiting.action is Action.WAIT
    assert waiting.deadline == NOW + timedelta(seconds=120)
    assert plan(pod(conditions=[cond("EvacuationRequest", "True", ago=181)])) is Action.EVICT


def test_owner_answer_stops_the_fallback_and_a_refusal_speeds_it_up() -> None:
    answered = [cond("EvacuationRequest", "True", ago=500), cond("EvacuationInitiated", "True", ago=400)]
    assert plan(pod(conditions=answered)) is Action.EVACUATING
    refused = [cond("EvacuationRequest", "True", ago=10), cond("EvacuationInitiated", "False", ago=5)]
    assert plan(pod(conditions=refused)) is Action.EVICT


def test_another_requesters_condition_is_never_replaced_but_still_times_out() -> None:
    theirs = [cond("EvacuationRequest", "True", reason="Descheduler", ago=10)]
    assert plan(pod(conditions=theirs)) is Action.WAIT
    assert plan(pod(conditions=theirs), draining=False) is Action.NONE  # never withdrawn by us


def test_withdraw_only_our_own_requests() -> None:
    ours = [cond("EvacuationRequest", "True")]
    assert plan(pod(conditions=ours), draining=False) is Action.WITHDRAW
    assert plan(pod(), draining=False) is Action.NONE


def test_terminating_pods_are_waited_for() -> None:
    assert plan(pod(deleting=True)) is Action.TERMINATING


def test_a_failing_eviction_backs_off_exponentially_to_client_gos_cap() -> None:
    """A pod under two PDBs gets a 500 on every eviction: retrying every 5 s forever would make
    a stuck drain write for ever at a fixed rate; errors back off, as a workqueue's do."""
    waits = [drain.failure_backoff(n) for n in range(1, 12)]
    assert waits[:4] == [5.0, 10.0, 20.0, 40.0]
    assert waits == sorted(waits)
    assert waits[-1] == drain.EVICTION_FAILURE_BACKOFF_CAP == 1000.0
    assert drain.failure_backoff(10_000) == 1000.0
