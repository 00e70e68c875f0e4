"""Zero downtime beside KCM's own ReplicaSet and Deployment controllers: the replacement surge.

The ReplicaSet, Deployment and disruption controllers here play the stock kube-controller-manager:
aiokcm's, with the `NodeMaintenanceDeployment` gate off, which is KCM's behaviour (claim and adopt,
`ActivePodsWithRanks` with the deletion cost); they never answer an evacuation request. The
NodeMaintenance drain and `ReplacementSurgeController` are the default install beside them.

Availability is watched pod event by pod event (`AvailabilityWatch`), so a dip lasting one event is
seen; `replicas` must never be written, and no copy or deletion-cost mark may be left behind.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import (
    DEPLOYMENTS,
    NODEMAINTENANCES,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
    REPLICASETS,
    Resource,
)
from controllers.deployment import DeploymentController
from controllers.disruption import DisruptionController
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.config import NodeMaintenanceConfig
from controllers.replacementsurge import ReplacementSurgeController
from controllers.replacementsurge.copies import POD_DELETION_COST, PREVIOUS_COST_ANNOTATION, REPLACES_LABEL
from controllers.replicaset import ReplicaSetController
from localcluster.demo import NS, App, deployment, drained, ensure_crd, pdb, pod_available
from tests.controllers.harness import running_controllers
from tests.e2e.test_drain_zero_downtime import AvailabilityWatch
from tests.support.objects import node_maintenance
from tests.support.surge import leftovers
from tests.support.waiting import eventually

# Only the drain's gate: with NodeMaintenanceDeployment off, the ReplicaSet and Deployment
# controllers are KCM's, answering nothing.
RESOURCEQUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", True)
GATES = {"DeclarativeNodeMaintenance": True}
BESIDE_KCM = NodeMaintenanceConfig(surge_answers=True, bare_replicasets_answer=True)
TARGET = "node-1"
APPS = (App("solo", 1, pdb_min_available=1), App("web", 3), App("bare", 1))
POD_SPEC = {
    "terminationGracePeriodSeconds": 1,
    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
}


def beside_kcm(kube: KubeClient, *, surge_timeout: float = 600.0) -> Any:
    """KCM's ReplicaSet, Deployment and disruption controllers (aiokcm's, answering nothing), and the
    default install's drain and replacement surge."""
    return running_controllers(
        kube,
        ReplicaSetController,
        DeploymentController,
        DisruptionController,
        NodeMaintenanceController,
        lambda ctx: ReplacementSurgeController(
            ctx, name="replacement-surge", workers=2, surge_timeout=surge_timeout
        ),
        gates=GATES,
        configs=[BESIDE_KCM],
    )


def bare_replicaset(app: App) -> dict[str, Any]:
    labels = {"app": app.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": app.name, "namespace": NS},
        "spec": {
            "replicas": app.replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": POD_SPEC},
        },
    }


@pytest.fixture
async def cluster(cluster_factory: Any) -> AsyncIterator[Any]:
    async with cluster_factory(nodes=3, pod_start_delay=0.2, termination_cap=0.5) as c:
        yield c


async def _pods_of(kube: KubeClient, app: str) -> list[dict[str, Any]]:
    return [
        p
        for p in await kube.list_all(PODS, namespace=NS)
        if (p["metadata"].get("labels") or {}).get("app") == app
    ]


async def _settled_on(kube: KubeClient, nodes: set[str]) -> bool:
    for app in APPS:
        pods = await _pods_of(kube, app.name)
        if len(pods) != app.replicas or sum(pod_available(p) for p in pods) != app.replicas:
            return False
        if any(p["spec"].get("nodeName") not in nodes for p in pods):
            return False
    return True


