"""What to do next for one surge account (a Deployment, or a ReplicaSet with none): a pure function.

A pod asked to evacuate (`EvacuationRequest=True`, by a NodeMaintenance or the eviction webhook)
whose ReplicaSet no in-controller responder answers for (no `evacuation-ready` mark), in an
account that may surge at all (`maxSurge` above 0, not being deleted: otherwise the drain evicts
at once, as it does for any owner that cannot surge), is taken through these steps, each one
write (the first two one together), each one resumable after a restart from what the objects
say (`copies.py`):
1. *mark*: a deletion cost below every other pod's, so any scale-down KCM's ReplicaSet
   controller makes (an autoscaler's, a person's) removes departing pods before any other ready
   one: a rank counted up from the lowest int32, in the order the pods of its ReplicaSet were
   asked to leave;
2. *answer*: `EvacuationInitiated=True`, so the drain waits instead of evicting. The first mark
   rides in the answer's write: the pods' status subresource keeps a patch's labels and
   annotations (it resets only the spec and the owner references), so a pod is marked and
   answered in one request;
3. *create*: a copy of the ReplicaSet's template outside its selector, when the account has room
   under `maxSurge` (a Deployment's, resolved as KCM's rolling update does; 1 for a ReplicaSet
   with no Deployment). One account per Deployment, whatever node or maintenance the pods come
   from: every departing pod of it shares one budget, counted from the objects (surge a rollout
   uses, copies not yet adopted, adopted copies whose departing pod is still there);
4. *adopt*: once the copy is available (`minReadySeconds`) on another node (on any node when the
   pod alone was asked to go, by an EvictionRequest, and its node is not being emptied), the copy
   gets its labels back with the ReplicaSet as its controller; KCM's ReplicaSet controller counts
   it as its own and deletes the departing pod, the one pod at the lowest cost. Room goes in rank
   order, so that pod is normally the lowest of its ReplicaSet already; a copy ready out of turn
   (room for several) first takes its pod down to the lowest and raises whichever other pod of
   ours was there (a tie between departing pods would let KCM delete one whose copy is not ready
   yet, and that pod would then go unreplaced).

What goes wrong is given back to the drain, never fought:
- a copy not available within `surge_timeout` is deleted and the pod answered
  `EvacuationInitiated=False`: the drain evicts it under its PodDisruptionBudget; so is a pod
  that found no room under `maxSurge` within `surge_timeout` of its request (a rollout stuck with
  its surge in use would otherwise hold the drain forever), or whose copy the API kept refusing
  (a ResourceQuota, an admission policy: each refusal is a `FailedCreateReplacement` event);
- a departing pod still there `ADOPTION_GRACE` after its copy was adopted is surged for again when
  the ReplicaSet is not above its `replicas` (someone scaled up meanwhile: it needed both pods),
  and otherwise (it deleted another pod: one not ready ranks first) answered False the same way;
- a request withdrawn (the maintenance cancelled, the drainer gone) deletes the copy not yet
  adopted and puts the pod's own deletion cost back; a copy whose pod is gone is deleted (the
  ReplicaSet makes its own replacement).

Why a copy adopted by the ReplicaSet, and not a raised `replicas` through `scale`: nothing that an
autoscaler, a GitOps tool or a person owns is written. A HorizontalPodAutoscaler's next sync, a
user scaling during the surge and a GitOps revert all find `replicas` as they left it, so there
is no stale number to write back and no fight to lose; a paused Deployment's ReplicaSets still
adopt; mid-rollout the copy is made from the departing pod's own ReplicaSet (old or new), so it
replaces that pod where the rollout expects it, and the rollout's own surge counts against the
same `maxSurge` budget.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controllers.common.controller_ref import get_controller_of
from controllers.common.deploymentstrategy import max_surge
from controllers.common.evacuation import (
    EVACUATION_INITIATED,
    EVACUATION_REQUEST,
    has_evacuation_request,
    is_evacuation_ready,
    pod_level_request,
)
from controllers.common.pods import (
    deletion_cost,
    get_pod_condition,
    is_pod_active,
    is_pod_available,
    node_name,
    seconds_until_available,
)
from controllers.replacementsurge.copies import (
    DEPARTING_COST,
    LOWEST_COST,
    RANKS,
    is_marked,
    marked_cost,
    marked_rank,
    rank_cost,
    replaced,
    replaces,
    uid,
)
from kubeutil.timestamps import parse_time

Obj = Mapping[str, Any]

# How long a departing pod may outlive the adoption of its copy before the drain is told to evict
# it: KCM's ReplicaSet controller deletes in the sync that adopts, so seconds are plenty.
ADOPTION_GRACE = 15.0


class Step(enum.Enum):
    MARK = "mark"
    ANSWER = "answer"
    CREATE = "create"
    ADOPT = "adopt"
    GIVE_UP = "give-up"  # answer EvacuationInitiated=False: the drain evicts under the PDB
    RELEASE = "release"  # an adopted copy no longer stands for its pod (the ReplicaSet kept both)
    DELETE_COPY = "delete-copy"
    RESTORE = "restore"


@dataclass(frozen=True, slots=True)
class Action:
    step: Step
    pod: Obj  # the departing pod, or the copy for ADOPT / DELETE_COPY
    replica_set: Obj | None = None
    message: str = ""
    cost: str = DEPARTING_COST  # MARK, and ANSWER with `mark`: the deletion cost to give
    mark: bool = False  # ANSWER: give `cost` in the same write


@dataclass(frozen=True, slots=True)
class Account:
    """One surge budget: its owner, its ReplicaSets and their pods, as the caches hold them."""

    owner: Obj  # the Deployment, or the ReplicaSet with no Deployment
    replica_sets: Sequence[Obj]
    pods: Sequence[Obj]  # pods controlled by the ReplicaSets (active or not)
    copies: Sequence[Obj]  # copies owned by the ReplicaSets: labelled, or handed over and not adopted yet
    desired: int
    surge_limit: int  # pods the account may run above `desired`
    min_ready_seconds: int = 0


@dataclass(slots=True)
class Plan:
    actions: list[Action] = field(default_factory=list)
    requeue_after: float | None = None
    waiting_for_room: int = 0  # departing pods with no copy yet because the budget is spent

    def wake_in(self, seconds: float) -> None:
        seconds = max(seconds, 0.05)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)


def _rs_replicas(rs: Obj) -> int:
    value = (rs.get("spec") or {}).get("replicas")
    try:
        return 1 if value is None else max(0, int(value))
    except (TypeError, ValueError):
        return 0


def _owned_count(rs: Obj, active: Sequence[Obj]) -> int:
    """Active pods `rs` controls, as its controller counts them against `replicas`."""
    rs_uid = uid(rs)
    return sum(1 for p in active if (get_controller_of(p) or {}).get("uid") == rs_uid)


def answered_false(pod: Obj) -> bool:
    """The pod was answered `EvacuationInitiated=False` after its current request: left to the drain."""
    request = get_pod_condition(pod, EVACUATION_REQUEST)
    answer = get_pod_condition(pod, EVACUATION_INITIATED)
    if request is None or answer is None or answer.get("status") != "False":
        return False
    asked, said = parse_time(request.get("lastTransitionTime")), parse_time(answer.get("lastTransitionTime"))
    return asked is not None and said is not None and said >= asked


def _initiated(pod: Obj) -> bool:
    cond = get_pod_condition(pod, EVACUATION_INITIATED)
    return cond is not None and cond.get("status") == "True"


def _requested_at(pod: Obj) -> datetime | None:
    request = get_pod_condition(pod, EVACUATION_REQUEST)
    return parse_time((request or {}).get("lastTransitionTime"))


def _created_at(pod: Obj) -> datetime | None:
    return parse_time((pod.get("metadata") or {}).get("creationTimestamp"))


def plan(account: Account, *, now: datetime, surge_timeout: float) -> Plan:
    """The next writes for `account` (see the module docstring), in the order they must happen."""
    out = Plan()
    by_uid = {uid(rs): rs for rs in account.replica_sets}
    answering = {u for u, rs in by_uid.items() if not is_evacuation_ready(rs)}

    def rs_of(pod: Obj) -> Obj | None:
        ref = get_controller_of(pod)
        return by_uid.get(str(ref.get("uid", ""))) if ref is not None else None

    active = [p for p in account.pods if is_pod_active(p)]
    departing = sorted(
        (
            p for p in active
            if has_evacuation_request(p) and (rs := rs_of(p)) is not None and uid(rs) in answering
            and not answered_false(p)
        ),
        key=lambda p: str((p.get("metadata") or {}).get("name", "")),
    )  # fmt: skip
    departing_uids = {uid(p) for p in departing}
    active_uids = {uid(p) for p in active}
    copies = {replaces(c): c for c in account.copies if is_pod_active(c) and replaces(c)}
    # Handed over: its ReplicaSet's own pods once adopted (the hand-over writes the controller
    # reference with the labels), and a copy without the `replacement-for` label and no controller
    # (handed over by labels alone, left for KCM's adoption: in between it is no copy any more and
    # not yet one of the ReplicaSet's pods, and the departing pod would get a second copy).
    handed_over = [c for c in account.copies if is_pod_active(c) and not replaces(c)]
    adopted: dict[str, tuple[Obj, datetime | None]] = {}
    for p in (*active, *handed_over):
        who, when = replaced(p)
        if who and who in active_uids:
            adopted[who] = (p, when)

    def rs_uid_of(pod: Obj) -> str:
        return str((get_controller_of(pod) or {}).get("uid", ""))

    def available_elsewhere(copy: Obj | None, pod: Obj) -> bool:
        """The copy is available where the pod may be replaced: another node, or any node when
        only the pod was asked to go (its node is not being emptied)."""
        where = node_name(copy) if copy is not None else ""
        return (
            copy is not None
            and bool(where)
            and (where != node_name(pod) or pod_level_request(pod))
            and is_pod_available(copy, account.min_ready_seconds, now)
        )

    # Departing pods' costs are ranks per ReplicaSet (`copies.py`): a pod marked now gets the rank
    # above the highest its ReplicaSet's pods hold, and room goes in rank order, so a copy is
    # normally handed over while its pod is the lowest of its ReplicaSet (no write). A ReplicaSet
    # whose hand-overs now are not below every other pod of it (a copy ready out of turn) takes
    # them down to the lowest first, raising above the rest any other pod of ours there: the
    # adoption must find exactly the pods whose copies it adopts at the lowest cost.
    top_rank: dict[str, int] = {}
    for p in active:
        rank = marked_rank(p)
        if rank is not None:
            top_rank[rs_uid_of(p)] = max(top_rank.get(rs_uid_of(p), -1), rank)

    def next_cost(rs_uid: str) -> str:
        top_rank[rs_uid] = top_rank.get(rs_uid, -1) + 1
        return rank_cost(top_rank[rs_uid])

    departing.sort(key=lambda p: RANKS if (rank := marked_rank(p)) is None else rank)  # stable: names next
    handing_over = {uid(p) for p in departing if available_elsewhere(copies.get(uid(p)), p)}
    out_of_turn: set[str] = set()  # ReplicaSets whose hand-overs need the lowest cost written first
    for rs_uid in {rs_uid_of(p) for p in departing if uid(p) in handing_over}:
        mine = [p for p in active if rs_uid_of(p) == rs_uid]
        going = [deletion_cost(p) for p in mine if uid(p) in handing_over]
        staying = [deletion_cost(p) for p in mine if uid(p) not in handing_over and uid(p) not in adopted]
        if staying and max(going) >= min(staying):
            out_of_turn.add(rs_uid)
    raised: set[str] = set()

    in_use = max(0, sum(_rs_replicas(rs) for rs in account.replica_sets) - account.desired)
    in_use += sum(1 for u in copies if u in departing_uids) + len(adopted)
    room = account.surge_limit - in_use

    for pod in departing:
        rs = rs_of(pod)
        if account.surge_limit <= 0 and uid(pod) not in copies and uid(pod) not in adopted:
            # No surge possible: an answer would only hold the drain (`EvacuationInitiated=True`
            # has no deadline there) until `surge_timeout`. One answered before the budget went
            # to 0 is handed back now; a copy already made is still handed over.
            if _initiated(pod):
                out.actions.append(Action(
                    Step.GIVE_UP, pod, rs,
                    "the workload cannot surge (maxSurge 0, Recreate, or being deleted); the pod is "
                    "evicted under its PodDisruptionBudget",
                ))  # fmt: skip
            continue
        pod_uid = uid(pod)
        rs_uid = rs_uid_of(pod)
        wanted: str | None = None  # marked already and in turn: kept until its hand-over
        if pod_uid in handing_over and rs_uid in out_of_turn:
            wanted = LOWEST_COST
            for other in active:
                other_uid = uid(other)
                if (
                    rs_uid_of(other) == rs_uid
                    and marked_cost(other) == LOWEST_COST
                    and other_uid not in handing_over
                    and other_uid not in adopted
                    and other_uid not in raised
                ):
                    raised.add(other_uid)
                    out.actions.append(Action(Step.MARK, other, rs, cost=next_cost(rs_uid)))
        elif not is_marked(pod):
            wanted = next_cost(rs_uid)
        if wanted is not None and marked_cost(pod) != wanted:
            if _initiated(pod):
                out.actions.append(Action(Step.MARK, pod, rs, cost=wanted))
            else:
                out.actions.append(Action(Step.ANSWER, pod, rs, cost=wanted, mark=True))
        elif not _initiated(pod):
            out.actions.append(Action(Step.ANSWER, pod))
        if pod_uid in adopted:
            since = adopted[pod_uid][1] or now
            left = ADOPTION_GRACE - (now - since).total_seconds()
            # Only a copy the ReplicaSet controls is released: one it has not adopted yet (KCM down
            # or behind) would be joined by a new copy every grace period while nobody adopts them.
            taken = get_controller_of(adopted[pod_uid][0]) is not None
            if left <= 0 and taken and rs is not None and _owned_count(rs, active) <= _rs_replicas(rs):
                # Scaled up meanwhile: the ReplicaSet needed the copy as well as this pod. The copy
                # no longer stands for it, and the next sync surges a new one.
                out.actions.append(Action(Step.RELEASE, adopted[pod_uid][0], rs))
            elif left <= 0:
                out.actions.append(Action(
                    Step.GIVE_UP, pod, rs,
                    ("the ReplicaSet adopted the replacement but kept this pod" if taken else
                     "the ReplicaSet has not adopted the replacement handed to it")
                    + "; it is evicted under its PodDisruptionBudget",
                ))  # fmt: skip
            else:
                out.wake_in(left)
            continue
        copy = copies.get(pod_uid)
        if copy is None:
            asked = _requested_at(pod) or now
            waited = (now - asked).total_seconds()
            if waited >= surge_timeout:
                why = (
                    "no replacement could be created"  # the API refused it: a quota, a policy
                    if room > 0
                    else "no room under maxSurge to start a replacement (a rollout or other departing pods use it)"
                )
                out.actions.append(Action(
                    Step.GIVE_UP, pod, rs,
                    f"{why} within {surge_timeout:g}s; the pod is evicted under its PodDisruptionBudget",
                ))  # fmt: skip
            elif room > 0:
                out.actions.append(Action(Step.CREATE, pod, rs))
                room -= 1
            else:
                out.waiting_for_room += 1
                out.wake_in(surge_timeout - waited)
            continue
        copy_node = node_name(copy)
        if pod_uid in handing_over:
            out.actions.append(Action(Step.ADOPT, copy, rs))  # its lowest cost is set above
            continue
        age = (now - (_created_at(copy) or now)).total_seconds()
        if age >= surge_timeout or (copy_node and copy_node == node_name(pod) and not pod_level_request(pod)):
            why = (
                f"no replacement became available on another node within {surge_timeout:g}s"
                if age >= surge_timeout
                else "the replacement was scheduled onto the departing pod's own node"
            )
            out.actions.append(Action(Step.DELETE_COPY, copy, rs, why))
            out.actions.append(
                Action(Step.GIVE_UP, pod, rs, f"{why}; the pod is evicted under its PodDisruptionBudget")
            )
            continue
        out.wake_in(surge_timeout - age)
        until = seconds_until_available(copy, account.min_ready_seconds, now)
        if until is not None:
            out.wake_in(until + 0.05)

    for pod_uid, copy in copies.items():
        if pod_uid not in departing_uids:
            out.actions.append(Action(Step.DELETE_COPY, copy, None, "the pod it replaces no longer leaves"))
    for pod in active:
        if is_marked(pod) and not has_evacuation_request(pod):
            out.actions.append(Action(Step.RESTORE, pod))
    return out


def surge_limit_of_deployment(deployment: Obj) -> int:
    """Pods a Deployment may run above `replicas` (its resolved `maxSurge`; 0 unless RollingUpdate)."""
    return max_surge(deployment)


def is_deleting(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))
