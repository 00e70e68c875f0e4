"""A static node reads as a kubelet-registered one."""

from __future__ import annotations

from localcluster.cluster import node_object


def test_static_node_conditions_use_the_kubelets_reasons() -> None:
    node = node_object("n1")
    reasons = {c["type"]: (c["status"], c["reason"]) for c in node["status"]["conditions"]}
    # pkg/kubelet/nodestatus/setters.go: the reasons a healthy kubelet reports.
    assert reasons == {
        "MemoryPressure": ("False", "KubeletHasSufficientMemory"),
        "DiskPressure": ("False", "KubeletHasNoDiskPressure"),
        "PIDPressure": ("False", "KubeletHasSufficientPID"),
        "Ready": ("True", "KubeletReady"),
    }
    assert node["metadata"]["labels"] == {
        "kubernetes.io/hostname": "n1",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