async def _start_apps_on_target(kube: KubeClient, others: list[str]) -> None:
    for n in others:
        await kube.patch(NODES, n, {"spec": {"unschedulable": True}})
    for app in APPS:
        if app.name == "bare":
            await kube.create(REPLICASETS, bare_replicaset(app), namespace=NS)
        else:
            await kube.create(DEPLOYMENTS, deployment(app), namespace=NS)
        if app.pdb_min_available is not None:
            await kube.create(PODDISRUPTIONBUDGETS, pdb(app), namespace=NS)
    await eventually(lambda: _settled_on(kube, {TARGET}), f"every app available on {TARGET}", timeout=60)


async def _leftovers(kube: KubeClient) -> list[str]:
    return await leftovers(kube, NS)


async def _replicas(kube: KubeClient) -> dict[str, int]:
    out = {}
    for app in APPS:
        res = REPLICASETS if app.name == "bare" else DEPLOYMENTS
        out[app.name] = int((await kube.get(res, app.name, namespace=NS))["spec"]["replicas"])
    return out


async def test_a_drain_beside_kcm_surges_every_app_without_downtime(cluster: Any, kube: KubeClient) -> None:
    await ensure_crd(kube)
    nodes = sorted(n["metadata"]["name"] for n in await kube.list_all(NODES))
    others = [n for n in nodes if n != TARGET]
    async with beside_kcm(kube) as harness:
        await _start_apps_on_target(kube, others)
        for n in others:
            await kube.patch(NODES, n, {"spec": {"unschedulable": None}})
        before = await _replicas(kube)
        watch = AvailabilityWatch(APPS)
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: watch.run(kube, task_status=task_status))
            await kube.create(NODEMAINTENANCES, node_maintenance("upgrade", [TARGET], drain=True, timeout=0))

            async def done() -> bool:
                return drained(await kube.get(NODEMAINTENANCES, "upgrade"))

            await eventually(done, "the maintenance Drained", timeout=90)
            await eventually(
                lambda: _settled_on(kube, set(others)), "every app back off the node", timeout=60
            )
            tg.cancel_scope.cancel()
        assert await _replicas(kube) == before  # nothing an autoscaler or GitOps owns was written
        assert await _leftovers(kube) == []
        reasons = {e.reason for e in harness.events.events}
        # The surge says nothing of its own: the ReplicaSet's SuccessfulDelete of the departing pod
        # reports each replacement, the one event KCM's path writes for it.
        assert "SuccessfulDelete" in reasons, reasons
        assert "ReplacementSurgeGaveUp" not in reasons
    for app in APPS:
        assert watch.least[app.name] >= app.replicas, (app.name, watch.least)


async def test_a_maintenance_cancelled_mid_surge_leaves_the_workload_as_it_was(
    cluster: Any, kube: KubeClient
) -> None:
    """Nowhere to put the copies (the other nodes stay cordoned): deleting the maintenance deletes
    them and gives the pods back their own deletion cost; the old pods never moved."""
    await ensure_crd(kube)
    nodes = sorted(n["metadata"]["name"] for n in await kube.list_all(NODES))
    others = [n for n in nodes if n != TARGET]
    async with beside_kcm(kube):
        await _start_apps_on_target(kube, others)
        solo = (await _pods_of(kube, "solo"))[0]
        await kube.patch(
            PODS,
            solo["metadata"]["name"],
            {"metadata": {"annotations": {POD_DELETION_COST: "7"}}},
            namespace=NS,
        )
        original = {p["metadata"]["name"] for a in APPS for p in await _pods_of(kube, a.name)}
        nm = node_maintenance("upgrade", [TARGET], drain=True, timeout=0, overrideMaxUnschedulable=True)
        await kube.create(NODEMAINTENANCES, nm)

        async def copies_pending() -> bool:
            pods = await kube.list_all(PODS, namespace=NS, label_selector=REPLACES_LABEL)
            return len(pods) == 3  # one per account: solo's, bare's, and web's maxSurge of 1

        await eventually(copies_pending, "copies created and pending", timeout=30)
        await kube.delete(NODEMAINTENANCES, "upgrade")
        await eventually(lambda: _only_solo_cost_left(kube), "copies deleted and costs restored", timeout=30)
        now = {p["metadata"]["name"] for a in APPS for p in await _pods_of(kube, a.name)}
        assert now == original
        solo_now = await kube.get(PODS, solo["metadata"]["name"], namespace=NS)
        assert solo_now["metadata"]["annotations"][POD_DELETION_COST] == "7"
        assert (await _replicas(kube)) == {a.name: a.replicas for a in APPS}


