"""A node's evacuation requests are written side by side, not one round trip after another.

Each request is one patch of its own pod's status, planned from nothing another pod's patch
changes. Written one at a time, the last pod of a full node is asked a whole round of write
latencies after the first, and its owner's surge (and so the drain) starts that much later. The
server here answers every request after a fixed latency, so one-at-a-time writes would arrive at
least that latency apart.
"""

from __future__ import annotations

import time

import pytest

from apiclient import KubeClient
from apiclient.resources import NODEMAINTENANCES, PODS
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.nodesync import PER_POD_WRITES_IN_FLIGHT
from localcluster.cluster import LocalCluster
from tests.controllers.harness import running_controllers
from tests.controllers.nodemaintenance.helpers import GATES, condition, make_pod, pod
from tests.support.objects import node_maintenance
from tests.support.waiting import eventually

LATENCY = 0.3
PODS_ON_NODE = 12


@pytest.mark.usefixtures("crd")
async def test_a_nodes_evacuation_requests_go_out_together(
    cluster: LocalCluster, kube: KubeClient, node_names: list[str]
) -> None:
    target = node_names[0]
    names = [f"web-{i:02d}" for i in range(PODS_ON_NODE)]
    for name in names:
        await make_pod(kube, name, target)
    assert PODS_ON_NODE <= PER_POD_WRITES_IN_FLIGHT
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES):
        start = time.monotonic()
        cluster.faults.add_latency(LATENCY)
        try:
            await kube.create(NODEMAINTENANCES, node_maintenance("d", [target], drain=True))

            async def all_requested() -> bool:
                for name in names:
                    c = condition(await pod(kube, name), "EvacuationRequest")
                    if not (c and c["status"] == "True"):
                        return False
                return True

            await eventually(all_requested, "every pod asked to evacuate", timeout=30)
        finally:
            cluster.faults.clear()
    asked = [
        w.at
        for w in cluster.requests.since(start)
        if w.method == "PATCH" and w.resource == f"{PODS.plural}/status" and w.succeeded
    ]
    assert len(asked) == PODS_ON_NODE, asked
    # Side by side: all of them sent before the first could have been answered.
    assert max(asked) - min(asked) < LATENCY, [round(t - min(asked), 3) for t in asked]
