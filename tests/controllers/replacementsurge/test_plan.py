"""The surge planner, case by case, as a table: what the caches hold -> the writes, in order.

Actions are written `<step> <object>`: the departing pod's name, or the copy's (`copy-<pod>`) for
ADOPT and DELETE_COPY; a MARK reads `mark@<rank>` (`mark@0`: the lowest int32), an ANSWER that
marks in the same write `answer+mark@<rank>`. A ReplicaSet's other pods, the ones staying, carry
no cost (0).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controllers.replacementsurge.copies import DEPARTING_COST, LOWEST_COST, cost_rank, rank_cost
from controllers.replacementsurge.plan import (
    ADOPTION_GRACE,
    Account,
    Plan,
    Step,
    plan,
    surge_limit_of_deployment,
)
from tests.controllers.replacementsurge.helpers import NOW, account, copy_of, deployment_rs, pod
from tests.support.objects import Obj, deployment

TIMEOUT = 600.0


def answered(name: str, *, cost: str = DEPARTING_COST, node: str = "node-1", requested: float = 10) -> Obj:
    """A departing pod past the first two steps: marked and answered `EvacuationInitiated=True`."""
    return pod(name, node=node, requested=requested, initiated=("True", 9), cost=cost, previous_cost="")


def adopted_copy(replaced_uid: str, seconds_ago: float) -> Obj:
    """A copy the ReplicaSet adopted `seconds_ago`: one of its pods, remembering whom it replaced."""
    return pod(f"adopted-{replaced_uid}", node="node-2", requested=None, replaced=(replaced_uid, seconds_ago))


def render(out: Plan) -> list[str]:
    rendered = []
    for action in out.actions:
        name = str(action.pod["metadata"]["name"])
        if name.startswith("web-abc-") and name.endswith("-copy"):
            name = "copy-" + name.removeprefix("web-abc-").removesuffix("-copy")
        step = action.step.value
        mark = f"mark@{cost_rank(action.cost)}"
        if action.step is Step.MARK:
            step = mark
        elif action.step is Step.ANSWER and action.mark:
            step = f"answer+{mark}"
        rendered.append(f"{step} {name}")
    return rendered


@dataclass(frozen=True)
class Want:
    actions: list[str]
    waiting: int = 0
    requeue: float | None = None


A, B = pod("a"), pod("b")
STAYING = pod("s", requested=None)  # a pod of the same ReplicaSet nobody asked to leave
CASES: dict[str, tuple[Account, Want]] = {
    # -- the first steps, and the shared budget
    "asked, nothing done yet, alone in leaving its ReplicaSet: answered at the lowest cost, create":
        (account([A, pod("b", requested=None), pod("c", requested=None)]),
         Want(["answer+mark@0 a", "create a"])),
    "two asked from one ReplicaSet: ranked in the order asked (then by name), one write each":
        (account([A, B]), Want(["answer+mark@0 a", "create a", "answer+mark@1 b"],
                               waiting=1, requeue=TIMEOUT - 10)),
    "one leaving already (marked), a second asked: the second gets the next rank":
        (account([answered("a", cost=LOWEST_COST), B], [copy_of(A, ready=False)]),
         Want(["answer+mark@1 b"], waiting=1, requeue=TIMEOUT - 30)),
    "a third asked gets the rank above the highest in use, whatever its name":
        (account([answered("b", cost=LOWEST_COST), answered("c"), A], [copy_of(B, ready=False)]),
         Want(["answer+mark@2 a"], waiting=2, requeue=TIMEOUT - 30)),
    "room goes in rank order, not by name":
        (account([answered("a", cost=rank_cost(1)), answered("b", cost=LOWEST_COST), STAYING]),
         Want(["create b"], waiting=1, requeue=TIMEOUT - 10)),
    "a copy ready out of turn: its pod to the lowest, ours there raised above the highest rank":
        (account([answered("a", cost=LOWEST_COST), answered("b"), STAYING],
                 [copy_of(A, ready=False), copy_of(B)], surge=2),
         Want(["mark@2 a", "mark@0 b", "adopt copy-b"], requeue=TIMEOUT - 30)),
    "two handed over together, both below every other pod: adopted with no cost written":
        (account([answered("a"), answered("b"), STAYING], [copy_of(A), copy_of(B)], surge=2),
         Want(["adopt copy-a", "adopt copy-b"])),
    "marked and answered already: only the create": (account([answered("a")]), Want(["create a"])),
    "maxSurge 1 is one budget for every departing pod of the account (any node)":
        (account([answered("c"), answered("a", node="node-3"), answered("b")]),
         Want(["create a"], waiting=2, requeue=TIMEOUT - 10)),
    "maxSurge 2: two creates, the rest waits":
        (account([answered("a"), answered("b"), answered("c")], surge=2),
         Want(["create a", "create b"], waiting=1, requeue=TIMEOUT - 10)),
    "a rollout using its whole surge leaves no room":
        (account([answered("a")], replica_sets=[deployment_rs(replicas=3),
                                                deployment_rs("web-old", uid="rs-old", replicas=1)]),
         Want([], waiting=1, requeue=TIMEOUT - 10)),
    "a rollout using one of two leaves one":
        (account([answered("a"), answered("b")], surge=2,
                 replica_sets=[deployment_rs(replicas=2), deployment_rs("web-old", uid="rs-old", replicas=2)]),
         Want(["create a"], waiting=1, requeue=TIMEOUT - 10)),
    "a scaled-down ReplicaSet below desired gives no extra room":
        (account([answered("a"), answered("b")], replica_sets=[deployment_rs(replicas=2)]),
         Want(["create a"], waiting=1, requeue=TIMEOUT - 10)),
    "a copy in flight counts against the budget":
        (account([answered("a"), answered("b")], [copy_of(A, ready=False)]),
         Want([], waiting=1, requeue=TIMEOUT - 30)),
    "an adopted copy whose departing pod is still there counts against the budget":
        (account([answered("a", cost=LOWEST_COST), answered("b"), adopted_copy("uid-a", 5)]),
         Want([], waiting=1, requeue=ADOPTION_GRACE - 5)),
    "an adopted copy whose departing pod is gone frees its room":
        (account([answered("b"), adopted_copy("uid-gone", 5)]), Want(["create b"])),
    "a terminating copy is not counted (nor adopted)":
        (account([answered("a")], [copy_of(A, terminating=True)]), Want(["create a"])),
    "no surge at all (Recreate, maxSurge 0, owner deleted): not answered, the drain evicts at once":
        (account([A], surge=0), Want([])),
    "answered, then the budget went to 0 before a copy: given back at once":
        (account([answered("a")], surge=0), Want(["give-up a"])),
    "the budget went to 0 with a copy in flight: the hand-over goes on":
        (account([answered("a"), STAYING], [copy_of(A)], surge=0), Want(["adopt copy-a"])),
    "a pod waiting for room past the surge timeout is given back to the drain":
        (account([answered("a"), answered("b", requested=TIMEOUT)]), Want(["create a", "give-up b"])),
    "room, but no copy created within the surge timeout (the API refused them): given back":
        (account([answered("a", requested=TIMEOUT)]), Want(["give-up a"])),
    # -- the hand-over
    "copy available on another node, its pod the lowest of its ReplicaSet (the one before it gone): adopt":
        (account([answered("a", cost=rank_cost(1)), STAYING], [copy_of(A)]), Want(["adopt copy-a"])),
    "copy available, its pod not below every other (someone lowered another's cost): lowest first":
        (account([answered("a", cost=rank_cost(3)), pod("s", requested=None, cost=rank_cost(1))], [copy_of(A)]),
         Want(["mark@0 a", "adopt copy-a"])),
    "lowest cost already: adopt only":
        (account([answered("a", cost=LOWEST_COST)], [copy_of(A)]), Want(["adopt copy-a"])),
    "copy not ready: wait until the timeout":
        (account([answered("a")], [copy_of(A, ready=False)]), Want([], requeue=TIMEOUT - 30)),
    "copy not scheduled yet: wait":
        (account([answered("a")], [copy_of(A, node=None, ready=None)]), Want([], requeue=TIMEOUT - 30)),
    "copy ready but not minReadySeconds: wait until it is available":
        (account([answered("a")], [copy_of(A, ready_for=5)], min_ready=30), Want([], requeue=25.05)),
    "copy ready exactly minReadySeconds: not available yet":
        (account([answered("a")], [copy_of(A, ready_for=30)], min_ready=30), Want([], requeue=0.05)),
    "copy available past minReadySeconds: handed over":
        (account([answered("a"), STAYING], [copy_of(A, ready_for=31)], min_ready=30),
         Want(["adopt copy-a"])),
    "a tie with another departing pod: only the pod whose copy is available goes to the lowest":
        (account([answered("a"), answered("b")], [copy_of(A, ready=False), copy_of(B)], surge=2),
         Want(["mark@0 b", "adopt copy-b"], requeue=TIMEOUT - 30)),
    # -- what goes wrong is given back
    "copy not available within the surge timeout: deleted, pod given back":
        (account([answered("a")], [copy_of(A, ready=False, age=TIMEOUT)]),
         Want(["delete-copy copy-a", "give-up a"])),
    "copy scheduled onto the departing pod's own node: deleted, pod given back":
        (account([answered("a")], [copy_of(A, node="node-1", age=5)]),
         Want(["delete-copy copy-a", "give-up a"])),
    "a pod-level eviction (an EvictionRequest, its node not drained): a copy on its node is fine":
        (account([pod("a", reason="EvictionRequest", initiated=("True", 9), cost=DEPARTING_COST, previous_cost="")],
                 [copy_of(A, node="node-1")]),
         Want(["adopt copy-a"])),
    "adopted, both still there past the grace (the ReplicaSet above its replicas): given back":
        (account([answered("a", cost=LOWEST_COST), adopted_copy("uid-a", ADOPTION_GRACE + 1)], desired=1),
         Want(["give-up a"])),
    "adopted, departing pod still there within the grace: wait":
        (account([answered("a", cost=LOWEST_COST), adopted_copy("uid-a", 5)], desired=1),
         Want([], requeue=ADOPTION_GRACE - 5)),
    # -- withdrawn, declined, not ours
    "request withdrawn (condition gone): copy deleted, cost restored":
        (account([pod("a", requested=None, initiated=("True", 9), cost=DEPARTING_COST, previous_cost="")],
                 [copy_of(A, ready=False)]),
         Want(["delete-copy copy-a", "restore a"])),
    "request withdrawn (condition False) after the hand-over began":
        (account([pod("a", request_status="False", cost=LOWEST_COST, previous_cost="7")], [copy_of(A)]),
         Want(["delete-copy copy-a", "restore a"])),
    "a withdrawn copy frees its room for another pod":
        (account([pod("a", requested=None, cost=DEPARTING_COST, previous_cost=""), answered("b")],
                 [copy_of(A, ready=False)]),
         Want(["create b", "delete-copy copy-a", "restore a"])),
    "a copy whose pod is gone is deleted": (account([], [copy_of(pod("gone"))]), Want(["delete-copy copy-gone"])),
    "answered False after its request: left to the drain":
        (account([pod("a", requested=20, initiated=("False", 10), cost=DEPARTING_COST, previous_cost="")]),
         Want([])),
    "answered False, its copy is deleted and nothing else":
        (account([pod("a", requested=20, initiated=("False", 10))], [copy_of(A, ready=False)]),
         Want(["delete-copy copy-a"])),
    "answered False before a newer request: taken again":
        (account([pod("a", requested=5, initiated=("False", 10), cost=DEPARTING_COST, previous_cost="")]),
         Want(["answer a", "create a"])),
    "an in-controller responder's ReplicaSet (evacuation-ready) is not ours":
        (account([A], replica_sets=[deployment_rs(evacuation_ready=True)]), Want([])),
    "a pod of a ReplicaSet outside the account is not ours": (account([pod("a", rs_uid="other")]), Want([])),
    "a terminating departing pod is ignored, its mark too":
        (account([pod("a", terminating=True, cost=DEPARTING_COST, previous_cost="")]), Want([])),
    "a pod never asked and never marked: nothing": (account([pod("a", requested=None)]), Want([])),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_plan_table(name: str) -> None:
    acct, want = CASES[name]
    out = plan(acct, now=NOW, surge_timeout=TIMEOUT)
    assert render(out) == want.actions
    assert out.waiting_for_room == want.waiting
    if want.requeue is None:
        assert out.requeue_after is None
    else:
        assert out.requeue_after == pytest.approx(want.requeue)


def test_actions_carry_the_replicaset_and_the_cost() -> None:
    rs = deployment_rs()
    out = plan(account([A], replica_sets=[rs]), now=NOW, surge_timeout=TIMEOUT)
    answer, create = out.actions
    # alone in leaving: the lowest cost, in the answer's own write
    assert (answer.step, answer.pod, answer.mark, answer.cost) == (Step.ANSWER, A, True, LOWEST_COST)
    two = plan(account([A, B], replica_sets=[rs], surge=2), now=NOW, surge_timeout=TIMEOUT)
    assert [(a.mark, a.cost) for a in two.actions if a.step is Step.ANSWER] == [
        (True, LOWEST_COST),
        (True, DEPARTING_COST),
    ]
    assert (create.step, create.pod, create.replica_set) == (Step.CREATE, A, rs)

    copy = copy_of(A)
    lowest, adopt = plan(
        account([answered("a"), answered("b", cost=LOWEST_COST)], [copy], replica_sets=[rs], surge=2),
        now=NOW,
        surge_timeout=TIMEOUT,
    ).actions[-2:]
    assert (lowest.step, lowest.cost, lowest.pod["metadata"]["name"]) == (Step.MARK, LOWEST_COST, "a")
    assert (adopt.step, adopt.pod, adopt.replica_set) == (Step.ADOPT, copy, rs)


@pytest.mark.parametrize(
    ("copy", "why"),
    [
        (copy_of(A, ready=False, age=TIMEOUT), "no replacement became available on another node within 600s"),
        (copy_of(A, node="node-1"), "the replacement was scheduled onto the departing pod's own node"),
    ],
)
def test_giving_up_says_why(copy: Obj, why: str) -> None:
    delete, give_up = plan(account([answered("a")], [copy]), now=NOW, surge_timeout=TIMEOUT).actions
    assert (delete.step, delete.pod) == (Step.DELETE_COPY, copy)
    assert delete.message == why
    assert give_up.step is Step.GIVE_UP
    assert give_up.message.startswith(why) and "PodDisruptionBudget" in give_up.message


@pytest.mark.parametrize(
    ("strategy", "replicas", "surge"),
    [
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}}, 10, 3),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}, 10, 2),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}}, 2, 1),  # rounded up
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}, 10, 0),
        ({"type": "Recreate"}, 10, 0),
    ],
)
def test_the_budget_is_the_deployments_resolved_max_surge(
    strategy: dict[str, object], replicas: int, surge: int
) -> None:
    d = deployment("web", replicas, strategy=strategy)
    assert surge_limit_of_deployment(d) == surge
    departing = [answered(name) for name in "abcde"]
    out = plan(
        account(departing, desired=replicas, surge=surge_limit_of_deployment(d)),
        now=NOW,
        surge_timeout=TIMEOUT,
    )
    creates = [a.pod["metadata"]["name"] for a in out.actions if a.step is Step.CREATE]
    assert creates == list("abcde"[:surge])
    if surge:
        assert out.waiting_for_room == 5 - surge
    else:  # nothing to wait for: every answered pod goes back to the drain
        assert [a.step for a in out.actions] == [Step.GIVE_UP] * 5