async def _only_solo_cost_left(kube: KubeClient) -> bool:
    """No copy and no remembered cost anywhere; solo's pod has its own cost back."""
    left = await _leftovers(kube)
    return (
        len(left) == 1
        and left[0].startswith("deletion cost on solo-")
        and not any(
            PREVIOUS_COST_ANNOTATION in (p["metadata"].get("annotations") or {})
            for p in await kube.list_all(PODS, namespace=NS)
        )
    )


async def test_a_quota_that_refuses_the_copies_hands_the_pods_back_to_the_eviction(
    cluster: Any, kube: KubeClient
) -> None:
    """A ResourceQuota with no room for one more pod: every copy is refused (a Warning event on the
    pod saying why, as KCM's FailedCreate), and after the surge timeout the pods go back to the drain:
    `web` (no budget) is evicted, `solo`'s budget refuses and blocks the node, and `solo` keeps serving."""
    await ensure_crd(kube)
    nodes = sorted(n["metadata"]["name"] for n in await kube.list_all(NODES))
    others = [n for n in nodes if n != TARGET]
    apps = (APPS[0], APPS[1])  # solo (PDB minAvailable 1) and web
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "pods", "namespace": NS},
        "spec": {"hard": {"pods": "4"}},
    }
    async with beside_kcm(kube, surge_timeout=2.0) as harness:
        for n in others:
            await kube.patch(NODES, n, {"spec": {"unschedulable": True}})
        for app in apps:
            await kube.create(DEPLOYMENTS, deployment(app), namespace=NS)
            if app.pdb_min_available is not None:
                await kube.create(PODDISRUPTIONBUDGETS, pdb(app), namespace=NS)

        async def up() -> bool:
            pods = await kube.list_all(PODS, namespace=NS)
            return sum(1 for p in pods if pod_available(p)) == 4

        await eventually(up, "solo and web up on the node", timeout=60)
        await kube.create(RESOURCEQUOTAS, quota, namespace=NS)
        for n in others:
            await kube.patch(NODES, n, {"spec": {"unschedulable": None}})
        solo = (await _pods_of(kube, "solo"))[0]["metadata"]["name"]
        await kube.create(NODEMAINTENANCES, node_maintenance("quota", [TARGET], drain=True, timeout=0))

        async def handed_back() -> bool:
            status = (await kube.get(NODEMAINTENANCES, "quota")).get("status") or {}
            blocks = ((status.get("nodes") or {}).get(TARGET) or {}).get("blockingPods") or []
            web_left = [p for p in await _pods_of(kube, "web") if p["spec"].get("nodeName") == TARGET]
            return not web_left and any(b.get("reason") == "EvictionRefused" for b in blocks)

        await eventually(handed_back, "web evicted and solo blocked by its budget", timeout=60)
        reasons = set(harness.events.reasons())
        assert {"FailedCreateReplacement", "ReplacementSurgeGaveUp"} <= reasons, reasons
        refused = [e.message for e in harness.events.events if e.reason == "FailedCreateReplacement"]
        assert all("exceeded quota" in m for m in refused), refused
        assert (await kube.get(PODS, solo, namespace=NS))["metadata"].get("deletionTimestamp") is None
        assert [p for p in await kube.list_all(PODS, namespace=NS, label_selector=REPLACES_LABEL)] == []
