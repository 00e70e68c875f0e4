"""Which pods a drain asks to leave, and when it falls back to eviction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

from controllers.nodemaintenance import drain
from controllers.nodemaintenance.drain import (
    Action,
    DrainOptions,
    combine,
    combine_timeouts,
    kubectl_filter,
    plan_pod,
    preview,
)
from controllers.nodemaintenance.workload import Answer, Workload
from kubeutil.selectors import parse
from kubeutil.timestamps import format_time

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def pod(
    *,
    owner_kind: str | None = "ReplicaSet",
    mirror: bool = False,
    phase: str = "Running",
    conditions: list[dict[str, Any]] | None = None,
    deleting: bool = False,
    empty_dir: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "u1"}
    if owner_kind:
        meta["ownerReferences"] = [{"kind": owner_kind, "name": "o", "uid": "o1", "controller": True}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    if deleting:
        meta["deletionTimestamp"] = format_time(NOW)
    if labels:
        meta["labels"] = labels
    spec: dict[str, Any] = {"nodeName": "n1"}
    if empty_dir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    return {"metadata": meta, "spec": spec, "status": {"phase": phase, "conditions": conditions or []}}


def cond(type_: str, status: str, *, reason: str = "NodeMaintenance", ago: float = 0.0) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "lastTransitionTime": format_time(NOW - timedelta(seconds=ago)),
    }


def plan(p: dict[str, Any], *, draining: bool = True, timeout: float = 180.0) -> Action:
    return plan_pod(p, draining=draining, timeout=timeout, now=NOW).action


REQUESTED = [cond("EvacuationRequest", "True", ago=1)]
CANNOT = Workload(Answer.CANNOT, "StatefulSet db", "sts-uid")
WILL = Workload(Answer.WILL, "ReplicaSet web", "rs-uid")
NOBODY = Workload(Answer.NONE)


def test_daemonset_mirror_and_finished_pods_are_skipped() -> None:
    assert plan(pod(owner_kind="DaemonSet")) is Action.NONE
    assert plan(pod(mirror=True)) is Action.NONE
    assert plan(pod(phase="Succeeded")) is Action.NONE
    assert plan(pod(owner_kind=None)) is Action.REQUEST  # bare pods are asked too: someone may move them


def test_pods_nobody_answers_for_are_evicted_at_once_unless_they_ask_to_wait() -> None:
    evict = plan_pod(
        pod(owner_kind="StatefulSet", conditions=REQUESTED),
        draining=True,
        timeout=180,
        now=NOW,
        workload=CANNOT,
    )
    assert evict.action is Action.EVICT and "StatefulSet db cannot answer" in evict.message
    patient = Workload(Answer.CANNOT, "StatefulSet db", "sts-uid", wait=True)
    waiting = plan_pod(pod(conditions=REQUESTED), draining=True, timeout=180, now=NOW, workload=patient)
    assert waiting.action is Action.WAIT and waiting.deadline == NOW + timedelta(seconds=179)
    own = Workload(Answer.CANNOT, "StatefulSet db", "sts-uid", timeout=30)
    assert plan_pod(
        pod(conditions=REQUESTED), draining=True, timeout=180, now=NOW, workload=own
    ).deadline == NOW + timedelta(seconds=29)
    # A request is still made first, with the recheck due at once.
    first = plan_pod(pod(), draining=True, timeout=180, now=NOW, workload=CANNOT)
    assert (first.action, first.deadline) == (Action.REQUEST, NOW)


def test_zero_timeout_never_evicts_what_may_answer() -> None:
    for work in (WILL, Workload(Answer.MAY, "Widget w")):
        p = plan_pod(
            pod(conditions=[cond("EvacuationRequest", "True", ago=10_000)]),
            draining=True,
            timeout=0,
            now=NOW,
            workload=work,
        )
        assert (p.action, p.deadline) == (Action.WAIT, None)
    assert (
        plan_pod(pod(conditions=REQUESTED), draining=True, timeout=0, now=NOW, workload=CANNOT).action
        is Action.EVICT
    )


def test_data_is_lost_only_with_an_opt_in() -> None:
    bare = plan_pod(
        pod(owner_kind=None, conditions=REQUESTED), draining=True, timeout=180, now=NOW, workload=NOBODY
    )
    assert (bare.action, bare.reason) == (Action.BLOCK, "NoController")
    assert bare.message == "cannot delete Pods that declare no controller (use --force to override)"
    forced = plan_pod(
        pod(owner_kind=None, conditions=REQUESTED),
        draining=True,
        timeout=180,
        now=NOW,
        workload=NOBODY,
        options=DrainOptions(force=True),
    )
    assert forced.action is Action.EVICT and "no controller" in forced.message
    cache = pod(owner_kind="StatefulSet", empty_dir=True, conditions=REQUESTED)
    blocked = plan_pod(cache, draining=True, timeout=180, now=NOW, workload=CANNOT)
    assert (blocked.action, blocked.reason) == (Action.BLOCK, "LocalStorage")
    assert (
        plan_pod(
            cache,
            draining=True,
            timeout=180,
            now=NOW,
            workload=CANNOT,
            options=DrainOptions(delete_emptydir_data=True),
        ).action
        is Action.EVICT
    )
    # An owner that moves the pod itself is still asked: its surge is its own choice to make.
    answering = pod(empty_dir=True, conditions=REQUESTED)
    assert plan_pod(answering, draining=True, timeout=180, now=NOW, workload=WILL).action is Action.WAIT
    late = pod(empty_dir=True, conditions=[cond("EvacuationRequest", "True", ago=200)])
    assert plan_pod(late, draining=True, timeout=180, now=NOW, workload=WILL).action is Action.BLOCK


def test_pod_selector_narrows_the_drain_and_withdraws_from_the_rest() -> None:
    only_db = DrainOptions(pod_selector=parse("app=db"))
    assert (
        plan_pod(pod(labels={"app": "web"}), draining=True, timeout=180, now=NOW, options=only_db).action
        is Action.NONE
    )
    ours = [cond("EvacuationRequest", "True")]
    assert (
        plan_pod(
            pod(labels={"app": "web"}, conditions=ours), draining=True, timeout=180, now=NOW, options=only_db
        ).action
        is Action.WITHDRAW
    )
    assert (
        plan_pod(pod(labels={"app": "db"}), draining=True, timeout=180, now=NOW, options=only_db).action
        is Action.REQUEST
    )


def test_overlapping_maintenances_lose_data_only_if_all_allow_it() -> None:
    assert not combine([DrainOptions(force=True), DrainOptions()]).force
    assert combine([DrainOptions(force=True, delete_emptydir_data=True)] * 2).delete_emptydir_data
    assert (
        combine(
            [DrainOptions(grace_period_seconds=5), DrainOptions(grace_period_seconds=30)]
        ).grace_period_seconds
        == 30
    )
    assert combine([DrainOptions(grace_period_seconds=5), DrainOptions()]).grace_period_seconds is None
    assert combine_timeouts([0, 60, 180]) == 60
    assert combine_timeouts([0]) == 0


def test_huge_timeouts_do_not_overflow() -> None:
    huge = Workload(Answer.MAY, "Widget w", timeout=float(2**62))
    p = plan_pod(pod(conditions=REQUESTED), draining=True, timeout=180, now=NOW, workload=huge)
    assert p.action is Action.WAIT and p.deadline is not None and p.deadline.year == 9999


class DrainFlags(TypedDict):
    """`kubectl drain`'s flags that `kubectl_filter` takes."""

    force: bool
    delete_emptydir_data: bool
    ignore_daemonsets: bool


