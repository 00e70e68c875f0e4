"""The EvictionRequest mode, without a cluster: the verdict with the API's objects in the facts,
the request the webhook writes, the plan that asks, follows and withdraws, and the flag."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from controller_manager.options import UsageError, parse_run_args
from controller_manager.registry import default_registry
from controllers.evictionsurge.config import REQUESTS_EVICTION_REQUEST, EvictionSurgeConfig
from controllers.evictionsurge.decision import Facts, Why, decide
from controllers.evictionsurge.evictionrequests import REQUESTER, Plan, Step, name_for, plan
from evictionapi import names
from evictionapi.requester import new_request
from evictionapi.served import AIOKCM, BUILTIN
from tests.controllers.evictionsurge.test_decision import NOW, TIMEOUT, deployment, pod, rs

Obj = dict[str, Any]
TARGET = pod("a")
NAME = name_for(TARGET)


def request(intent: str = names.INTENT_EVICTION, *, failed: bool = False, requester: str = REQUESTER) -> Obj:
    body = new_request(AIOKCM, TARGET, requester, intent=intent)
    if failed:
        body["status"] = {
            "conditions": [
                {
                    "type": names.CONDITION_FAILED,
                    "status": "True",
                    "reason": "NoFurtherResponder",
                    "message": "x",
                }
            ]
        }
    return body


def eviction(active: str | None) -> Obj:
    responders = [("surge.aiokcm.io/replicaset", 10000), (names.IMPERATIVE_EVICTOR, 100)]
    return {
        "metadata": {"name": "pod-1-a", "namespace": "ns"},
        "spec": {"target": {"pod": {"name": "a", "uid": "uid-a"}}},
        "status": {
            "targetResponders": [
                {
                    "name": n,
                    "priority": p,
                    "state": names.STATE_ACTIVE if n == active else names.STATE_INACTIVE,
                }
                for n, p in responders
            ]
        },
    }


def facts(target: Obj = TARGET, *, req: Obj | None = None, ev: Obj | None = None) -> Facts:
    return Facts(target, rs(), deployment(1), [target], request_name=NAME, request=req, eviction=ev)


SURGE = "surge.aiokcm.io/replicaset"
CASES: dict[str, tuple[Facts, bool, Why, bool, bool]] = {
    # name: (facts, allowed, why, asks, names the request in the denial)
    "nothing asked yet: held back, asked, named": (facts(), False, Why.SURGING, True, True),
    "our request asks, no responder has marked the pod yet: held back, not asked again":
        (facts(req=request()), False, Why.SURGING, False, True),
    "our request asks and the surge responder marked the pod":
        (facts(pod("a", request=("EvictionRequest", 5)), req=request(), ev=eviction(SURGE)),
         False, Why.SURGING, False, True),
    "our request withdrawn earlier: asked again": (facts(req=request(names.INTENT_WITHDRAWN)), False, Why.SURGING, True, True),
    "a NodeMaintenance's evacuation under way: held back, nothing of ours to name":
        (facts(pod("a", request=("NodeMaintenance", 5))), False, Why.SURGING, False, False),
    "our request failed: the budget decides":
        (facts(req=request(failed=True)), True, Why.RESPONDERS_DONE, False, False),
    "the Eviction reached the imperative evictor: its eviction passes":
        (facts(req=request(), ev=eviction(names.IMPERATIVE_EVICTOR)), True, Why.RESPONDERS_DONE, False, False),
    "the surge out of time, marked by the responder": (
        facts(pod("a", request=("EvictionRequest", TIMEOUT + 1)), req=request()),
        True, Why.SURGE_TIMED_OUT, False, False,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_decision_in_the_eviction_request_mode(case: str) -> None:
    given, allowed, why, asks, named = CASES[case]
    decision = decide(given, now=NOW, surge_timeout=TIMEOUT)
    assert (decision.allowed, decision.why, decision.request) == (allowed, why, asks)
    assert (f"kubectl get evictionrequest -n ns {NAME}" in decision.message) is named
    if why is Why.RESPONDERS_DONE:
        assert "PodDisruptionBudget decides" in decision.message


def test_the_request_is_deterministic_owned_by_its_pod_and_in_the_served_group() -> None:
    from controllers.evictionsurge.evictionrequests import LABELS, pod_owner

    assert name_for(TARGET) == name_for(pod("a")) and name_for(TARGET).startswith("a-")
    assert name_for(TARGET) != name_for({"metadata": {"name": "a", "namespace": "ns", "uid": "other"}})
    for api in (AIOKCM, BUILTIN):
        body = new_request(api, TARGET, REQUESTER, labels=LABELS, owner=pod_owner(TARGET))
        assert body["apiVersion"] == f"{api.group}/{names.VERSION}"
        assert body["metadata"]["name"] == NAME and body["metadata"]["namespace"] == "ns"
        assert body["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "uid-a"}
        ]
        assert body["spec"] == {
            "target": {"pod": {"name": "a", "uid": "uid-a"}},
            "requester": "eviction-surge.aiokcm.io/webhook",
            "intent": names.INTENT_EVICTION,
        }


def _at(seconds_ago: float | None) -> Any:
    return None if seconds_ago is None else NOW - timedelta(seconds=seconds_ago)


WINDOW = 60.0
STARTED = 3600.0  # the process started an hour ago
PLANS: dict[str, tuple[Obj | None, bool, bool, float | None, float | None, Plan]] = {
    # name: (request, wanted, others asking, last eviction (s ago), asked (s ago), plan)
    "held back, nothing asked: create": (None, True, False, 1, None, Plan(Step.CREATE)),
    "held back, withdrawn before: ask again": (request(names.INTENT_WITHDRAWN), True, False, 1, None, Plan(Step.REQUEST)),
    "not wanted: nothing": (None, False, False, 1, None, Plan(Step.NONE)),
    "someone else's evacuation under way: nothing": (None, True, True, 1, None, Plan(Step.NONE)),
    "the drainer gone before the worker ran: nothing": (None, True, False, WINDOW + 1, None, Plan(Step.NONE)),
    "asking, retried 10 s ago: follow until the window closes": (request(), False, True, 10, 30, Plan(Step.FOLLOW, WINDOW - 10)),
    "asking, asked 5 s ago, no retry yet: follow": (request(), False, False, None, 5, Plan(Step.FOLLOW, WINDOW - 5)),
    "asking, no retry within the window: withdraw": (request(), False, True, WINDOW + 1, WINDOW + 2, Plan(Step.WITHDRAW)),
    "asking, found at start with no eviction since: withdraw after the window from the start":
        (request(), False, False, None, None, Plan(Step.WITHDRAW)),
    "someone else's request of the same name is not ours to follow":
        (request(requester="ops.example.com/drain"), False, False, 1, None, Plan(Step.NONE)),
}  # fmt: skip


@pytest.mark.parametrize("case", list(PLANS))
def test_plan(case: str) -> None:
    req, wanted, others, last, asked, expected = PLANS[case]
    got = plan(
        req,
        wanted=wanted,
        others_asking=others,
        last=_at(last),
        asked=_at(asked),
        started=_at(STARTED),
        now=NOW,
        retry_window=WINDOW,
    )
    assert got.step is expected.step
    if expected.wait is not None:
        assert got.wait == pytest.approx(expected.wait)


def test_a_restart_gives_a_request_a_fresh_window() -> None:
    got = plan(
        request(),
        wanted=False,
        others_asking=False,
        last=None,
        asked=None,
        started=_at(5),
        now=NOW,
        retry_window=WINDOW,
    )
    assert got == Plan(Step.FOLLOW, WINDOW - 5)


def test_the_flag_defaults_to_the_condition_and_needs_the_gate_for_eviction_requests() -> None:
    registry = default_registry()
    assert parse_run_args([], registry).eviction_surge == EvictionSurgeConfig()
    assert not EvictionSurgeConfig().eviction_requests
    opts = parse_run_args(
        ["--eviction-surge-requests=EvictionRequest", "--feature-gates=EvictionRequestAPI=true"], registry
    )
    assert opts.eviction_surge == EvictionSurgeConfig(requests=REQUESTS_EVICTION_REQUEST)
    assert opts.eviction_surge.eviction_requests
    with pytest.raises(UsageError) as err:
        parse_run_args(["--eviction-surge-requests=EvictionRequest"], registry)
    assert "\n" not in str(err.value) and "EvictionRequestAPI feature gate" in str(err.value)
    with pytest.raises(UsageError):
        parse_run_args(["--eviction-surge-requests=Eviction"], registry)


def test_the_cli_exits_2_with_one_line() -> None:
    from controller_manager.cli import main

    assert main(["run", "--eviction-surge-requests=EvictionRequest"]) == 2
