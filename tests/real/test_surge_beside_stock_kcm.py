"""The replacement surge beside the stock kube-controller-manager, case by case, on the real server.

KCM runs all of its controllers (`real_stock_plane`), as on every managed cluster: its ReplicaSet
controller adopts the copies and chooses which pod to delete, its Deployment controller rolls out
and scales, its disruption controller keeps the budgets. aiokcm runs the default install's
NodeMaintenance drain and the replacement surge, in this process.

Each case watches the pods event by event (`PodLog`) and asserts what a user cares about:
availability never below what the workload's own `maxUnavailable` (and budget) allows, and
`replicas` and deletion costs ending where the user left them, with no copy left behind.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from anyio.abc import TaskStatus

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NODEMAINTENANCES, NODES, PODDISRUPTIONBUDGETS, PODS, Resource
from controllers.context import ControllerContext
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.config import NodeMaintenanceConfig
from controllers.replacementsurge import ReplacementSurgeController
from controllers.replacementsurge.copies import (
    POD_DELETION_COST,
    PREVIOUS_COST_ANNOTATION,
    REPLACED_ANNOTATION,
    REPLACES_LABEL,
)
from localcluster.demo import NS, App, deployment, drained, ensure_crd, pdb, pod_available
from realcluster import ControlPlane, RealCluster
from tests.controllers.harness import running_controllers
from tests.e2e.test_drain_zero_downtime import AvailabilityWatch
from tests.support.objects import node_maintenance
from tests.support.surge import leftovers
from tests.support.waiting import eventually

HORIZONTALPODAUTOSCALERS = Resource(
    "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True
)
GATES = {"DeclarativeNodeMaintenance": True}
BESIDE_KCM = NodeMaintenanceConfig(surge_answers=True, bare_replicasets_answer=True)
TARGET = "node-1"
# One stock-KCM control plane for the module: its tests stay on one xdist worker.
pytestmark = pytest.mark.xdist_group("stock-kcm")


@pytest.fixture
async def cluster(real_stock_plane: ControlPlane) -> AsyncIterator[RealCluster]:
    async with RealCluster(real_stock_plane, nodes=4, pod_start_delay=0.2, termination_cap=0.5) as real:
        yield real


@pytest.fixture
async def kube(cluster: RealCluster) -> AsyncIterator[KubeClient]:
    client = await cluster.client()
    try:
        await ensure_crd(client)
        yield client
    finally:
        await client.close()


def surge(timeout: float = 600.0) -> Callable[[ControllerContext], ReplacementSurgeController]:
    return lambda ctx: ReplacementSurgeController(
        ctx, name="replacement-surge", workers=2, surge_timeout=timeout
    )


def aiokcm(kube: KubeClient, *, timeout: float = 600.0) -> Any:
    """The default install's drain and surge, beside the stock KCM."""
    return running_controllers(
        kube, NodeMaintenanceController, surge(timeout), gates=GATES, configs=[BESIDE_KCM]
    )


