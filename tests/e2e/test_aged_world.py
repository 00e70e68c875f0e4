"""An aged world: every timestamp the controllers read is older than every deadline they know.

The wall clock of the whole process (manager and local cluster alike) jumps a year forward with
`time_machine`; the event loop's monotonic clock does not move, so nothing waits a year. Before
the jump the cluster is built and converged; after it, what was written then is a year old:
Deployments' Progressing conditions (past `progressDeadlineSeconds`; the max-int "no deadline"
is never past), a PDB's `disruptedPods` entry (2 min), a pod's `DisruptionTarget`
(stale after 2 min), maintenance Leases (expired), a NodeMaintenance's evacuation timeout (past),
a node's last heartbeat (far past its grace periods). A new manager starts in that world (a
standby taking over after a year), Deployments are scaled and rolled out, and then: every
ReplicaSet has its pods, the stale marks are cleaned once, a drain with the max-int evacuation
timeout still waits for the pod nobody answers for, and the manager writes nothing.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import anyio
import time_machine

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NODEMAINTENANCES, NODES, PODDISRUPTIONBUDGETS, PODS
from localcluster.cluster import LocalCluster, node_object
from localcluster.demo import ensure_crd
from tests.e2e import oddworld
from tests.e2e.converged import replica_set_mismatches
from tests.e2e.world import describe, manager_options, running_manager, settled, writes_over
from tests.support.waiting import eventually

NS = "aged"
WINDOW = 5.0
_MAINTENANCE_KIND = {"apiVersion": "maintenance.aiokcm.io/v1alpha1", "kind": "NodeMaintenance"}
FAST_NODES = ("--node-monitor-grace-period=5s", "--node-startup-grace-period=5s")


def _stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def _build(kube: KubeClient) -> None:
    await ensure_crd(kube)
    await oddworld.taint_node(kube)
    await oddworld.populate(kube, NS)
    await kube.create(
        DEPLOYMENTS, oddworld.deployment("deadline-5s", 1, progressDeadlineSeconds=5), namespace=NS
    )
    # a node whose kubelet is gone: its heartbeat is all that ages
    gone = node_object("node-gone")
    gone["spec"] = {"unschedulable": True}
    await kube.create(NODES, gone)
    await kube.create(
        PODS,
        {
            "metadata": {"name": "on-gone-node", "labels": {"app": "gone"}},
            "spec": {"nodeName": "node-gone", "containers": [{"name": "c", "image": "nginx:1"}]},
        },
        namespace=NS,
    )
    # bare pods under two PDBs cannot be evicted at all (the server answers 500): a drain of their
    # node never ends, so the drain here is of the node that stopped answering
    await kube.create(
        NODEMAINTENANCES,
        {
            **_MAINTENANCE_KIND,
            "metadata": {"name": "drain-gone"},
            "spec": {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-gone"]}]}
                    ]
                },
                # its pod has no owner: evicted only with kubectl drain's --force opt-in
                "cordon": True,
                "drain": True,
                "force": True,
                "reason": "aged",
                "evacuationTimeoutSeconds": 30,
            },
        },
    )
    # and a drain that never falls back to eviction: owners that do not answer are waited for
    await kube.create(
        NODEMAINTENANCES,
        {
            **_MAINTENANCE_KIND,
            "metadata": {"name": "drain-forever"},
            "spec": {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
                    ]
                },
                "cordon": True,
                "drain": True,
                "reason": "no deadline",
                "evacuationTimeoutSeconds": oddworld.MAX_INT32,
            },
        },
    )


async def _age_marks(kube: KubeClient) -> str:
    """Marks only the disruption controller removes, written now: a year old after the jump."""
    pods = [
        p
        for p in await kube.list_all(PODS, namespace=NS, label_selector="app=tolerant")
        if not p["metadata"].get("deletionTimestamp")
    ]
    marked: str = pods[0]["metadata"]["name"]
    now = _stamp(dt.datetime.now(dt.UTC))
    await kube.patch(
        PODS,
        marked,
        {
            "status": {
                "conditions": [
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "EvictionByEvictionAPI",
                        "message": "evicted a year ago, then the delete never came",
                        "lastTransitionTime": now,
                    }
                ]
            }
        },
        namespace=NS,
        subresource="status",
        patch_type="strategic",
    )
    await kube.patch(
        PODDISRUPTIONBUDGETS,
        "none-may-go",
        {"status": {"disruptedPods": {marked: now}}},
        namespace=NS,
        subresource="status",
    )
    return marked


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == type_), {})


async def test_an_aged_world_converges_then_gets_no_writes(cluster_factory: type[LocalCluster]) -> None:
    async with cluster_factory(nodes=3, speed=10) as cluster:
        kube: KubeClient = await cluster.client()
        try:
            await _build(kube)
            async with running_manager(cluster, manager_options(cluster, *FAST_NODES)) as manager:
                await eventually(lambda: manager.health.ready, "caches synced")
                await settled(cluster, quiet=2.0)
            marked = await _age_marks(kube)

            with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(days=365), tick=True):
                began = time.monotonic()
                async with running_manager(cluster, manager_options(cluster, *FAST_NODES)) as manager:
                    await eventually(lambda: manager.health.ready, "caches synced")
                    for name, replicas in (
                        ("deadline-5s", 3),
                        ("recreate", 1),
                        ("surge-zero", 3),
                        ("no-deadline", 2),
                    ):
                        await kube.patch(DEPLOYMENTS, name, {"spec": {"replicas": replicas}}, namespace=NS)
                    await kube.patch(
                        DEPLOYMENTS,
                        "all-percent",
                        {"spec": {"template": {"metadata": {"annotations": {"rollout": "after-a-year"}}}}},
                        namespace=NS,
                    )
                    await eventually(lambda: _no_mismatch(kube), "every ReplicaSet has its pods", timeout=60)
                    await eventually(lambda: _gone_is_tainted(kube), "the silent node tainted", timeout=60)
                    await settled(cluster, quiet=3.0)
                    converging = writes_over(cluster, began)
                    start = time.monotonic()
                    await anyio.sleep(WINDOW)
                    writes = writes_over(cluster, start)

                pod = await kube.get(PODS, marked, namespace=NS)
                pinned = await kube.get(PODS, "pinned", namespace=NS)
                pdb = await kube.get(PODDISRUPTIONBUDGETS, "none-may-go", namespace=NS)
                gone = await kube.get(NODES, "node-gone")
                deadline = await kube.get(DEPLOYMENTS, "deadline-5s", namespace=NS)
                forever = await kube.get(DEPLOYMENTS, "no-deadline", namespace=NS)
                # its kubelet is gone, so the pod stays Terminating (the pod GC's job, not ours)
                left_on_gone = [
                    p["metadata"]["name"]
                    for p in await kube.list_all(PODS, namespace=NS)
                    if p["spec"].get("nodeName") == "node-gone" and not p["metadata"].get("deletionTimestamp")
                ]
        finally:
            await kube.close()

    assert writes == [], (
        f"{len(writes)} writes in {WINDOW} s of an aged, converged cluster:\n{describe(writes)}"
    )
    assert any(w.resource == "pods" and w.method == "POST" for w in converging), "the manager did no work"
    # each stale mark was cleaned
    assert _condition(pod, "DisruptionTarget").get("status") == "False"
    assert marked not in ((pdb.get("status") or {}).get("disruptedPods") or {})
    # the silent node is unreachable and tainted; its pod was evicted (drain past its timeout, or taint)
    assert _condition(gone, "Ready").get("status") == "Unknown"
    assert any(t["key"] == "node.kubernetes.io/unreachable" for t in gone["spec"].get("taints") or [])
    assert left_on_gone == []
    # a scaled Deployment a year past its deadline completes (KCM reports NewReplicaSetAvailable)
    assert deadline["status"].get("availableReplicas") == 3
    assert _condition(deadline, "Progressing").get("reason") == "NewReplicaSetAvailable"
    # a year into a drain without deadline, the bare pod nobody answers for is still waited for
    assert not pinned["metadata"].get("deletionTimestamp")
    assert _condition(pinned, "EvacuationRequest").get("status") == "True"
    # "no deadline": no Progressing condition at all
    assert _condition(forever, "Progressing") == {}
    assert forever["status"].get("availableReplicas") == 2


async def _no_mismatch(kube: KubeClient) -> bool:
    return not await replica_set_mismatches(kube, NS)


async def _gone_is_tainted(kube: KubeClient) -> bool:
    node = await kube.get(NODES, "node-gone")
    return any(t["key"] == "node.kubernetes.io/unreachable" for t in node["spec"].get("taints") or [])
