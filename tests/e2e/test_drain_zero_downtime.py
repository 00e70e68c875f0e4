"""Issue 10's "done when": `aiokcm drain` empties a node and no application ever goes down.

Three nodes; Deployments `single` (1 replica) and `triple` (3 replicas) and `guarded` (1 replica,
PDB `minAvailable: 1`), all `maxSurge: 1, maxUnavailable: 0`; every one of their pods starts on
the node to drain (the other nodes are cordoned during the roll-out), the hardest layout. aiokcm's
ReplicaSet, Deployment, disruption and NodeMaintenance controllers run; the cluster provides the
scheduler, kubelets, garbage collector and the eviction API: the embedded ones, or on the real
backend kube-apiserver, kube-scheduler and kube-controller-manager's garbage collector. `aiokcm drain` is the real CLI
entry point (`controller_manager.maintenance_cli.main`), talking to the cluster over HTTP.

Availability is watched, not polled: a WATCH on pods replays every state the API server went
through, in order, so a dip to zero lasting a millisecond is still seen. `kubectl drain` of the
same layout takes `single` to zero and is blocked forever by `guarded`'s PDB.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from anyio.abc import TaskStatus

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NODEMAINTENANCES, NODES, PODDISRUPTIONBUDGETS, PODS
from controller_manager import maintenance_cli
from controllers.deployment import DeploymentController
from controllers.disruption import DisruptionController
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.replicaset import ReplicaSetController
from localcluster.demo import NS, App, deployment, drained, ensure_crd, pdb, pod_available
from tests.backends import cluster_on_backend
from tests.controllers.harness import running_controllers
from tests.support.waiting import eventually

APPS = (App("single", 1), App("triple", 3), App("guarded", 1, pdb_min_available=1))
GATES = {"DeclarativeNodeMaintenance": True, "NodeMaintenanceDeployment": True}
TARGET = "node-1"

pytestmark = pytest.mark.backends("local", "real")


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """Fast kubelets where the backend lets us choose (pods Ready 0.2 s after binding, termination
    capped at 0.5 s); the test only waits for states, so the real kubelets' pace changes nothing."""
    async with cluster_on_backend(request, nodes=3, pod_start_delay=0.2, termination_cap=0.5) as c:
        yield c


class AvailabilityWatch:
    """Available replicas per app after every pod event, from a LIST then a WATCH of pods."""

    def __init__(self, apps: tuple[App, ...]) -> None:
        self.apps = {a.name: a for a in apps}
        self.pods: dict[str, dict[str, Any]] = {}
        self.least = {a.name: a.replicas for a in apps}
        self.events = 0

    def available(self) -> dict[str, int]:
        counts = dict.fromkeys(self.apps, 0)
        for pod in self.pods.values():
            app = (pod["metadata"].get("labels") or {}).get("app")
            if app in counts and pod_available(pod):
                counts[app] += 1
        return counts

    def _record(self) -> None:
        for app, count in self.available().items():
            self.least[app] = min(self.least[app], count)

    async def run(self, client: KubeClient, *, task_status: TaskStatus[None]) -> None:
        page = await client.list(PODS, namespace=NS)
        self.pods = {p["metadata"]["name"]: p for p in page["items"]}
        self._record()
        rv = page["metadata"]["resourceVersion"]
        started = False
        while True:  # the server may end a watch; carry on from the last version seen
            async with client.watch(PODS, namespace=NS, resource_version=rv) as events:
                if not started:
                    task_status.started()
                    started = True
                async for ev in events:
                    if ev.type == "ERROR":
                        raise AssertionError(f"pod watch failed, availability unknown: {ev.object}")
                    rv = ev.object["metadata"].get("resourceVersion") or rv
                    if ev.type == "BOOKMARK":
                        continue
                    name = ev.object["metadata"]["name"]
                    if ev.type == "DELETED":
                        self.pods.pop(name, None)
                    else:
                        self.pods[name] = ev.object
                    self.events += 1
                    self._record()


