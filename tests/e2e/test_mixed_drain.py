"""The SRE's trial: a mixed node drained with `aiokcm drain`, then six nodes under one maintenance.

On an 8-node local cluster (scheduler, kubelets, garbage collector, StatefulSet and DaemonSet
controllers, eviction) with aiokcm's ReplicaSet, Deployment, disruption and NodeMaintenance
controllers, node-1 carries: Deployments of 1 and 3 replicas (they surge), a Recreate Deployment
and one with maxSurge 0 (they cannot surge: evicted at once, one by one), a StatefulSet under a
PodDisruptionBudget that allows no disruption (blocked, the budget named), a DaemonSet pod
(skipped), a bare pod and an emptyDir pod (kubectl's refusals). `aiokcm drain` prints each pod's
fate up front, each blocker as it appears and each pod as it leaves (surged or evicted); it times
out saying what blocks. With the budget gone and kubectl's opt-ins it finishes.

Then one NodeMaintenance over node-1..node-6 with the default limits and
`evacuationTimeoutSeconds: 0`: one node drains at a time, in name order (watched event by event
on the nodes and on the maintenance's status); the cluster guard stops it at half the nodes
unschedulable (condition, no action) until it is overridden; what cannot surge is evicted at once
and what surges never is, so the Deployments keep serving throughout.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from prometheus_client import REGISTRY

from apiclient import ApiError, KubeClient
from apiclient.resources import (
    DAEMONSETS,
    DEPLOYMENTS,
    NODEMAINTENANCES,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
    STATEFULSETS,
)
from controller_manager import maintenance_cli
from controllers.deployment import DeploymentController
from controllers.disruption import DisruptionController
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.replicaset import ReplicaSetController
from localcluster.cluster import LocalCluster
from localcluster.demo import NS, App, deployment, ensure_crd, pod_available
from tests.controllers.harness import running_controllers
from tests.controllers.nodemaintenance.helpers import RolloutWatch
from tests.support.objects import node_maintenance
from tests.support.waiting import eventually

GATES = {"DeclarativeNodeMaintenance": True, "NodeMaintenanceDeployment": True}
TARGET = "node-1"
NODES_UNDER_MAINTENANCE = [f"node-{i}" for i in range(1, 7)]
POD_SPEC = {
    "terminationGracePeriodSeconds": 1,
    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
}


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(nodes=8, pod_start_delay=0.2, termination_cap=0.5) as c:
        yield c


def _apps() -> list[tuple[Any, dict[str, Any]]]:
    recreate = deployment(App("recreate", 1))
    recreate["spec"]["strategy"] = {"type": "Recreate"}
    template = {"metadata": {"labels": {"app": "db"}}, "spec": POD_SPEC}
    agent = {"metadata": {"labels": {"app": "agent"}}, "spec": POD_SPEC}
    return [
        (DEPLOYMENTS, deployment(App("solo", 1))),
        (DEPLOYMENTS, deployment(App("web", 3))),
        (DEPLOYMENTS, recreate),
        (DEPLOYMENTS, deployment(App("nosurge", 1, max_surge=0, max_unavailable=1))),
        (
            STATEFULSETS,
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "db"},
                "spec": {
                    "replicas": 1,
                    "serviceName": "db",
                    "selector": {"matchLabels": {"app": "db"}},
                    "template": template,
                },
            },
        ),
        (
            DAEMONSETS,
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "agent"},
                "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": agent},
            },
        ),
        (
            PODDISRUPTIONBUDGETS,
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "db"},
                "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}},
            },
        ),
        (
            PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "bare", "labels": {"app": "bare"}},
                "spec": {**POD_SPEC, "nodeName": TARGET},
            },
        ),
        (
            PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "scratch", "labels": {"app": "scratch"}},
                "spec": {**POD_SPEC, "nodeName": TARGET, "volumes": [{"name": "tmp", "emptyDir": {}}]},
            },
        ),
    ]


def _lines(text: str) -> dict[str, list[str]]:
    """`  node  namespace/pod  verb: why` lines, by pod."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        parts = line.split()
        if line.startswith("  ") and len(parts) >= 3 and "/" in parts[1]:
            out.setdefault(parts[1], []).append(" ".join(parts[2:]))
    return out