def test_kubectl_filters_in_kubectls_order() -> None:
    flags: DrainFlags = {"force": False, "delete_emptydir_data": False, "ignore_daemonsets": False}
    ds = kubectl_filter(pod(owner_kind="DaemonSet"), **flags)
    assert (ds.delete, ds.kind, ds.message) == (
        False,
        "Error",
        "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)",
    )
    ignored = kubectl_filter(pod(owner_kind="DaemonSet"), **(flags | {"ignore_daemonsets": True}))
    assert (ignored.delete, ignored.kind, ignored.message) == (
        False,
        "Warning",
        "ignoring DaemonSet-managed Pods",
    )
    orphan_error = 'daemonsets.apps "d" not found'
    assert not kubectl_filter(pod(owner_kind="DaemonSet"), **flags, daemonset_error=orphan_error).delete
    assert kubectl_filter(
        pod(owner_kind="DaemonSet"), **(flags | {"force": True}), daemonset_error=orphan_error
    ).delete
    assert kubectl_filter(pod(mirror=True, owner_kind=None), **flags).kind == "Skip"
    # Local storage is checked before the controller, and the first refusal is the one reported.
    both = kubectl_filter(pod(owner_kind=None, empty_dir=True), **flags)
    assert both.message == "cannot delete Pods with local storage (use --delete-emptydir-data to override)"
    bare = kubectl_filter(pod(owner_kind=None, empty_dir=True), **(flags | {"delete_emptydir_data": True}))
    assert bare.message == "cannot delete Pods that declare no controller (use --force to override)"
    assert kubectl_filter(pod(owner_kind=None, phase="Succeeded", empty_dir=True), **flags).delete
    assert kubectl_filter(pod(), **flags).kind == "Okay"


def test_preview_names_each_fate() -> None:
    opts = DrainOptions()
    assert preview(pod(), options=opts, workload=WILL, timeout=180).verb == "surge"
    assert preview(pod(owner_kind="StatefulSet"), options=opts, workload=CANNOT, timeout=180).verb == "evict"
    assert preview(pod(owner_kind=None), options=opts, workload=NOBODY, timeout=180).verb == "block"
    assert preview(pod(owner_kind="DaemonSet"), options=opts, workload=NOBODY, timeout=180).verb == "skip"
    waits = preview(pod(), options=opts, workload=Workload(Answer.MAY, "Widget w"), timeout=180)
    assert waits.verb == "wait" and "180s" in waits.why


def test_request_then_wait_then_evict_after_the_timeout() -> None:
    assert plan(pod()) is Action.REQUEST
    waiting = plan_pod(
        pod(conditions=[cond("EvacuationRequest", "True", ago=60)]), draining=True, timeout=180, now=NOW
    )
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
