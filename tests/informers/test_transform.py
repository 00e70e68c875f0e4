from __future__ import annotations

import copy

from informers import default_transform, pod_projection
from informers.transform import LAST_APPLIED

from .helpers import pod


def _full_pod() -> dict[str, object]:
    p = pod("a", "ns", node="n1", owner_uid="rs1")
    p["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    p["metadata"]["annotations"] = {LAST_APPLIED: "{...}", "keep": "me"}
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    p["spec"]["tolerations"] = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]
    p["spec"]["priority"] = 100
    p["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": "t1"},
            {"type": "EvacuationRequest", "status": "True", "reason": "NodeMaintenance", "message": "kernel"},
        ],
        "containerStatuses": [{"name": "c", "ready": True, "restartCount": 3, "image": "nginx", "state": {}}],
        "podIP": "10.0.0.1",
    }
    return p


def test_default_transform_drops_managed_fields_and_last_applied_only() -> None:
    p = _full_pod()
    before = copy.deepcopy(p)
    out = default_transform(p)
    assert "managedFields" not in out["metadata"]
    assert out["metadata"]["annotations"] == {"keep": "me"}
    del before["metadata"]["managedFields"]
    del before["metadata"]["annotations"][LAST_APPLIED]
    assert out == before


def test_default_transform_removes_emptied_annotations() -> None:
    p = pod("a")
    p["metadata"]["annotations"] = {LAST_APPLIED: "{}"}
    assert "annotations" not in default_transform(p)["metadata"]


def test_pod_projection_keeps_what_controllers_read() -> None:
    out = pod_projection(_full_pod())
    meta = out["metadata"]
    assert (meta["name"], meta["namespace"], meta["deletionTimestamp"]) == ("a", "ns", "2026-01-01T00:00:00Z")
    assert meta["labels"] == {"app": "web"}
    assert meta["annotations"] == {"keep": "me"}
    assert meta["ownerReferences"][0]["uid"] == "rs1" and meta["ownerReferences"][0]["controller"] is True
    assert "managedFields" not in meta
    assert out["spec"] == {
        "nodeName": "n1",
        "priority": 100,
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],
    }
    assert out["status"]["phase"] == "Running"
    evac = out["status"]["conditions"][1]
    assert (evac["type"], evac["reason"], evac["message"]) == ("EvacuationRequest", "NodeMaintenance", "kernel")
    assert "lastProbeTime" not in out["status"]["conditions"][0]
    assert out["status"]["containerStatuses"] == [{"name": "c", "ready": True, "restartCount": 3}]
    assert "podIP" not in out["status"]


def test_pod_projection_of_a_bare_pod() -> None:
    out = pod_projection({"metadata": {"name": "x"}})
    assert out["metadata"] == {"name": "x"} and out["spec"] == {} and out["status"] == {}


def test_pod_projection_drops_kubelet_conditions_and_shares_equal_parts() -> None:
    a, b = _full_pod(), _full_pod()
    b["metadata"]["name"] = "b"
    a["status"]["conditions"].append({"type": "ContainersReady", "status": "True"})
    pa, pb = pod_projection(a), pod_projection(b)
    assert [c["type"] for c in pa["status"]["conditions"]] == ["Ready", "EvacuationRequest"]
    assert pa["metadata"]["labels"] is pb["metadata"]["labels"]
    assert pa["metadata"]["ownerReferences"] is pb["metadata"]["ownerReferences"]
    assert pa["spec"]["tolerations"] is pb["spec"]["tolerations"]
    b2 = _full_pod()
    b2["metadata"]["labels"] = {"app": "other"}
    assert pod_projection(b2)["metadata"]["labels"] == {"app": "other"}


def test_pod_projection_shares_conditions_and_statuses_but_never_across_different_values() -> None:
    a, b = _full_pod(), _full_pod()
    b["metadata"]["name"] = "b"
    b["status"]["containerStatuses"][0]["containerID"] = "containerd://other"  # dropped: still shared
    pa, pb = pod_projection(a), pod_projection(b)
    assert pa["status"]["conditions"] is pb["status"]["conditions"]
    assert pa["status"]["containerStatuses"] is pb["status"]["containerStatuses"]
    c = _full_pod()
    c["status"]["containerStatuses"][0]["restartCount"] = 4
    c["status"]["conditions"][0]["status"] = "False"
    pc = pod_projection(c)
    assert pc["status"]["containerStatuses"] == [{"name": "c", "ready": True, "restartCount": 4}]
    assert pc["status"]["conditions"][0]["status"] == "False"
    assert pa["status"]["containerStatuses"][0]["restartCount"] == 3  # the shared value is untouched


def test_pod_projection_of_values_that_are_not_plain_json_is_not_shared() -> None:
    p = _full_pod()
    p["metadata"]["labels"] = {"app": "web", 1: "x"}  # not encodable: copied, not shared
    p["status"]["containerStatuses"] = [{"name": "c", "ready": True, "restartCount": [1]}]  # unhashable
    out = pod_projection(p)
    assert out["metadata"]["labels"] == {"app": "web", 1: "x"}
    assert out["status"]["containerStatuses"] == [{"name": "c", "ready": True, "restartCount": [1]}]
    assert pod_projection(p)["metadata"]["labels"] is not out["metadata"]["labels"]


def test_pod_projection_does_not_touch_its_input() -> None:
    p = _full_pod()
    before = copy.deepcopy(p)
    pod_projection(p)
    assert p == before
