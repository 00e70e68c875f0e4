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
from controllers.nodemaintenance.config import NodeMaintenanceConfig
from controllers.nodemaintenance.nodesync import PER_POD_WRITES_IN_FLIGHT
from localcluster.cluster import LocalCluster
from tests.controllers.harness import running_controllers
from tests.controllers.nodemaintenance.helpers import GATES, condition, make_pod, node, pod
from tests.support.objects import node_maintenance
from tests.support.waiting import eventually

LATENCY = 0.3
PODS_ON_NODE = PER_POD_WRITES_IN_FLIGHT


@pytest.mark.usefixtures("crd")
async def test_a_nodes_evacuation_requests_go_out_together(
    cluster: LocalCluster, kube: KubeClient, node_names: list[str]
) -> None:
    target = node_names[0]
    names = [f"web-{i:02d}" for i in range(PODS_ON_NODE)]
    for name in names:
        await make_pod(kube, name, target)
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


@pytest.mark.usefixtures("crd")
async def test_every_node_started_together_is_cordoned_before_any_pod_is_asked(
    cluster: LocalCluster, kube: KubeClient, node_names: list[str]
) -> None:
    """Nodes that share a shard: a node just cordoned lets the others be cordoned before its pods
    are asked, as `kubectl drain` cordons every node first. Otherwise a replacement surged for the
    first node's pods may land on a node that drains a moment later, and its app moves twice."""
    names = {target: [f"{target}-web-{i}" for i in range(3)] for target in node_names}
    for target, pods in names.items():
        for name in pods:
            await make_pod(kube, name, target)
    one_shard = NodeMaintenanceConfig(node_shards=1, max_unschedulable="100%")
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[one_shard]):
        start = time.monotonic()
        body = node_maintenance("together", node_names, drain=True)
        body["spec"]["maxConcurrentNodes"] = len(node_names)
        await kube.create(NODEMAINTENANCES, body)

        async def all_requested() -> bool:
            for pods in names.values():
                for name in pods:
                    c = condition(await pod(kube, name), "EvacuationRequest")
                    if not (c and c["status"] == "True"):
                        return False
            return True

        await eventually(all_requested, "every pod on every node asked to evacuate", timeout=30)
        for target in node_names:
            assert (await node(kube, target))["spec"].get("unschedulable") is True
    writes = [w for w in cluster.requests.since(start) if w.method == "PATCH" and w.succeeded]
    cordons = [w.at for w in writes if w.resource == "nodes"]
    asked = [w.at for w in writes if w.resource == f"{PODS.plural}/status"]
    assert len(cordons) >= len(node_names) and len(asked) == sum(map(len, names.values()))
    assert sorted(cordons)[len(node_names) - 1] < min(asked), (cordons, asked)
