"""What the responder does next for one Eviction: a pure function of the caches.

While its target responder is Active and it has not completed:
- a target that is gone (deleted, or another pod under its name) or terminal completes it:
  "replacement available; pod removed" when the workload has its replicas available without the
  pod, which is how the surge ends (the ReplicaSet removes the pod once its replacement is
  available), otherwise just "pod removed";
- a pod it cannot serve completes it at once with the reason, so the next responder goes: no
  ReplicaSet controls it (or the cache does not have it), another kind controls that ReplicaSet,
  the Deployment cannot surge (`Recreate`, `maxSurge` 0) or either is being deleted;
- a pod with no evacuation request gets ours (*mark*); one that already has someone else's (a
  NodeMaintenance's) is followed as it is, since the surge it starts is the same one;
- the surge answering `EvacuationInitiated=False` after the request (the replacement surge
  giving up: no room under `maxSurge` in time, no replacement available in time) completes it,
  saying why, and nobody answering within `answer_timeout` does too (a ReplicaSet nobody in this
  cluster surges for: in-controller, one without a Deployment);
- otherwise it heartbeats with the progress, "surging a replacement (1/1 within maxSurge)": pods
  the workload runs above its replicas, out of what it may.
Whenever it is no longer Active or has completed, its own request is withdrawn (*withdraw*): the
surge machinery then deletes a replacement not yet handed over and puts the pod's deletion cost
back. Canceled (every requester withdrew), it also leaves a last message saying so.

Reports are written when the message changes, when the last heartbeat is `heartbeat_interval`
old (3 minutes, well inside the API's 20-minute deadline and above its 20-second floor), and on
completion. While a surge is under way the plan asks to be woken every `progress_refresh` to
update the count, which only reads the caches unless it changed.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from controllers.common.controller_ref import get_controller_of
from controllers.common.deploymentstrategy import is_rolling_update, max_surge, replicas
from controllers.common.evacuation import EVACUATION_INITIATED, EVACUATION_REQUEST
from controllers.common.pods import get_pod_condition, is_pod_active, is_pod_available, is_pod_terminal
from controllers.evictionresponder.marks import requested_by_us
from controllers.evictionresponder.registration import RESPONDER_NAME
from controllers.evictionresponder.status import Entry, entry_of, target_pod
from evictionapi import names
from kubeutil.timestamps import parse_time

Obj = Mapping[str, Any]

HEARTBEAT_INTERVAL: Final = 180.0
PROGRESS_REFRESH: Final = 10.0
ANSWER_TIMEOUT: Final = 120.0
# A ReplicaSet with no Deployment surges one pod at a time (the replacement surge's budget for it).
BARE_REPLICASET_SURGE: Final = 1

MESSAGE_REQUESTED: Final = "evacuation requested; waiting for the owner to answer"
MESSAGE_DONE: Final = "replacement available; pod removed"
MESSAGE_GONE: Final = "pod removed"
MESSAGE_CANCELED: Final = "eviction canceled: the evacuation request is withdrawn and the surge undone"
HANDOVER: Final = "the next responder takes over"


class Step(enum.Enum):
    MARK = "mark"  # our EvacuationRequest on the pod
    WITHDRAW = "withdraw"  # our EvacuationRequest removed
    REPORT = "report"  # message and heartbeat on the Eviction
    COMPLETE = "complete"  # message, heartbeat and completionTime
    FINAL_MESSAGE = "final-message"  # the message only, after a cancellation


@dataclass(frozen=True, slots=True)
class Facts:
    """What the caches say about one Eviction's target; `pod` only when its uid is the target's."""

    eviction: Obj
    pod: Obj | None
    replica_set: Obj | None = None  # the pod's controller, if a ReplicaSet in the cache (once the
    # pod is gone: the one it had, when the sync remembers it)
    deployment: Obj | None = None  # that ReplicaSet's controller, if a Deployment in the cache
    workload_pods: Sequence[Obj] = ()  # every pod of the workload's ReplicaSets and their copies


@dataclass(slots=True)
class Plan:
    steps: list[Step] = field(default_factory=list)
    message: str = ""
    requeue_after: float | None = None
    entry: Entry | None = None

    def wake_in(self, seconds: float) -> None:
        seconds = max(seconds, 1.0)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _owner_kind(obj: Obj) -> str:
    ref = get_controller_of(obj)
    return str(ref.get("kind", "")) if ref is not None else ""


def cannot_serve(pod: Obj, replica_set: Obj | None, deployment: Obj | None) -> str | None:
    """Why the surge cannot replace `pod` before it goes; None when it can."""
    kind = _owner_kind(pod)
    if kind != "ReplicaSet":
        return "the pod has no ReplicaSet to replace it" + (f" (its controller is a {kind})" if kind else "")
    if replica_set is None:
        return "the pod's ReplicaSet is not known (yet)"
    rs_owner = _owner_kind(replica_set)
    if rs_owner and rs_owner != "Deployment":
        return f"its ReplicaSet is controlled by a {rs_owner}, which is not surged for"
    if rs_owner and deployment is None:
        return "its ReplicaSet's Deployment is not known (yet)"
    for owner in (replica_set, deployment):
        if owner is not None and _meta(owner).get("deletionTimestamp"):
            return f"its {owner.get('kind') or 'owner'} is being deleted"
    if deployment is not None:
        if not is_rolling_update(deployment):
            return "its Deployment uses the Recreate strategy, which cannot surge"
        if max_surge(deployment) <= 0:
            return "its Deployment's maxSurge is 0"
    return None


def surge_budget(replica_set: Obj, deployment: Obj | None) -> tuple[int, int]:
    """(desired replicas, pods it may run above them) of the workload the pod belongs to."""
    if deployment is not None:
        return replicas(deployment), max_surge(deployment)
    return replicas(replica_set), BARE_REPLICASET_SURGE


def _min_ready(owner: Obj) -> int:
    try:
        return max(0, int((owner.get("spec") or {}).get("minReadySeconds") or 0))
    except (TypeError, ValueError):
        return 0


def _answer(pod: Obj) -> tuple[str, str, datetime | None] | None:
    """The `EvacuationInitiated` answer given after the current request: (status, message, when)."""
    request = get_pod_condition(pod, EVACUATION_REQUEST)
    answer = get_pod_condition(pod, EVACUATION_INITIATED)
    if request is None or answer is None:
        return None
    asked, said = parse_time(request.get("lastTransitionTime")), parse_time(answer.get("lastTransitionTime"))
    if asked is not None and said is not None and said < asked:
        return None  # an answer to an earlier request
    return str(answer.get("status") or ""), str(answer.get("message") or ""), said


def plan(facts: Facts, *, now: datetime, answer_timeout: float = ANSWER_TIMEOUT) -> Plan:
    """The responder's next writes for `facts.eviction` (see the module docstring), in order."""
    out = Plan(entry=entry_of(facts.eviction, RESPONDER_NAME))
    entry, pod = out.entry, facts.pod
    ours = pod is not None and requested_by_us(pod)
    if entry is None:
        return out
    working = entry.state == names.STATE_ACTIVE and entry.status is not None and not entry.completed
    if not working:
        if ours:
            out.steps.append(Step.WITHDRAW)
        if (
            entry.state == names.STATE_CANCELED
            and entry.status is not None
            and entry.started is not None
            and not entry.completed
            and entry.message != MESSAGE_CANCELED
        ):
            out.steps.append(Step.FINAL_MESSAGE)
            out.message = MESSAGE_CANCELED
        return out

    name, _uid = target_pod(facts.eviction)
    if pod is None or is_pod_terminal(pod):
        out.message = MESSAGE_DONE if _replaced(facts, now) else MESSAGE_GONE
        if pod is not None:
            out.message += f" (phase {(pod.get('status') or {}).get('phase')})"
        return _complete(out, ours)
    if _meta(pod).get("deletionTimestamp"):
        return _report(out, entry, f"pod {name} is terminating", now)

    why = cannot_serve(pod, facts.replica_set, facts.deployment)
    if why is not None:
        out.message = f"cannot surge a replacement: {why}; {HANDOVER}"
        return _complete(out, ours)
    request = get_pod_condition(pod, EVACUATION_REQUEST)
    if request is None or request.get("status") != "True":
        out.steps.append(Step.MARK)
        return _report(out, entry, MESSAGE_REQUESTED, now, force=True)

    answer = _answer(pod)
    if answer is not None and answer[0] == "False":
        out.message = f"the surge gave up: {answer[1] or 'no reason given'}; {HANDOVER}"
        return _complete(out, ours)
    if answer is None or answer[0] != "True":
        asked = parse_time(request.get("lastTransitionTime")) or now
        waited = (now - asked).total_seconds()
        if waited >= answer_timeout:
            out.message = f"nobody answered the evacuation request within {answer_timeout:g}s; {HANDOVER}"
            return _complete(out, ours)
        out.wake_in(answer_timeout - waited)
        return _report(out, entry, MESSAGE_REQUESTED, now)

    assert facts.replica_set is not None  # cannot_serve checked it
    desired, limit = surge_budget(facts.replica_set, facts.deployment)
    active = [p for p in facts.workload_pods if is_pod_active(p)]
    in_use = max(0, len(active) - desired)
    message = f"surging a replacement ({min(in_use, limit)}/{limit} within maxSurge)"
    if _replaced(facts, now):
        message = "replacement available; waiting for the ReplicaSet to remove the pod"
    out.wake_in(PROGRESS_REFRESH)
    return _report(out, entry, message, now)