def _of(lines: dict[str, list[str]], app: str) -> list[list[str]]:
    """The lines of each pod of `app` (named `app-...`)."""
    found = [v for k, v in lines.items() if k.startswith(f"{NS}/{app}-")]
    assert found, (app, lines)
    return found


async def _available(kube: KubeClient, app: str, want: int) -> bool:
    pods = await kube.list_all(PODS, namespace=NS, label_selector=f"app={app}")
    return sum(1 for p in pods if pod_available(p)) >= want


async def _settled(kube: KubeClient) -> bool:
    for app, want in (("solo", 1), ("web", 3), ("recreate", 1), ("nosurge", 1), ("db", 1)):
        if not await _available(kube, app, want):
            return False
    return True


async def _cond(kube: KubeClient, name: str, type_: str) -> str | None:
    obj = await kube.get(NODEMAINTENANCES, name)
    return next(
        (c["status"] for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None
    )


def _errors() -> float:
    return (
        REGISTRY.get_sample_value(
            "controller_runtime_reconcile_errors_total", {"controller": "nodemaintenance"}
        )
        or 0.0
    )


async def _lowest_serving(kube: KubeClient, lowest: dict[str, int]) -> None:
    """Keep the fewest available pods each surging Deployment had at any poll."""
    while True:
        for app in ("solo", "web"):
            pods = await kube.list_all(PODS, namespace=NS, label_selector=f"app={app}")
            lowest[app] = min(lowest.get(app, 99), sum(1 for p in pods if pod_available(p)))
        await anyio.sleep(0.05)


async def test_mixed_drain_then_six_nodes_one_at_a_time(
    cluster: LocalCluster, kube: KubeClient, capsys: Any
) -> None:
    await ensure_crd(kube)
    errors_before = _errors()
    others = [f"node-{i}" for i in range(2, 9)]
    async with running_controllers(
        kube,
        ReplicaSetController,
        DeploymentController,
        DisruptionController,
        NodeMaintenanceController,
        gates=GATES,
    ) as h:
        for n in others:  # everything lands on the target first
            await kube.patch(NODES, n, {"spec": {"unschedulable": True}})
        for res, body in _apps():
            await kube.create(res, {**body, "metadata": {**body["metadata"], "namespace": NS}}, namespace=NS)
        await eventually(lambda: _settled(kube), "every workload available on the target", timeout=120)
        for n in others:
            await kube.patch(NODES, n, {"spec": {"unschedulable": None}})
        base = ["--kubeconfig", cluster.kubeconfig_path, "--poll-interval", "0.1"]

        # 1. Without opt-ins and under the budget: what moves moves, the rest is named.
        code = await maintenance_cli.main(["drain", TARGET, "--timeout", "8s", *base])
        captured = capsys.readouterr()
        lines = _lines(captured.out)
        assert code == 1, captured
        for app in ("solo", "web"):
            assert all(pod[0].startswith("surge: Deployment") for pod in _of(lines, app)), lines
        for app in ("recreate", "nosurge"):
            (pod,) = _of(lines, app)
            assert pod[0].startswith("evict:"), lines
            assert any(line.startswith("evicted: ") for line in pod), lines
        assert (
            lines[f"{NS}/db-0"][0].startswith("evict:") and "PodDisruptionBudget db" in lines[f"{NS}/db-0"][0]
        )
        assert any(
            line.startswith("blocked: EvictionRefused") and "db" in line for line in lines[f"{NS}/db-0"]
        )
        (agent,) = _of(lines, "agent")
        assert agent[0].startswith("skip: ignoring DaemonSet-managed Pods")
        assert lines[f"{NS}/bare"][0].startswith("block: cannot delete Pods that declare no controller")
        assert lines[f"{NS}/scratch"][0].startswith("block: cannot delete Pods with local storage")
        assert "blocked: NoController" in " ".join(lines[f"{NS}/bare"])
        assert "blocked: LocalStorage" in " ".join(lines[f"{NS}/scratch"])
        assert f"{NS}/db-0  EvictionRefused" in captured.err and "is still active" in captured.err
        await eventually(lambda: _available(kube, "web", 3), "web serving off the target")
        surged = [line for app in ("solo", "web") for pod in _of(lines, app) for line in pod[1:]]
        assert not surged or all(line.startswith("surged: ") for line in surged), surged

        # 2. The budget lifted and kubectl's opt-ins given: it finishes.
        await kube.delete(PODDISRUPTIONBUDGETS, "db", namespace=NS)
        code = await maintenance_cli.main(
            ["drain", TARGET, "--timeout", "60s", "--force", "--delete-emptydir-data", *base]
        )
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"drained: {TARGET}" in out
        lines = _lines(out)
        for name in ("db-0", "bare", "scratch"):
            assert any(line.startswith("evicted: ") for line in lines[f"{NS}/{name}"]), lines
        await eventually(lambda: _settled(kube), "every workload available again")

        # 3. Six nodes, the default limits: one at a time, and the cluster guard at 4 of 8.
        watch = RolloutWatch()
        lowest: dict[str, int] = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.nodes, kube)
            tg.start_soon(watch.maintenance, kube, "rolling")
            tg.start_soon(_lowest_serving, kube, lowest)
            await kube.create(
                NODEMAINTENANCES,
                node_maintenance(
                    "rolling",
                    NODES_UNDER_MAINTENANCE,
                    drain=True,
                    # no deadline: what cannot answer goes at once, what surges is never evicted
                    timeout=0,
                    force=True,
                    deleteEmptyDirData=True,
                ),
            )
            await eventually(
                lambda: _cond(kube, "rolling", "ClusterLimitReached"), "the guard checked", timeout=60
            )

            async def held() -> bool:
                return await _cond(kube, "rolling", "ClusterLimitReached") == "True"

            await eventually(held, "the cluster guard holding the fifth node back", timeout=120)
            obj = await kube.get(NODEMAINTENANCES, "rolling")
            phases = {n: e["phase"] for n, e in obj["status"]["nodes"].items()}
            assert phases == {
                **dict.fromkeys(NODES_UNDER_MAINTENANCE[:4], "Drained"),
                "node-5": "Waiting",
                "node-6": "Waiting",
            }, phases
            assert not (await kube.get(NODES, "node-5"))["spec"].get("unschedulable")
            await kube.patch(NODEMAINTENANCES, "rolling", {"spec": {"overrideMaxUnschedulable": True}})

            async def drained() -> bool:
                return await _cond(kube, "rolling", "Drained") == "True"

            await eventually(drained, "all six nodes drained", timeout=120)
            await anyio.sleep(2.0)  # the last watch events, and the syncs after Drained
            tg.cancel_scope.cancel()
        # Events without the noise: Drained announced once; pods that were only terminating or
        # awaiting their owner's surge never made the drain "blocked".
        assert h.events.reasons("rolling").count("Drained") == 1, h.events.reasons("rolling")
        assert "DrainBlocked" not in h.events.reasons("rolling"), h.events.reasons("rolling")
        assert watch.most_in_progress == 1, watch
        assert watch.most_cordoned_not_drained == 1, watch
        assert watch.cordon_order[1:] == NODES_UNDER_MAINTENANCE[1:], watch
        assert lowest["solo"] >= 1 and lowest["web"] >= 3, lowest  # zero downtime for what surges
        evicted = [e.message for e in h.events.events if e.reason == "EvictedPod"]
        assert any(f"{NS}/recreate-" in m for m in evicted) and any(f"{NS}/db-0" in m for m in evicted)
        assert not [m for m in evicted if f"{NS}/web-" in m or f"{NS}/solo-" in m], evicted
        # races lost along the way are conflicts, not errors that would page someone
        assert _errors() == errors_before
        for n in NODES_UNDER_MAINTENANCE:
            assert (await kube.get(NODES, n))["spec"]["unschedulable"] is True
        try:
            await kube.delete(NODEMAINTENANCES, "rolling")
        except ApiError as exc:
            assert exc.not_found