def _app(pod: dict[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get("app", ""))


class PodLog(AvailabilityWatch):
    """Per app, after every pod event: the fewest available pods and the most pods not terminating.

    Copies (not yet adopted) count as neither, as KCM does not count them either; every copy ever
    seen is remembered by name."""

    def __init__(self, apps: tuple[App, ...]) -> None:
        super().__init__(apps)
        self.least = {}
        self.most: dict[str, int] = {}
        self.copies: set[str] = set()

    def _record(self) -> None:
        mine: dict[str, list[dict[str, Any]]] = {app: [] for app in self.apps}
        for name, pod in self.pods.items():
            if REPLACES_LABEL in (pod["metadata"].get("labels") or {}):
                self.copies.add(name)
            elif _app(pod) in mine:
                mine[_app(pod)].append(pod)
        for app, pods in mine.items():
            available = sum(1 for p in pods if pod_available(p))
            live = sum(1 for p in pods if not p["metadata"].get("deletionTimestamp"))
            self.least[app] = min(self.least.get(app, available), available)
            self.most[app] = max(self.most.get(app, live), live)


async def place_on(kube: KubeClient, nodes: set[str], apps: tuple[App, ...], **spec: Any) -> None:
    """Create `apps` with every pod on `nodes` (the other nodes cordoned meanwhile, then released)."""
    all_nodes = [n["metadata"]["name"] for n in await kube.list_all(NODES)]
    others = [n for n in all_nodes if n not in nodes]
    for n in others:
        await kube.patch(NODES, n, {"spec": {"unschedulable": True}})
    for app in apps:
        body = deployment(app)
        body["spec"].update(spec)
        await kube.create(DEPLOYMENTS, body, namespace=NS)
        if app.pdb_min_available is not None:
            await kube.create(PODDISRUPTIONBUDGETS, pdb(app), namespace=NS)

    async def settled() -> bool:
        pods = await kube.list_all(PODS, namespace=NS)
        return all(
            sum(
                1
                for p in pods
                if _app(p) == a.name and pod_available(p) and p["spec"].get("nodeName") in nodes
            )
            == a.replicas
            for a in apps
        )

    try:
        await eventually(settled, f"every app available on {sorted(nodes)}", timeout=60)
    except AssertionError as exc:
        # Where each app's pods stood (node, phase, available, deleting), and the nodes' taints
        # and cordons: which of KCM, the scheduler or the kubelets the placement waited on.
        pods = await kube.list_all(PODS, namespace=NS)
        seen = sorted(
            (
                _app(p) or "",
                p["spec"].get("nodeName") or "",
                (p.get("status") or {}).get("phase") or "",
                pod_available(p),
                bool(p["metadata"].get("deletionTimestamp")),
            )
            for p in pods
        )
        node_states = [
            (
                n["metadata"]["name"],
                bool(n["spec"].get("unschedulable")),
                [t.get("key") for t in n["spec"].get("taints") or []],
            )
            for n in await kube.list_all(NODES)
        ]
        raise AssertionError(f"{exc}: pods {seen}; nodes (name, cordoned, taints) {node_states}") from None


async def uncordon_all_but(kube: KubeClient, keep: set[str]) -> None:
    for n in await kube.list_all(NODES):
        if n["metadata"]["name"] not in keep and n["spec"].get("unschedulable"):
            await kube.patch(NODES, n["metadata"]["name"], {"spec": {"unschedulable": None}})


async def no_leftovers(kube: KubeClient) -> None:
    """No copy and no deletion-cost mark left (a deleted copy may take its grace period to go)."""
    left: list[str] = []

    async def clean() -> bool:
        left[:] = await leftovers(kube, NS)
        return not left

    try:
        await eventually(clean, "no copy or deletion-cost mark left", timeout=15)
    except AssertionError:
        pods = {p["metadata"]["name"]: p["metadata"] for p in await kube.list_all(PODS, namespace=NS)}
        raise AssertionError(f"left behind: {left}; pods: {pods}") from None


async def wait_drained(kube: KubeClient, name: str, timeout: float = 90) -> None:
    async def done() -> bool:
        return drained(await kube.get(NODEMAINTENANCES, name))

    await eventually(done, f"maintenance {name} Drained", timeout=timeout)


async def nothing_left_on(kube: KubeClient, node: str, apps: tuple[App, ...]) -> bool:
    pods = await kube.list_all(PODS, namespace=NS)
    on_node = [p for p in pods if _app(p) in {a.name for a in apps} and p["spec"].get("nodeName") == node]
    return not on_node and all(
        sum(1 for p in pods if _app(p) == a.name and pod_available(p)) >= a.replicas for a in apps
    )


async def spec_of(kube: KubeClient, name: str) -> dict[str, Any]:
    return dict((await kube.get(DEPLOYMENTS, name, namespace=NS))["spec"])


async def test_a_drain_mid_rollout_lets_the_rollout_take_the_departing_pods(
    cluster: RealCluster, kube: KubeClient
) -> None:
    """KCM's rollout scales the old ReplicaSet down while the node drains: the departing pods carry
    the lowest deletion cost, so the rollout removes them first and the surge shares its maxSurge."""
    web = App("web", 4)
    await place_on(kube, {TARGET}, (web,))
    await uncordon_all_but(kube, set())
    log = PodLog((web,))
    async with aiokcm(kube), anyio.create_task_group() as tg:
        await tg.start(lambda task_status: log.run(kube, task_status=task_status))
        patch = {"spec": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}}
        await kube.patch(DEPLOYMENTS, "web", patch, namespace=NS)
        await kube.create(NODEMAINTENANCES, node_maintenance("mid-rollout", [TARGET], drain=True, timeout=0))
        await wait_drained(kube, "mid-rollout")

        async def rolled_out() -> bool:
            status = (await kube.get(DEPLOYMENTS, "web", namespace=NS)).get("status") or {}
            return (
                status.get("updatedReplicas") == 4
                and status.get("availableReplicas") == 4
                and status.get("replicas") == 4
            )

        await eventually(rolled_out, "the rollout complete", timeout=60)
        await eventually(lambda: nothing_left_on(kube, TARGET, (web,)), "web off the node", timeout=30)
        tg.cancel_scope.cancel()
    assert log.least["web"] >= web.floor, log.least
    assert log.most["web"] <= web.replicas + web.max_surge + 1, log.most  # + the adopted copy's moment
    assert (await spec_of(kube, "web"))["replicas"] == 4
    await no_leftovers(kube)


