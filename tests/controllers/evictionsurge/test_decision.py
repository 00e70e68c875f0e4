"""The eviction verdict, rule by rule, as a table: what the caches say -> allowed or held back."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controllers.common.evacuation import (
    EVACUATION_INITIATED,
    EVACUATION_READY_ANNOTATION,
    EVACUATION_REQUEST,
)
from controllers.evictionsurge.decision import REASON_EVICTION_SURGE, Facts, Why, decide

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
TIMEOUT = 300.0


def stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    *,
    ready: bool = True,
    ready_for: float = 600,
    terminating: bool = False,
    phase: str = "Running",
    request: tuple[str, float] | None = None,
    initiated: tuple[str, float] | None = None,
) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": stamp(ready_for)}
    ]
    if request is not None:
        conditions.append(
            {
                "type": EVACUATION_REQUEST,
                "status": "True",
                "reason": request[0],
                "lastTransitionTime": stamp(request[1]),
            }
        )
    if initiated is not None:
        conditions.append(
            {
                "type": EVACUATION_INITIATED,
                "status": initiated[0],
                "reason": "Deployment",
                "lastTransitionTime": stamp(initiated[1]),
            }
        )
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if terminating:
        meta["deletionTimestamp"] = stamp(1)
    return {"metadata": meta, "status": {"phase": phase, "conditions": conditions}}


def rs(*, ready: bool = True) -> dict[str, Any]:
    annotations = {EVACUATION_READY_ANNOTATION: "true"} if ready else {}
    return {"metadata": {"name": "web-1", "namespace": "ns", "uid": "rs", "annotations": annotations}}


def deployment(replicas: int = 1, *, min_ready: int = 0, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "ns", "uid": "d"}
    if deleting:
        meta["deletionTimestamp"] = stamp(1)
    return {"metadata": meta, "spec": {"replicas": replicas, "minReadySeconds": min_ready}}


@dataclass
class Case:
    target: dict[str, Any] | None
    others: list[dict[str, Any]] = field(default_factory=list)
    replicas: int = 1
    rs_ready: bool = True
    has_owner: bool = True
    dry_run: bool = False
    min_ready: int = 0
    deleting: bool = False

    def facts(self) -> Facts:
        pods = ([self.target] if self.target else []) + self.others
        if not self.has_owner:
            return Facts(self.target, None, None, dry_run=self.dry_run)
        return Facts(
            self.target,
            rs(ready=self.rs_ready),
            deployment(self.replicas, min_ready=self.min_ready, deleting=self.deleting),
            pods,
            dry_run=self.dry_run,
        )


OURS = REASON_EVICTION_SURGE
CASES: dict[str, tuple[Case, bool, Why, bool]] = {
    # name: (facts, allowed, why, asks for an evacuation)
    "single replica, nothing under way: held back, evacuation asked":
        (Case(pod("a")), False, Why.SURGING, True),
    "dry run passes untouched": (Case(pod("a"), dry_run=True), True, Why.DRY_RUN, False),
    "pod not in the cache": (Case(None), True, Why.UNKNOWN_POD, False),
    "terminating pod": (Case(pod("a", terminating=True)), True, Why.NOT_RUNNING, False),
    "succeeded pod": (Case(pod("a", phase="Succeeded")), True, Why.NOT_RUNNING, False),
    "not-ready pod costs no availability": (Case(pod("a", ready=False)), True, Why.UNAVAILABLE, False),
    "ready but not yet minReadySeconds": (Case(pod("a", ready_for=5), min_ready=30), True, Why.UNAVAILABLE, False),
    "no controller (bare pod, StatefulSet, DaemonSet)": (Case(pod("a"), has_owner=False), True, Why.NO_ANSWER, False),
    "ReplicaSet not marked evacuation-ready (Recreate, maxSurge 0, gate off)":
        (Case(pod("a"), rs_ready=False), True, Why.NO_ANSWER, False),
    "Deployment being deleted": (Case(pod("a"), deleting=True), True, Why.NO_ANSWER, False),
    "owner answered it will not evacuate":
        (Case(pod("a", request=(OURS, 20), initiated=("False", 10))), True, Why.NO_ANSWER, False),
    "replacement available: the retry passes":
        (Case(pod("a", request=(OURS, 20), initiated=("True", 19)), [pod("b", ready_for=2)]),
         True, Why.ENOUGH_AVAILABLE, False),
    "replacement still starting: held back, no second request":
        (Case(pod("a", request=(OURS, 20)), [pod("b", ready=False)]), False, Why.SURGING, False),
    "three replicas all available: evicting one leaves two of three":
        (Case(pod("a"), [pod("b"), pod("c")], replicas=3), False, Why.SURGING, True),
    "over-provisioned (rollout surge): passes":
        (Case(pod("a"), [pod("b"), pod("c")], replicas=2), True, Why.ENOUGH_AVAILABLE, False),
    "terminating siblings do not count":
        (Case(pod("a"), [pod("b", terminating=True)]), False, Why.SURGING, True),
    "scaled to zero: nothing to keep": (Case(pod("a"), replicas=0), True, Why.ENOUGH_AVAILABLE, False),
    "a NodeMaintenance asked already: held back without a request of ours":
        (Case(pod("a", request=("NodeMaintenance", 30))), False, Why.SURGING, False),
    "surge out of time: the PodDisruptionBudget decides":
        (Case(pod("a", request=(OURS, TIMEOUT + 1))), True, Why.SURGE_TIMED_OUT, False),
    "a NodeMaintenance request out of time too":
        (Case(pod("a", request=("NodeMaintenance", TIMEOUT))), True, Why.SURGE_TIMED_OUT, False),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_decision_table(name: str) -> None:
    case, allowed, why, request = CASES[name]
    decision = decide(case.facts(), now=NOW, surge_timeout=TIMEOUT)
    assert (decision.allowed, decision.why, decision.request) == (allowed, why, request)
    if not allowed:
        assert "replacement" in decision.message and "ns/a" in decision.message
    if why is Why.SURGE_TIMED_OUT:
        assert "PodDisruptionBudget decides" in decision.message