async def _app_pods(kube: KubeClient) -> dict[str, list[dict[str, Any]]]:
    by_app: dict[str, list[dict[str, Any]]] = {a.name: [] for a in APPS}
    for pod in await kube.list_all(PODS, namespace=NS):
        app = (pod["metadata"].get("labels") or {}).get("app")
        if app in by_app:
            by_app[app].append(pod)
    return by_app


async def _all_available_on(kube: KubeClient, nodes: set[str]) -> bool:
    """Every app at full strength, every pod (terminating ones too) on `nodes`."""
    by_app = await _app_pods(kube)
    return all(
        sum(pod_available(p) for p in by_app[a.name]) == a.replicas
        and all(p["spec"].get("nodeName") in nodes for p in by_app[a.name])
        for a in APPS
    )


async def test_aiokcm_drain_never_leaves_an_app_without_replicas(
    cluster: Any, kube: KubeClient, capsys: Any
) -> None:
    await ensure_crd(kube)
    nodes = sorted(n["metadata"]["name"] for n in await kube.list_all(NODES))
    others = [n for n in nodes if n != TARGET]
    assert TARGET in nodes and len(others) == 2

    async with running_controllers(
        kube,
        ReplicaSetController,
        DeploymentController,
        DisruptionController,
        NodeMaintenanceController,
        gates=GATES,
    ):
        for n in others:
            await kube.patch(NODES, n, {"spec": {"unschedulable": True}})
        for app in APPS:
            await kube.create(DEPLOYMENTS, deployment(app), namespace=NS)
            if app.pdb_min_available is not None:
                await kube.create(PODDISRUPTIONBUDGETS, pdb(app), namespace=NS)
        await eventually(
            lambda: _all_available_on(kube, {TARGET}), f"every app available on {TARGET}", timeout=120
        )
        for n in others:
            await kube.patch(NODES, n, {"spec": {"unschedulable": None}})

        async def budget_computed() -> bool:
            status = (await kube.get(PODDISRUPTIONBUDGETS, "guarded", namespace=NS)).get("status") or {}
            return status.get("currentHealthy") == 1 and status.get("disruptionsAllowed") == 0

        # The disruption controller is live: `guarded` may not lose its only pod by eviction.
        await eventually(
            budget_computed, "guarded's PDB computed (1 healthy, 0 disruptions allowed)", timeout=120
        )

        watch = AvailabilityWatch(APPS)
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: watch.run(kube, task_status=task_status))
            assert watch.available() == {a.name: a.replicas for a in APPS}
            code = await maintenance_cli.main(
                [
                    "drain",
                    TARGET,
                    "--kubeconfig",
                    cluster.kubeconfig_path,
                    "--reason",
                    "e2e: kernel upgrade",
                    "--timeout",
                    "150s",
                    "--poll-interval",
                    "0.2",
                ]
            )
            out = capsys.readouterr().out
            assert code == 0, f"aiokcm drain failed:\n{out}"
            assert f"drained: {TARGET}" in out
            # The old pods are gone from the drained node and replacements serve elsewhere.
            await eventually(
                lambda: _all_available_on(kube, set(others)),
                "every app back at full strength off the drained node",
                timeout=120,
            )
            tg.cancel_scope.cancel()

    moved = sum(a.replicas for a in APPS)
    assert watch.events >= 2 * moved, f"the watch saw too little of the drain ({watch.events} pod events)"
    for app in APPS:
        assert watch.least[app.name] >= max(1, app.floor), (
            f"{app.name} dropped to {watch.least[app.name]} available replicas during the drain "
            f"(replicas {app.replicas}, maxUnavailable {app.max_unavailable}); least per app: {watch.least}"
        )

    # The declarative path did the work (not the CLI's kubectl-style fallback): our NodeMaintenance is
    # Drained for its current spec, and the node stays cordoned for the maintenance to proceed.
    nm = await kube.get(NODEMAINTENANCES, maintenance_cli.maintenance_name(TARGET))
    assert drained(nm), nm.get("status")
    assert (await kube.get(NODES, TARGET))["spec"].get("unschedulable") is True