async def test_a_user_scaling_during_the_surge_wins_and_an_autoscaler_scale_down_takes_the_departing_pod(
    cluster: RealCluster, kube: KubeClient
) -> None:
    """Copies wait (nowhere to run), a scaler takes replicas down by one through `scale`: KCM removes
    a departing pod (lowest cost), not a healthy one elsewhere; then the user scales up, the surge
    finishes, and `replicas` ends at the user's number, never written back."""
    web = App("web", 3)
    await place_on(kube, {TARGET, "node-2"}, (web,))
    await kube.patch(NODES, "node-2", {"spec": {"unschedulable": True}})  # the copies wait
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in await kube.list_all(PODS, namespace=NS)}
    log = PodLog((web,))
    nm = node_maintenance("scaled", [TARGET], drain=True, timeout=0, overrideMaxUnschedulable=True)
    async with aiokcm(kube) as harness, anyio.create_task_group() as tg:
        await tg.start(lambda task_status: log.run(kube, task_status=task_status))
        await kube.create(NODEMAINTENANCES, nm)
        await eventually(lambda: bool(log.copies), "a copy waiting for room", timeout=30)
        # As `kubectl scale`: a patch of the scale subresource (a PUT races KCM's status writes).
        await kube.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 2}}, namespace=NS, subresource="scale")

        async def scaled_down() -> bool:
            pods = [p for p in await kube.list_all(PODS, namespace=NS) if _app(p) == "web"]
            return (
                len(
                    [
                        p
                        for p in pods
                        if not p["metadata"].get("deletionTimestamp")
                        and REPLACES_LABEL not in p["metadata"].get("labels", {})
                    ]
                )
                == 2
            )

        await eventually(scaled_down, "KCM scaled web down to 2", timeout=30)
        kept = {
            p["metadata"]["name"]
            for p in await kube.list_all(PODS, namespace=NS)
            if _app(p) == "web" and not p["metadata"].get("deletionTimestamp")
        }
        on_other = {name for name, node in before.items() if node != TARGET}
        assert on_other <= kept, "the scale-down removed a pod that was not leaving"
        # As `kubectl scale`: a patch of the scale subresource (a PUT races KCM's status writes).
        await kube.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 4}}, namespace=NS, subresource="scale")
        await uncordon_all_but(kube, {TARGET})
        await wait_drained(kube, "scaled")
        assert log.least["web"] >= 2, log.least  # never below what the user asked for at the time
        await eventually(
            lambda: nothing_left_on(kube, TARGET, (App("web", 4),)), "web at 4 off the node", timeout=60
        )
        tg.cancel_scope.cancel()
    assert (await spec_of(kube, "web"))["replicas"] == 4
    await no_leftovers(kube)
    assert "ReplacementSurgeGaveUp" not in harness.events.reasons()