def _replaced(facts: Facts, now: datetime) -> bool:
    """The workload has its replicas available without the target pod."""
    if facts.replica_set is None:
        return False
    owner = facts.deployment if facts.deployment is not None else facts.replica_set
    desired, _ = surge_budget(facts.replica_set, facts.deployment)
    _name, target_uid = target_pod(facts.eviction)
    min_ready = _min_ready(owner)
    available = sum(
        1
        for p in facts.workload_pods
        if _meta(p).get("uid") != target_uid and is_pod_active(p) and is_pod_available(p, min_ready, now)
    )
    return desired > 0 and available >= desired


def _complete(out: Plan, ours: bool) -> Plan:
    """Complete with `out.message`, then take our request back (the mark lives only while we work)."""
    out.steps.append(Step.COMPLETE)
    if ours:
        out.steps.append(Step.WITHDRAW)
    return out


def _report(out: Plan, entry: Entry, message: str, now: datetime, *, force: bool = False) -> Plan:
    """Report `message` when it changed or a heartbeat is due; wake for the next heartbeat."""
    out.message = message
    last = entry.heartbeat or entry.started
    since = (now - last).total_seconds() if last is not None else None
    due = entry.heartbeat is None or since is None or since >= HEARTBEAT_INTERVAL - 1.0
    if force or due or entry.message != message:
        out.steps.append(Step.REPORT)
        out.wake_in(HEARTBEAT_INTERVAL)
    else:
        out.wake_in(HEARTBEAT_INTERVAL - (since or 0.0))
    return out
