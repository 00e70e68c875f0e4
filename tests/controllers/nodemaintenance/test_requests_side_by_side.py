"""A node's evacuation requests are written side by side, not one round trip after another.

Each request is one patch of its own pod's status, planned from nothing another pod's patch
changes. Written one at a time, the last pod of a full node is asked a whole round of write
latencies after the first, and its owner's surge (and so the drain) starts that much later. The
server here answers every request after a fixed latency, so one-at-a-time writes would arrive at
least that latency apart.
"""

from __future__ import annotations

import time

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import NODEMAINTENANCES, PODS
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.api import PHASE_ANNOTATION
from controllers.nodemaintenance.config import NodeMaintenanceConfig
from controllers.nodemaintenance.nodesync import PER_POD_WRITES_IN_FLIGHT
from localcluster.cluster import LocalCluster
from tests.controllers.harness import running_controllers
from tests.controllers.nodemaintenance.helpers import GATES, NS, condition, make_owner, make_pod, node, pod
from tests.support.objects import node_maintenance
from tests.support.waiting import eventually

LATENCY = 0.3


async def started_by_their_kubelets(kube: KubeClient, count: int) -> None:
    """Every pod running, so no kubelet status write races the requests (each would be a stale plan)."""

    async def running() -> bool:
        listed = (await kube.list(PODS, namespace=NS))["items"]
        ready = [p for p in listed if (p.get("status") or {}).get("phase") == "Running"]
        return len(ready) >= count

    await eventually(running, f"{count} pods running", timeout=60)


PODS_ON_NODE = PER_POD_WRITES_IN_FLIGHT


async def all_requested(kube: KubeClient, names: list[str]) -> bool:
    for name in names:
        c = condition(await pod(kube, name), "EvacuationRequest")
        if not (c and c["status"] == "True"):
            return False
    return True


@pytest.mark.usefixtures("crd")
async def test_a_nodes_evacuation_requests_go_out_together(
    cluster: LocalCluster, kube: KubeClient, node_names: list[str]
) -> None:
    target = node_names[0]
    names = [f"web-{i:02d}" for i in range(PODS_ON_NODE)]
    for name in names:
        await make_pod(kube, name, target)
    await started_by_their_kubelets(kube, len(names))
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES):
        start = time.monotonic()
        cluster.faults.add_latency(LATENCY)
        try:
            await kube.create(NODEMAINTENANCES, node_maintenance("d", [target], drain=True))

            await eventually(lambda: all_requested(kube, names), "every pod asked to evacuate", timeout=30)
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
    await started_by_their_kubelets(kube, sum(map(len, names.values())))
    one_shard = NodeMaintenanceConfig(node_shards=1, max_unschedulable="100%")
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[one_shard]):
        start = time.monotonic()
        body = node_maintenance("together", node_names, drain=True)
        body["spec"]["maxConcurrentNodes"] = len(node_names)
        await kube.create(NODEMAINTENANCES, body)

        every = [name for pods in names.values() for name in pods]
        await eventually(lambda: all_requested(kube, every), "every pod on every node asked", timeout=30)
        for target in node_names:
            assert (await node(kube, target))["spec"].get("unschedulable") is True
    writes = [w for w in cluster.requests.since(start) if w.method == "PATCH" and w.succeeded]
    cordons = [w.at for w in writes if w.resource == "nodes"]
    asked = [w.at for w in writes if w.resource == f"{PODS.plural}/status"]
    assert len(cordons) >= len(node_names) and len(asked) == sum(map(len, names.values()))
    assert sorted(cordons)[len(node_names) - 1] < min(asked), (cordons, asked)


@pytest.mark.usefixtures("crd")
async def test_a_node_started_later_is_cordoned_within_a_round_of_a_full_nodes_requests(
    cluster: LocalCluster, kube: KubeClient, node_names: list[str]
) -> None:
    """A node whose maintenance starts while a full node on its shard is being asked is cordoned
    after one round of that node's requests, not after all of them: the replacements of the full
    node's pods would otherwise have a few more seconds to land on it."""
    full, later = node_names[0], node_names[1]
    owner = await make_owner(kube, "ReplicaSet", "many-owner", answers=True)
    names = [f"many-{i:03d}" for i in range(20 * PER_POD_WRITES_IN_FLIGHT)]
    for name in names:
        await make_pod(kube, name, full, owner="ReplicaSet", owner_obj=owner)
    await make_pod(kube, "alone", later)
    await started_by_their_kubelets(kube, len(names) + 1)
    one_shard = NodeMaintenanceConfig(node_shards=1, max_unschedulable="100%")
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[one_shard]):
        start = time.monotonic()
        await kube.create(NODEMAINTENANCES, node_maintenance("full", [full], drain=True))

        def asked() -> int:
            return sum(1 for w in cluster.requests.since(start) if w.resource == f"{PODS.plural}/status")

        await eventually(asked, "the full node's first pods asked")
        await kube.create(NODEMAINTENANCES, node_maintenance("later", [later], drain=True))
        await eventually(lambda: asked() >= len(names) + 1, "every pod asked", timeout=60)
    writes = [w for w in cluster.requests.since(start) if w.method == "PATCH" and w.succeeded]
    cordoned = min(w.at for w in writes if w.resource == "nodes" and w.path.endswith(f"/{later}"))
    full_asked = sorted(w.at for w in writes if w.resource == f"{PODS.plural}/status" and "/many-" in w.path)
    assert len(full_asked) == len(names)
    # A sync that comes back after a round plans only pods the cache shows past its own writes:
    # no request planned on a version it had already written over.
    refused = [
        w.path
        for w in cluster.requests.since(start)
        if w.resource == f"{PODS.plural}/status" and not w.succeeded
    ]
    assert refused == []
    # Cordoned while the full node's requests were still going out (the client's bucket paces
    # them at 20 a second), with many of them to come; waiting for the full node's whole round
    # of requests, none would be left.
    after = sum(1 for t in full_asked if t > cordoned)
    assert after >= len(names) // 4, (after, len(names))


@pytest.mark.usefixtures("crd")
async def test_a_drained_node_is_written_twice_the_cordon_with_its_phase_then_drained(
    cluster: LocalCluster, kube: KubeClient, node_names: list[str]
) -> None:
    """`kubectl drain` writes a node once (its cordon); a NodeMaintenance adds only the phase
    the node ends in. The phase it enters rides on the cordon, and a sync that runs before the
    cache has the node's last write works from that write's answer, so nothing goes twice."""
    target = node_names[0]
    names = [f"{target}-app-{i}" for i in range(3)]
    for name in names:
        await make_pod(kube, name, target)
    await started_by_their_kubelets(kube, len(names))
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES):
        start = time.monotonic()
        await kube.create(NODEMAINTENANCES, node_maintenance("twice", [target], drain=True))
        await eventually(lambda: all_requested(kube, names), "every pod asked to evacuate", timeout=30)
        for name in names:  # as their owners would, once replaced
            await kube.delete(PODS, name, namespace=NS, grace_period_seconds=0)

        async def drained() -> bool:
            c = condition(await kube.get(NODEMAINTENANCES, "twice"), "Drained")
            return bool(c and c["status"] == "True")

        await eventually(drained, "the maintenance drained", timeout=30)
        annotations = (await node(kube, target))["metadata"]["annotations"]
        await anyio.sleep(1.0)  # anything written twice shows up by now
    assert annotations[PHASE_ANNOTATION] == "Drained"
    writes = [
        w for w in cluster.requests.since(start) if w.resource == "nodes" and w.path.endswith(f"/{target}")
    ]
    assert [w.method for w in writes] == ["PATCH", "PATCH"], writes
