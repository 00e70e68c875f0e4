"""A copy handed over to its ReplicaSet but not adopted yet still answers for its departing pod.

Between the patch that gives a copy its labels back and KCM's ReplicaSet sync that adopts it (sets
its controller reference), the copy has no `replacement-for` label and is not one of the
ReplicaSet's pods. The real `kubectl drain` beside the stock KCM caught the planner in that window
making a second copy for the same departing pod (deleted moments later, but over `maxSurge`):
here the window is held still, and held past the adoption grace (KCM down or behind).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controllers.common.evacuation import EVACUATION_INITIATED, EVACUATION_REQUEST
from controllers.replacementsurge.copies import (
    LOWEST_COST,
    POD_DELETION_COST,
    PREVIOUS_COST_ANNOTATION,
    REPLACED_ANNOTATION,
)
from controllers.replacementsurge.plan import ADOPTION_GRACE, Account, Step, plan
from controllers.replacementsurge.sync import copy_owner_index
from kubeutil.timestamps import format_time

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LABELS = {"app": "web", "pod-template-hash": "abc"}
RS = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "metadata": {
        "name": "web-abc",
        "namespace": "ns",
        "uid": "rs",
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d", "controller": True}
        ],
    },
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": LABELS},
        "template": {"metadata": {"labels": LABELS}},
    },
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "ns", "uid": "d"},
    "spec": {
        "replicas": 1,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
    },
}


def _ago(seconds: float) -> str:
    return format_time(NOW - timedelta(seconds=seconds))


def _pod(
    name: str, node: str, *, controller: bool, annotations: dict[str, str], conditions: list[Any]
) -> Any:
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "rs"}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": dict(LABELS),
            "annotations": annotations,
            "creationTimestamp": _ago(600),
            "ownerReferences": [{**ref, "controller": True} if controller else ref],
        },
        "spec": {"nodeName": node},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": _ago(300)}, *conditions],
        },
    }


DEPARTING = _pod(
    "a",
    "node-1",
    controller=True,
    annotations={POD_DELETION_COST: LOWEST_COST, PREVIOUS_COST_ANNOTATION: ""},
    conditions=[
        {
            "type": EVACUATION_REQUEST,
            "status": "True",
            "reason": "EvictionSurge",
            "lastTransitionTime": _ago(20),
        },
        {
            "type": EVACUATION_INITIATED,
            "status": "True",
            "reason": "NodeMaintenance",
            "lastTransitionTime": _ago(19),
        },
    ],
)
# Its labels given back 1 s ago; KCM has not set the controller reference yet.
HANDED_OVER = _pod(
    "copy-a", "node-2", controller=False, annotations={REPLACED_ANNOTATION: f"uid-a@{_ago(1)}"}, conditions=[]
)


def test_a_copy_handed_over_and_not_adopted_yet_is_found_by_its_owner() -> None:
    assert copy_owner_index(HANDED_OVER) == ["rs"]
    adopted = {**HANDED_OVER, "metadata": {**HANDED_OVER["metadata"], "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "rs", "controller": True}
    ]}}  # fmt: skip
    assert copy_owner_index(adopted) == []  # one of the ReplicaSet's pods from now on


def test_no_second_copy_while_the_replicaset_has_not_adopted_the_first() -> None:
    account = Account(DEPLOYMENT, [RS], [DEPARTING], [HANDED_OVER], desired=1, surge_limit=1)
    out = plan(account, now=NOW, surge_timeout=300)
    assert [a.step for a in out.actions if a.step is not Step.MARK] == [], out.actions
    assert out.waiting_for_room == 0
    assert out.requeue_after is not None and abs(out.requeue_after - (ADOPTION_GRACE - 1)) < 0.01


def test_a_copy_never_adopted_hands_its_pod_back_to_the_drain_and_is_not_released() -> None:
    """KCM down or behind past the grace: releasing the copy would let the next sync make another,
    and another, while nobody adopts them; the drain decides under the budget instead."""
    stale = _pod(
        "copy-a",
        "node-2",
        controller=False,
        annotations={REPLACED_ANNOTATION: f"uid-a@{_ago(20)}"},
        conditions=[],
    )
    account = Account(DEPLOYMENT, [RS], [DEPARTING], [stale], desired=1, surge_limit=1)
    out = plan(account, now=NOW, surge_timeout=300)
    assert [(a.step, a.pod["metadata"]["name"]) for a in out.actions] == [(Step.GIVE_UP, "a")], out.actions
    assert "has not adopted" in out.actions[0].message
