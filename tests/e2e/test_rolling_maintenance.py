"""A rolling reboot of four nodes, one at a time, each back and healthy before the next goes.

The README demo's apps (`solo`, one replica with a PDB `minAvailable: 1`, and `web`, three) run
on four nodes. One NodeMaintenance selects all four with `completion: Reboot` and the `nodeReady`,
`workloads` and a Prometheus gate (a real Prometheus scraping a metric the test holds at 0). A
kured-style agent reboots each node once it is drained (the simulated kubelets go NotReady, come
back with a new bootID, restart what is left). aiokcm's ReplicaSet, Deployment, disruption and
NodeMaintenance controllers run; the cluster is the embedded one or the real kube-apiserver with
kube-scheduler and KCM's other controllers.

Watched, not polled: a node watch records every cordon, boot and Ready change, and a pod watch
every availability change, so the order and the zero downtime are checked on every state the
API server went through.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NODEMAINTENANCES, NODES, PODDISRUPTIONBUDGETS
from controllers.deployment import DeploymentController
from controllers.disruption import DisruptionController
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.replicaset import ReplicaSetController
from localcluster.demo import APPS, NS, deployment, ensure_crd, pdb, pod_available
from tests.backends import cluster_on_backend
from tests.controllers.harness import running_controllers
from tests.e2e.rolling import NodeTimeline, rolling_maintenance, rollout_status
from tests.e2e.test_drain_zero_downtime import AvailabilityWatch
from tests.e2e.test_eviction_api_crds import kubectl
from tests.support.monitoring import Monitoring, monitoring_binaries_or_skip, running_monitoring
from tests.support.reboots import reboot_agent
from tests.support.waiting import eventually

GATES = {"DeclarativeNodeMaintenance": True, "NodeMaintenanceDeployment": True}
NAME = "kernel-patch"

pytestmark = pytest.mark.backends("local", "real")


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with cluster_on_backend(request, nodes=4, pod_start_delay=0.2, termination_cap=0.5) as c:
        yield c


@pytest.fixture
async def mon(tmp_path: Path) -> AsyncIterator[Monitoring]:
    async with running_monitoring(tmp_path, monitoring_binaries_or_skip()) as m:
        yield m


class AvailabilityHistory(AvailabilityWatch):
    """Availability after every pod event, with when it was seen (the node timeline's clock)."""

    def __init__(self) -> None:
        super().__init__(APPS)
        self.history: list[tuple[float, dict[str, int]]] = []

    def _record(self) -> None:
        super()._record()
        self.history.append((time.monotonic(), self.available()))

    def at(self, when: float) -> dict[str, int]:
        """What was available just before `when`."""
        seen = [counts for t, counts in self.history if t < when]
        return seen[-1] if seen else {}


async def _apps_available(kube: KubeClient) -> bool:
    for app in APPS:
        d = await kube.get(DEPLOYMENTS, app.name, namespace=NS)
        if ((d.get("status") or {}).get("availableReplicas") or 0) < app.replicas:
            return False
    return True


async def test_a_rolling_reboot_goes_one_node_at_a_time_behind_its_gates(
    cluster: Any, kube: KubeClient, mon: Monitoring
) -> None:
    await ensure_crd(kube)
    nodes = sorted(n["metadata"]["name"] for n in await kube.list_all(NODES))
    assert len(nodes) == 4
    mon.signal.set("aiokcm_test_signal", 0.0)
    await mon.wait_value("aiokcm_test_signal", 0.0)
    timeline = NodeTimeline()
    watch = AvailabilityHistory()
    rebooted: list[str] = []
    async with running_controllers(
        kube,
        ReplicaSetController,
        DeploymentController,
        DisruptionController,
        NodeMaintenanceController,
        gates=GATES,
    ):
        for app in APPS:
            await kube.create(DEPLOYMENTS, deployment(app), namespace=NS)
            if app.pdb_min_available is not None:
                await kube.create(PODDISRUPTIONBUDGETS, pdb(app), namespace=NS)
        await eventually(lambda: _apps_available(kube), "the demo's apps available", timeout=120)
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: timeline.run(kube, task_status=task_status))
            await tg.start(lambda task_status: watch.run(kube, task_status=task_status))
            tg.start_soon(
                functools.partial(
                    reboot_agent, cluster, maintenance=NAME, down_seconds=1.0, rebooted=rebooted
                )
            )
            await kube.create(
                NODEMAINTENANCES,
                rolling_maintenance(
                    NAME,
                    nodes,
                    completion="Reboot",
                    gates={
                        "nodeReady": {"timeoutSeconds": 120},
                        "workloads": {"timeoutSeconds": 120},
                        "prometheus": [
                            {
                                "name": "signal",
                                "address": mon.prometheus_url,
                                "query": "max(aiokcm_test_signal)",
                                "successCondition": "result[0] == 0",
                                "failureCondition": "result[0] > 0",
                                "intervalSeconds": 1,
                            }
                        ],
                    },
                ),
            )

            async def completed() -> bool:
                return (await rollout_status(kube, NAME)).get("phase") == "Completed"

            await eventually(completed, "the rolling maintenance Completed", timeout=240)
            tg.cancel_scope.cancel()

    status = await rollout_status(kube, NAME)
    assert status["completedNodes"] == 4, status
    assert {n: e["phase"] for n, e in status["nodes"].items()} == dict.fromkeys(nodes, "Completed")
    assert sorted(rebooted) == nodes, f"each node rebooted exactly once: {rebooted}"
    assert timeline.order_of_cordons() == nodes, timeline.order_of_cordons()
    assert timeline.most_unschedulable == 1, "more than one node was cordoned at a time"
    assert timeline.back_before_next(nodes) == []
    full = {a.name: a.replicas for a in APPS}
    for node in nodes[1:]:  # every app back at full strength before the next node was cordoned
        assert watch.at(timeline.nodes[node].cordoned[0]) == full, (
            node,
            watch.at(timeline.nodes[node].cordoned[0]),
        )
    for n in await kube.list_all(NODES):
        assert not n["spec"].get("unschedulable"), f"{n['metadata']['name']} left cordoned"
        annotations = n["metadata"].get("annotations") or {}
        assert "maintenance.aiokcm.io/maintenances" not in annotations, annotations
    gates = {(g["node"], g["name"]): g["result"] for g in status.get("gates") or []}
    assert gates == {(nodes[-1], name): "Successful" for name in ("nodeReady", "workloads", "signal")}, gates
    for app in APPS:
        assert watch.least[app.name] >= 1, f"{app.name} went down during the rollout: {watch.least}"
    code, out = await kubectl(cluster, "get", "nm", NAME)
    assert code == 0, out
    header, row = out.splitlines()[:2]
    assert header.split()[-4:] == ["PHASE", "DONE", "NODE", "AGE"], header
    assert row.split()[-3:-1] == ["Completed", "4"], row
    assert all(pod_available(p) for p in watch.pods.values() if not p["metadata"].get("deletionTimestamp"))
