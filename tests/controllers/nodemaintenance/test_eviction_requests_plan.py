"""Draining through EvictionRequests (`spec.evictionAPI: EvictionRequest`): the pure decisions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controllers.nodemaintenance import api
from controllers.nodemaintenance.drain import (
    BLOCK_AWAITING_OWNER,
    BLOCK_NO_CONTROLLER,
    BLOCK_TERMINATING,
    DrainOptions,
)
from controllers.nodemaintenance.evictionrequests import (
    BLOCK_REQUEST_FAILED,
    GATE_OFF,
    REQUESTER,
    RequestAction,
    name_for,
    node_progress,
    owner_reference,
    plan_request,
    pod_state,
    wanted_owners,
)
from controllers.nodemaintenance.state import Listers
from controllers.nodemaintenance.status import NOT_BLOCKING
from evictionapi import names
from evictionapi.requester import request_name, requester_problem

NOW = datetime(2026, 1, 1, tzinfo=UTC)
A = api.Maintenance.from_obj(
    {
        "metadata": {"name": "a", "uid": "uid-a"},
        "spec": {"cordon": True, "drain": True, "evictionAPI": "EvictionRequest"},
    }
)
B = api.Maintenance.from_obj(
    {
        "metadata": {"name": "b", "uid": "uid-b"},
        "spec": {"cordon": True, "drain": True, "evictionAPI": "EvictionRequest"},
    }
)


def pod(name: str = "web", *, owner: bool = True, deleting: bool = False, **meta: Any) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}", **meta}
    if owner:
        m["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}]
    if deleting:
        m["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": m, "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}}


def request(
    intent: str = names.INTENT_EVICTION, *, owners: tuple[api.Maintenance, ...] = (A,), failed: str = ""
) -> dict[str, Any]:
    conditions = (
        [{"type": "Failed", "status": "True", "reason": "NoFurtherResponder", "message": failed}]
        if failed
        else []
    )
    return {
        "metadata": {
            "name": name_for(pod()),
            "namespace": "default",
            "resourceVersion": "7",
            "ownerReferences": [owner_reference(m) for m in owners],
        },
        "spec": {
            "target": {"pod": {"name": "web", "uid": "uid-web"}},
            "requester": REQUESTER,
            "intent": intent,
        },
        "status": {"conditions": conditions},
    }


def test_the_requester_is_a_name_the_api_accepts_and_the_name_is_the_shared_one() -> None:
    assert requester_problem(REQUESTER) is None
    assert name_for(pod()) == request_name("web", "uid-web", REQUESTER)


def test_the_spec_field_defaults_to_the_pod_condition() -> None:
    m = api.Maintenance.from_obj({"metadata": {"name": "x"}, "spec": {}})
    assert (m.eviction_api, m.by_eviction_request, m.invalid) == ("PodCondition", False, "")
    assert A.by_eviction_request and not A.invalid
    odd = api.Maintenance.from_obj({"metadata": {"name": "x"}, "spec": {"evictionAPI": "Carrier pigeon"}})
    assert not odd.by_eviction_request and "spec.evictionAPI" in odd.invalid


def test_without_the_gate_a_maintenance_asking_for_eviction_requests_is_invalid() -> None:
    class Empty:
        def list(self) -> list[Any]:
            return []

    listers = Listers(Empty(), Empty(), Empty())  # type: ignore[arg-type]
    obj = {
        "metadata": {"name": "a"},
        "spec": {"drain": True, "cordon": True, "evictionAPI": "EvictionRequest"},
    }
    assert listers.maintenance(obj).invalid == GATE_OFF
    listers.requests = Empty()  # type: ignore[assignment]
    assert listers.maintenance(obj).invalid == ""
    assert listers.maintenance({"metadata": {"name": "p"}, "spec": {}}).invalid == ""


@pytest.mark.parametrize(
    ("the_pod", "the_request", "drainers", "options", "expected"),
    [
        pytest.param(pod(), None, [A], DrainOptions(), RequestAction.CREATE, id="ask"),
        pytest.param(pod(), request(), [A], DrainOptions(), RequestAction.WAIT, id="asked"),
        pytest.param(
            pod(), request(failed="no"), [A], DrainOptions(), RequestAction.WAIT, id="failed-not-retried"
        ),
        pytest.param(
            pod(), request(names.INTENT_WITHDRAWN), [A], DrainOptions(), RequestAction.REQUEST, id="ask-again"
        ),
        pytest.param(
            pod(), request(), [A, B], DrainOptions(), RequestAction.ADOPT, id="second-maintenance-joins"
        ),
        pytest.param(pod(), request(owners=(A, B)), [A], DrainOptions(), RequestAction.WAIT, id="owner-kept"),
        pytest.param(pod(), request(), [], DrainOptions(), RequestAction.WITHDRAW, id="no-longer-drained"),
        pytest.param(
            pod(), request(names.INTENT_WITHDRAWN), [], DrainOptions(), RequestAction.NONE, id="withdrawn"
        ),
        pytest.param(pod(), None, [], DrainOptions(), RequestAction.NONE, id="not-ours"),
        pytest.param(
            pod(deleting=True), request(), [A], DrainOptions(), RequestAction.TERMINATING, id="terminating"
        ),
        pytest.param(
            pod(owner=False), None, [A], DrainOptions(), RequestAction.BLOCK, id="no-controller-needs-force"
        ),
        pytest.param(
            pod(owner=False), None, [A], DrainOptions(force=True), RequestAction.CREATE, id="forced"
        ),
        pytest.param(
            pod(annotations={"kubernetes.io/config.mirror": "x"}),
            None,
            [A],
            DrainOptions(),
            RequestAction.NONE,
            id="mirror",
        ),
        pytest.param(
            {
                **pod(),
                "metadata": {
                    **pod()["metadata"],
                    "ownerReferences": [{"kind": "DaemonSet", "name": "d", "uid": "d", "controller": True}],
                },
            },
            request(),
            [A],
            DrainOptions(),
            RequestAction.WITHDRAW,
            id="daemonset-pod-never-asked",
        ),
    ],
)
def test_plan_request(
    the_pod: dict[str, Any],
    the_request: dict[str, Any] | None,
    drainers: list[api.Maintenance],
    options: DrainOptions,
    expected: RequestAction,
) -> None:
    assert plan_request(the_pod, the_request, drainers=drainers, options=options).action is expected


def test_a_blocked_pod_carries_kubectls_reason() -> None:
    plan = plan_request(pod(owner=False), None, drainers=[A], options=DrainOptions())
    assert plan.reason == BLOCK_NO_CONTROLLER and "--force" in plan.message


def test_owners_are_added_never_removed() -> None:
    assert [o["name"] for o in wanted_owners(request(), [B])] == ["a", "b"]
    assert [o["name"] for o in wanted_owners(request(owners=(A, B)), [])] == ["a", "b"]
    assert owner_reference(A) == {
        "apiVersion": "maintenance.aiokcm.io/v1alpha1",
        "kind": "NodeMaintenance",
        "name": "a",
        "uid": "uid-a",
    }


@pytest.mark.parametrize(
    ("the_pod", "the_request", "evacuating", "reason"),
    [
        pytest.param(pod(), request(), True, "", id="asked"),
        pytest.param(pod(), None, False, BLOCK_AWAITING_OWNER, id="not-asked-yet"),
        pytest.param(pod(owner=False), None, False, BLOCK_NO_CONTROLLER, id="opt-in-missing"),
        pytest.param(pod(deleting=True), request(), False, BLOCK_TERMINATING, id="terminating"),
        pytest.param(pod(), request(failed="budget"), False, BLOCK_REQUEST_FAILED, id="failed"),
        pytest.param(
            pod(), request(names.INTENT_WITHDRAWN), False, BLOCK_AWAITING_OWNER, id="withdrawn-by-hand"
        ),
    ],
)
def test_pod_state(
    the_pod: dict[str, Any], the_request: dict[str, Any] | None, evacuating: bool, reason: str
) -> None:
    state = pod_state(the_pod, the_request, options=DrainOptions())
    assert (state.evacuating, state.reason) == (evacuating, reason)


def test_a_failed_request_blocks_with_its_message_and_how_to_retry() -> None:
    state = pod_state(pod(), request(failed="the budget never allowed it"), options=DrainOptions())
    assert "the budget never allowed it" in state.message and "delete it to ask again" in state.message
    assert BLOCK_REQUEST_FAILED not in NOT_BLOCKING  # so the maintenance's Blocked condition turns True


def test_node_progress_counts_pods_until_they_are_gone() -> None:
    node = {"metadata": {"name": "node-1"}, "spec": {"unschedulable": True}}
    asked, waiting, failed = pod("asked"), pod("waiting"), pod("failed")
    found = {name_for(asked): request(), name_for(failed): request(failed="stuck")}

    def request_of(p: Any) -> Any:
        return found.get(name_for(p))

    progress = node_progress(A, node=node, pods=[asked, waiting, failed], request_of=request_of, now=NOW)
    assert (progress.phase, progress.pending, progress.evacuating) == (api.PHASE_DRAINING, 3, 1)
    assert [(b.name, b.reason) for b in progress.blocking] == [
        ("failed", BLOCK_REQUEST_FAILED),
        ("waiting", BLOCK_AWAITING_OWNER),
    ]
    empty = node_progress(A, node=node, pods=[], request_of=request_of, now=NOW)
    assert (empty.phase, empty.pending) == (api.PHASE_DRAINED, 0)


def test_node_progress_of_an_invalid_or_waiting_maintenance_is_the_usual_one() -> None:
    node = {"metadata": {"name": "node-1"}, "spec": {}}
    gated = api.Maintenance.from_obj(
        {"metadata": {"name": "g"}, "spec": {"cordon": True, "drain": True, "evictionAPI": "EvictionRequest"}}
    )
    from dataclasses import replace

    p = node_progress(
        replace(gated, invalid=GATE_OFF), node=node, pods=[pod()], request_of=lambda _p: None, now=NOW
    )
    assert (p.phase, p.message) == (api.PHASE_CORDONED, GATE_OFF)
    p = node_progress(A, node=node, pods=[pod()], request_of=lambda _p: None, now=NOW, lease_holder="ops")
    assert p.phase == api.PHASE_WAITING_FOR_LEASE
