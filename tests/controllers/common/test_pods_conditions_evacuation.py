"""Pod state, condition editing and the KEP-4212 helpers against plain dicts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controllers.common.controller_ref import get_controller_of
from controllers.common.evacuation import (
    count_annotation_patch,
    evacuation_initiated_patch,
    has_evacuation_request,
    is_evacuation_ready,
    replicas_to_evacuate,
)
from controllers.common.pods import is_pod_active, is_pod_available, seconds_until_available
from controllers.common.podtemplate import NoLabelsError, pod_from_template
from kubeutil.conditions import get_condition, new_condition, remove_condition, set_condition
from tests.controllers.common.podfactory import make_pod

NOW = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)


def test_availability_honours_min_ready_seconds() -> None:
    pod = make_pod("p", ready_since=NOW - timedelta(seconds=10))
    assert is_pod_available(pod, 0, NOW)
    assert is_pod_available(pod, 9, NOW)
    assert not is_pod_available(pod, 10, NOW)  # strictly before now, as Kubernetes
    assert seconds_until_available(pod, 15, NOW) == 5.0
    assert not is_pod_available(make_pod("notready"), 0, NOW)


def test_terminating_and_terminal_pods_are_not_active() -> None:
    assert is_pod_active(make_pod("p", phase="Running"))
    assert not is_pod_active(make_pod("p", deleting=True))
    assert not is_pod_active(make_pod("p", phase="Succeeded"))
    assert not is_pod_active(make_pod("p", phase="Failed"))


def test_set_condition_keeps_transition_time_when_status_is_unchanged() -> None:
    status: dict[str, Any] = {}
    early = new_condition("ReplicaFailure", "True", reason="FailedCreate", now=NOW)
    assert set_condition(status, early)
    assert not set_condition(status, new_condition("ReplicaFailure", "True", reason="FailedCreate"))
    assert set_condition(status, new_condition("ReplicaFailure", "True", reason="FailedDelete"))
    cond = get_condition(status, "ReplicaFailure")
    assert cond is not None and cond["reason"] == "FailedDelete"
    assert cond["lastTransitionTime"] == early["lastTransitionTime"]
    assert remove_condition(status, "ReplicaFailure") and status["conditions"] == []
    assert not remove_condition(status, "ReplicaFailure")


def request(status: str, reason: str = "NodeMaintenance") -> dict[str, Any]:
    return {"type": "EvacuationRequest", "status": status, "reason": reason}


def test_evacuation_request_true_only() -> None:
    assert has_evacuation_request(make_pod("p", conditions=[request("True")]))
    assert not has_evacuation_request(make_pod("p", conditions=[request("False")]))
    assert not has_evacuation_request(make_pod("p"))


def test_initiated_patch_sets_only_our_condition_and_respects_other_evacuators() -> None:
    pod = make_pod("p", conditions=[request("True")])
    patch = evacuation_initiated_patch(pod, now=NOW)
    assert patch is not None
    assert patch["metadata"] == {"uid": "uid-p"}
    assert [c["type"] for c in patch["status"]["conditions"]] == ["EvacuationInitiated"]
    assert patch["status"]["conditions"][0]["status"] == "True"
    answered = make_pod("p", conditions=[request("True"), patch["status"]["conditions"][0]])
    assert evacuation_initiated_patch(answered) is None
    foreign = {"type": "EvacuationInitiated", "status": "False", "reason": "SomeoneElse"}
    assert evacuation_initiated_patch(make_pod("p", conditions=[request("True"), foreign])) is None


def test_count_annotation_patch_is_minimal() -> None:
    rs: dict[str, Any] = {"metadata": {"annotations": {"maintenance.aiokcm.io/replicas-to-evacuate": "2"}}}
    assert replicas_to_evacuate(rs) == 2
    assert count_annotation_patch(rs, "maintenance.aiokcm.io/replicas-to-evacuate", 2) is None
    assert count_annotation_patch(rs, "maintenance.aiokcm.io/replicas-to-evacuate", 0) == {
        "metadata": {"annotations": {"maintenance.aiokcm.io/replicas-to-evacuate": None}}
    }
    assert count_annotation_patch({}, "maintenance.aiokcm.io/replicas-to-evacuate", 0) is None
    assert not is_evacuation_ready(rs)
    assert is_evacuation_ready(
        {"metadata": {"annotations": {"deployment.kubernetes.io/evacuation-ready": "true"}}}
    )


def test_pod_from_template() -> None:
    owner = {"metadata": {"name": "web", "namespace": "ns", "uid": "u1"}}
    template: dict[str, Any] = {
        "metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
        "spec": {"containers": [{"name": "c"}]},
    }
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1", "controller": True}
    pod = pod_from_template(template, owner, ref)
    assert pod["metadata"]["generateName"] == "web-"
    assert pod["metadata"]["labels"] == {"app": "web"} and pod["metadata"]["annotations"] == {"a": "b"}
    assert get_controller_of(pod) == ref
    pod["spec"]["containers"].append({"name": "x"})
    assert len(template["spec"]["containers"]) == 1  # a deep copy
    try:
        pod_from_template({"spec": {}}, owner, ref)
    except NoLabelsError:
        pass
    else:
        raise AssertionError("a template without labels must be refused")