async def test_a_paused_deployment_drains_without_downtime_and_stays_paused(
    cluster: RealCluster, kube: KubeClient
) -> None:
    solo = App("solo", 1, pdb_min_available=1)
    await place_on(kube, {TARGET}, (solo,))
    await kube.patch(DEPLOYMENTS, "solo", {"spec": {"paused": True}}, namespace=NS)
    await uncordon_all_but(kube, set())
    log = PodLog((solo,))
    async with aiokcm(kube), anyio.create_task_group() as tg:
        await tg.start(lambda task_status: log.run(kube, task_status=task_status))
        await kube.create(NODEMAINTENANCES, node_maintenance("paused", [TARGET], drain=True, timeout=0))
        await wait_drained(kube, "paused")
        await eventually(lambda: nothing_left_on(kube, TARGET, (solo,)), "solo off the node", timeout=30)
        tg.cancel_scope.cancel()
    assert log.least["solo"] == 1, log.least
    spec = await spec_of(kube, "solo")
    assert spec["paused"] is True and spec["replicas"] == 1
    await no_leftovers(kube)


async def test_kcm_claims_the_handed_over_copies_without_adopting_them(
    cluster: RealCluster, kube: KubeClient
) -> None:
    """The hand-over writes the controller reference with the labels: KCM's ReplicaSet controller
    finds pods it already controls and deletes the departing ones with no fresh GET and no
    adoption patch of its own (no field of the copy is KCM's), out of its qps-20 budget."""
    web = App("web", 3)
    await place_on(kube, {TARGET}, (web,))
    await uncordon_all_but(kube, set())
    async with aiokcm(kube):
        await kube.create(NODEMAINTENANCES, node_maintenance("claimed", [TARGET], drain=True, timeout=0))
        await wait_drained(kube, "claimed")
        await eventually(lambda: nothing_left_on(kube, TARGET, (web,)), "web off the node", timeout=30)
    pods = [p for p in await kube.list_all(PODS, namespace=NS) if _app(p) == "web"]
    handed = [p for p in pods if REPLACED_ANNOTATION in (p["metadata"].get("annotations") or {})]
    assert len(handed) == 3, [p["metadata"]["name"] for p in pods]
    for pod in handed:
        [ref] = pod["metadata"]["ownerReferences"]
        assert ref["kind"] == "ReplicaSet" and ref["controller"] is True and ref["blockOwnerDeletion"] is True
        managers = {m.get("manager") for m in pod["metadata"].get("managedFields") or ()}
        assert "kube-controller-manager" not in managers, pod["metadata"]["managedFields"]
    await no_leftovers(kube)


async def test_a_budget_that_still_refuses_blocks_the_drain_and_cancelling_restores_the_pod(
    cluster: RealCluster, kube: KubeClient
) -> None:
    """A pod pinned to its node cannot be replaced elsewhere: after the surge timeout it is handed
    back to the eviction, which its budget refuses (reported as blocking). Deleting the maintenance
    puts back the pod's own deletion cost; nothing else changed."""
    pinned = App("pinned", 1, pdb_min_available=1)
    body = deployment(pinned)
    body["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": TARGET}
    await kube.create(DEPLOYMENTS, body, namespace=NS)
    await kube.create(PODDISRUPTIONBUDGETS, pdb(pinned), namespace=NS)

    async def running() -> list[dict[str, Any]]:
        return [
            p for p in await kube.list_all(PODS, namespace=NS) if _app(p) == "pinned" and pod_available(p)
        ]

    (pod,) = await eventually(running, "pinned running", timeout=60)
    await kube.patch(
        PODS, pod["metadata"]["name"], {"metadata": {"annotations": {POD_DELETION_COST: "5"}}}, namespace=NS
    )
    async with aiokcm(kube, timeout=3.0) as harness:
        await kube.create(NODEMAINTENANCES, node_maintenance("pinned", [TARGET], drain=True, timeout=0))

        async def refused() -> bool:
            status = (await kube.get(NODEMAINTENANCES, "pinned")).get("status") or {}
            blocks = ((status.get("nodes") or {}).get(TARGET) or {}).get("blockingPods") or []
            return any(
                b.get("reason") == "EvictionRefused" and "pinned" in b.get("message", "") for b in blocks
            )

        await eventually(refused, "the eviction refused by pinned's budget, reported", timeout=40)
        assert "ReplacementSurgeGaveUp" in harness.events.reasons()
        await kube.delete(NODEMAINTENANCES, "pinned")

        async def restored() -> bool:
            now = await kube.get(PODS, pod["metadata"]["name"], namespace=NS)
            annotations = now["metadata"].get("annotations") or {}
            return annotations.get(POD_DELETION_COST) == "5" and PREVIOUS_COST_ANNOTATION not in annotations

        await eventually(restored, "the pod's own deletion cost back", timeout=30)
    pods = [p for p in await kube.list_all(PODS, namespace=NS) if _app(p) == "pinned"]
    assert [p["metadata"]["name"] for p in pods] == [pod["metadata"]["name"]]
    assert (await spec_of(kube, "pinned"))["replicas"] == 1


