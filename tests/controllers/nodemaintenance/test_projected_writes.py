"""The evacuation handshake writes through the cached pod projection without harming other conditions.

`request_evacuation` and `withdraw_evacuation` address `/status/conditions/<i>` with an index
found in the cached pod; the cache holds the manager's pod projection, so these cases run the
writes from a projected pod against a pod carrying the kubelet's full set of conditions.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from apiclient import KubeClient
from apiclient.resources import PODS
from controllers.nodemaintenance.drain import request_evacuation, withdraw_evacuation
from informers import pod_projection

NS = "default"
KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")


async def _pod_with_kubelet_conditions(
    kube: KubeClient, name: str, extra: list[dict[str, Any]]
) -> dict[str, Any]:
    await kube.create(
        PODS,
        {
            "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        },
        namespace=NS,
    )
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:00Z"}
        for t in KUBELET_CONDITIONS
    ] + extra
    ops = [{"op": "add", "path": "/status/conditions", "value": conditions}]
    return await kube.patch(PODS, name, ops, namespace=NS, subresource="status", patch_type="json")


def _types_and_status(pod: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["type"], c["status"]) for c in pod["status"]["conditions"]]


async def test_request_and_withdraw_from_a_projected_pod_keep_the_kubelet_conditions(
    kube: KubeClient,
) -> None:
    stale_request = {"type": "EvacuationRequest", "status": "False", "reason": "NodeMaintenance"}
    server = await _pod_with_kubelet_conditions(kube, "evacuee", [stale_request])
    await request_evacuation(kube, pod_projection(server), message="kernel", now=datetime.now(UTC))
    server = await kube.get(PODS, "evacuee", namespace=NS)
    assert _types_and_status(server) == [(t, "True") for t in KUBELET_CONDITIONS] + [
        ("EvacuationRequest", "True")
    ]

    await withdraw_evacuation(kube, pod_projection(server))
    server = await kube.get(PODS, "evacuee", namespace=NS)
    assert _types_and_status(server) == [(t, "True") for t in KUBELET_CONDITIONS]
