from __future__ import annotations

import copy
from typing import Any

from informers import POD_FIELDS, FieldTree, default_transform, node_projection, pod_projection
from informers.transform import LAST_APPLIED

from .helpers import pod


def _full_pod() -> dict[str, Any]:
    p = pod("a", "ns", node="n1", owner_uid="rs1")
    p["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    p["metadata"]["annotations"] = {LAST_APPLIED: "{...}", "keep": "me"}
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    p["spec"]["tolerations"] = [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
    ]
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
    assert (evac["type"], evac["reason"], evac["message"]) == (
        "EvacuationRequest",
        "NodeMaintenance",
        "kernel",
    )
    assert "lastProbeTime" not in out["status"]["conditions"][0]
    assert out["status"]["containerStatuses"] == [{"name": "c", "ready": True, "restartCount": 3}]
    assert "podIP" not in out["status"]


def test_pod_projection_of_a_bare_pod() -> None:
    out = pod_projection({"metadata": {"name": "x"}})
    assert out["metadata"] == {"name": "x"} and out["spec"] == {} and out["status"] == {}


def test_pod_projection_keeps_kubelet_conditions_and_shares_equal_parts() -> None:
    a, b = _full_pod(), _full_pod()
    b["metadata"]["name"] = "b"
    a["status"]["conditions"].append({"type": "ContainersReady", "status": "True"})
    pa, pb = pod_projection(a), pod_projection(b)
    assert [c["type"] for c in pa["status"]["conditions"]] == [
        "Ready",
        "EvacuationRequest",
        "ContainersReady",
    ]
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


def _fill(tree: FieldTree, *, extra: bool) -> dict[str, object]:
    """An object with every field of `tree` set (and, with `extra`, one unknown field per level)."""
    out: dict[str, object] = {"notKept": "x"} if extra else {}
    for key, sub in tree.items():
        if sub is None:
            out[key] = (
                True if key in ("controller", "blockOwnerDeletion", "ready", "started") else f"{key}-value"
            )
        elif key in (
            "ownerReferences",
            "conditions",
            "containerStatuses",
            "initContainerStatuses",
            "volumes",
        ):
            item = _fill(sub, extra=extra)
            if key == "conditions":
                item["type"] = "Ready"
            out[key] = [item]
        else:
            out[key] = _fill(sub, extra=extra)
    return out


def _paths(obj: object, prefix: str = "") -> set[str]:
    if isinstance(obj, list):
        return set().union(*(_paths(v, prefix) for v in obj)) if obj else set()
    if not isinstance(obj, dict):
        return set()
    found: set[str] = set()
    for key, value in obj.items():
        found.add(prefix + key)
        found |= _paths(value, prefix + key + ".")
    return found


def _tree_paths(tree: FieldTree, prefix: str = "") -> set[str]:
    found: set[str] = set()
    for key, sub in tree.items():
        found.add(prefix + key)
        if sub is not None:
            found |= _tree_paths(sub, prefix + key + ".")
    return found


def test_pod_fields_is_exactly_what_the_projection_keeps() -> None:
    """The table the controller suites guard reads with cannot drift from the projection."""
    full = _fill(POD_FIELDS, extra=True)
    for free in ("labels", "annotations"):
        full["metadata"][free] = {"k": "v"}  # type: ignore[index]
    full["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]  # type: ignore[index]
    kept = _paths(pod_projection(full))
    kept -= {
        p for p in kept if p.startswith(("metadata.labels.", "metadata.annotations.", "spec.tolerations."))
    }
    assert kept == _tree_paths(POD_FIELDS)


def test_node_projection_drops_only_unbounded_status_parts() -> None:
    node = {
        "metadata": {"name": "n", "managedFields": [{}], "labels": {"a": "b"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": True},
        "status": {
            "images": [{"names": ["x"], "sizeBytes": 1}],
            "volumesInUse": ["v"],
            "volumesAttached": [],
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1"},
        },
    }
    out = node_projection(copy.deepcopy(node))
    assert out["metadata"] == {"name": "n", "labels": {"a": "b"}}
    assert out["spec"] == node["spec"]
    assert out["status"] == {
        "conditions": [{"type": "Ready", "status": "True"}],
        "nodeInfo": {"kubeletVersion": "v1"},
    }


def test_pod_projection_keeps_every_list_element_in_order() -> None:
    """Writers patch `/status/conditions/<i>` with an index found in the cache: it must be the server's."""
    p = _full_pod()
    p["status"]["conditions"] = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": "t1"}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ] + [{"type": "EvacuationRequest", "status": "True", "reason": "NodeMaintenance"}]
    out = pod_projection(copy.deepcopy(p))
    for section, key in (
        ("status", "conditions"),
        ("status", "containerStatuses"),
        ("spec", "tolerations"),
        ("metadata", "ownerReferences"),
    ):
        assert [e.get("type", e.get("name", e.get("key", e.get("uid")))) for e in out[section][key]] == [
            e.get("type", e.get("name", e.get("key", e.get("uid")))) for e in p[section][key]
        ]