async def test_a_manager_killed_mid_surge_is_resumed_by_the_next_one_without_a_second_copy(
    cluster: RealCluster, kube: KubeClient
) -> None:
    solo = App("solo", 1, pdb_min_available=1)
    await place_on(kube, {TARGET}, (solo,))
    log = PodLog((solo,))
    nm = node_maintenance("resumed", [TARGET], drain=True, timeout=0, overrideMaxUnschedulable=True)
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: log.run(kube, task_status=task_status))
        async with aiokcm(kube):
            await kube.create(NODEMAINTENANCES, nm)
            await eventually(lambda: bool(log.copies), "a copy waiting for room", timeout=30)
        # Killed any time after its create reached the server: the copy is the record, not its event.
        await uncordon_all_but(kube, {TARGET})
        async with aiokcm(kube):
            await wait_drained(kube, "resumed")
            await eventually(lambda: nothing_left_on(kube, TARGET, (solo,)), "solo off the node", timeout=30)
        tg.cancel_scope.cancel()
    assert len(log.copies) == 1, log.copies
    [left] = [p for p in await kube.list_all(PODS, namespace=NS) if _app(p) == "solo"]
    assert REPLACED_ANNOTATION in (left["metadata"].get("annotations") or {})  # the copy, handed over
    assert log.least["solo"] == 1
    assert (await spec_of(kube, "solo"))["replicas"] == 1
    await no_leftovers(kube)


async def test_two_maintenances_draining_one_deployment_share_its_surge_budget(
    cluster: RealCluster, kube: KubeClient
) -> None:
    web = App("web", 4)
    await place_on(kube, {TARGET, "node-2"}, (web,))
    await uncordon_all_but(kube, set())
    log = PodLog((web,))
    async with aiokcm(kube), anyio.create_task_group() as tg:
        await tg.start(lambda task_status: log.run(kube, task_status=task_status))
        await kube.create(NODEMAINTENANCES, node_maintenance("a", [TARGET], drain=True, timeout=0))
        await kube.create(NODEMAINTENANCES, node_maintenance("b", ["node-2"], drain=True, timeout=0))
        await wait_drained(kube, "a")
        await wait_drained(kube, "b")
        await eventually(lambda: nothing_left_on(kube, "node-2", (web,)), "web off both nodes", timeout=30)
        tg.cancel_scope.cancel()
    assert log.least["web"] >= 4, log.least
    # One budget: never more than one copy in flight, so never more than maxSurge above replicas
    # (plus, for one moment, the adopted copy before KCM deletes its departing pod).
    assert log.most["web"] <= 4 + 1, log.most
    assert (await spec_of(kube, "web"))["replicas"] == 4
    await no_leftovers(kube)


async def test_a_gitops_tool_and_an_autoscaler_pinning_replicas_find_nothing_to_revert(
    cluster: RealCluster, kube: KubeClient
) -> None:
    """A GitOps tool that reverts `replicas` to what it declared, and a real HorizontalPodAutoscaler
    pinned at that number (min = max), beside the drain: the surge never writes `replicas`, so the
    tool reverts nothing and the autoscaler has nothing to undo, and the drain has zero downtime."""
    web = App("web", 3, pdb_min_available=2)
    await place_on(kube, {TARGET}, (web,))
    await uncordon_all_but(kube, set())
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 3,
            "maxReplicas": 3,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
                }
            ],
        },
    }
    await kube.create(HORIZONTALPODAUTOSCALERS, hpa, namespace=NS)
    reverts: list[int] = []

    async def gitops(*, task_status: TaskStatus[None]) -> None:
        d = await kube.get(DEPLOYMENTS, "web", namespace=NS)
        rv = d["metadata"]["resourceVersion"]
        task_status.started()
        while True:
            async with kube.watch(DEPLOYMENTS, namespace=NS, resource_version=rv) as events:
                async for ev in events:
                    rv = ev.object["metadata"].get("resourceVersion") or rv
                    if ev.type == "MODIFIED" and ev.object["spec"].get("replicas") != 3:
                        reverts.append(int(ev.object["spec"]["replicas"]))
                        await kube.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 3}}, namespace=NS)

    log = PodLog((web,))
    generation = (await kube.get(DEPLOYMENTS, "web", namespace=NS))["metadata"]["generation"]
    async with aiokcm(kube), anyio.create_task_group() as tg:
        await tg.start(lambda task_status: log.run(kube, task_status=task_status))
        await tg.start(lambda task_status: gitops(task_status=task_status))
        await kube.create(NODEMAINTENANCES, node_maintenance("gitops", [TARGET], drain=True, timeout=0))
        await wait_drained(kube, "gitops")
        await eventually(lambda: nothing_left_on(kube, TARGET, (web,)), "web off the node", timeout=30)
        tg.cancel_scope.cancel()
    assert reverts == []
    assert (await kube.get(DEPLOYMENTS, "web", namespace=NS))["metadata"]["generation"] == generation
    assert log.least["web"] >= 3, log.least
    await no_leftovers(kube)


async def test_a_maintenance_cancelled_mid_surge_deletes_its_copies_and_restores_costs(
    cluster: RealCluster, kube: KubeClient
) -> None:
    """The copies wait (nowhere else to run) when the maintenance is deleted: they go, each pod gets
    its own deletion cost back (a user's `7` included), and no pod of the workload moved."""
    apps = (App("solo", 1, pdb_min_available=1), App("web", 3))
    await place_on(kube, {TARGET}, apps)
    solo = next(p for p in await kube.list_all(PODS, namespace=NS) if _app(p) == "solo")
    await kube.patch(
        PODS, solo["metadata"]["name"], {"metadata": {"annotations": {POD_DELETION_COST: "7"}}}, namespace=NS
    )
    original = {p["metadata"]["name"] for p in await kube.list_all(PODS, namespace=NS)}
    nm = node_maintenance("cancelled", [TARGET], drain=True, timeout=0, overrideMaxUnschedulable=True)
    async with aiokcm(kube):
        await kube.create(NODEMAINTENANCES, nm)

        async def copies_waiting() -> bool:
            return len(await kube.list_all(PODS, namespace=NS, label_selector=REPLACES_LABEL)) == 2

        await eventually(copies_waiting, "a copy per Deployment, waiting", timeout=30)
        await kube.delete(NODEMAINTENANCES, "cancelled")

        async def restored() -> bool:
            pods = await kube.list_all(PODS, namespace=NS)
            costs = {
                p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get(POD_DELETION_COST)
                for p in pods
            }
            remembered = [
                p for p in pods if PREVIOUS_COST_ANNOTATION in (p["metadata"].get("annotations") or {})
            ]
            live = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
            others = {n: c for n, c in costs.items() if n != solo["metadata"]["name"]}
            return (
                live == original
                and not remembered
                and costs.get(solo["metadata"]["name"]) == "7"
                and not any(others.values())
            )

        await eventually(restored, "copies gone, costs back", timeout=30)
    assert {a.name: (await spec_of(kube, a.name))["replicas"] for a in apps} == {"solo": 1, "web": 3}
