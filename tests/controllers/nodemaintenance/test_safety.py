"""A NodeMaintenance never loses data without an opt-in, says honestly what it did, and says it in the logs.

On the local cluster with real informers, kubelets and the eviction API (PodDisruptionBudgets
computed by aiokcm's disruption controller). Owners are real objects; no controller of their kind
runs, so a StatefulSet here never replaces its pods and a ReplicaSet never answers on its own.
"""

from __future__ import annotations

import io
from collections.abc import MutableMapping
from typing import Any

import anyio
import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NODEMAINTENANCES, NODES, PODDISRUPTIONBUDGETS, PODS, REPLICASETS
from controller_manager.maintenance_cli import build_parser, maintenance_name, run
from controllers.context import ControllerContext
from controllers.disruption import DisruptionController
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.config import NodeMaintenanceConfig
from controllers.nodemaintenance.workload import TIMEOUT_ANNOTATION, WAIT_ANNOTATION
from nodemaintenancelease import lease
from nodemaintenancelease.gate import LeaseDecision, MaintenanceLeaseGate
from tests.controllers.harness import build, running_controllers
from tests.controllers.nodemaintenance.helpers import (
    GATES,
    NO_CLUSTER_LIMIT,
    NS,
    condition,
    gone_or_terminating,
    make_owner,
    make_pod,
    nm_gone,
    node,
    pod,
)
from tests.support.objects import node_maintenance
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("cluster", "crd")

EMPTY_DIR = [{"name": "scratch", "emptyDir": {}}]


async def running(kube: KubeClient, *names: str) -> bool:
    for name in names:
        p = await pod(kube, name)
        if p is None or (p.get("status") or {}).get("phase") != "Running":
            return False
    return True


def blocked_gauge(reason: str) -> float | None:
    return REGISTRY.get_sample_value("aiokcm_nodemaintenance_blocked_pods", {"reason": reason})


def blocking_of(obj: dict[str, Any], node_name: str) -> dict[str, dict[str, str]]:
    entry = ((obj.get("status") or {}).get("nodes") or {}).get(node_name) or {}
    return {b["name"]: b for b in entry.get("blockingPods") or []}


async def test_bare_and_emptydir_pods_are_evicted_only_with_opt_in(
    kube: KubeClient, node_names: list[str]
) -> None:
    target = node_names[0]
    await make_pod(kube, "bare", target, owner=None)
    await make_pod(kube, "cache", target, owner="StatefulSet", volumes=EMPTY_DIR)
    with capture_logs() as logs:
        await _opt_in_drain(kube, target)
    withheld = [e for e in logs if e.get("event") == "eviction withheld"]
    assert {(e["pod"], e["reason"]) for e in withheld} == {
        ("default/bare", "NoController"),
        ("default/cache", "LocalStorage"),
    }
    assert len(withheld) == 2, withheld  # once per pod, not once per sync


async def _opt_in_drain(kube: KubeClient, target: str) -> None:
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES) as h:
        await kube.create(NODEMAINTENANCES, node_maintenance("safe", [target], drain=True))

        async def blocked() -> dict[str, Any] | None:
            obj = await kube.get(NODEMAINTENANCES, "safe")
            c = condition(obj, "Blocked")
            # Until the StatefulSet reaches the controller's cache, waiting for it to answer is the
            # safe guess for its pod (AwaitingEvacuation); then the pod's local data blocks it.
            reasons = {name: b["reason"] for name, b in blocking_of(obj, target).items()}
            settled = reasons == {"bare": "NoController", "cache": "LocalStorage"}
            return obj if c and c["status"] == "True" and settled else None

        obj = await eventually(blocked, "both pods listed as blocking")
        blocking = blocking_of(obj, target)
        assert blocking["bare"]["reason"] == "NoController"
        assert (
            blocking["bare"]["message"]
            == "cannot delete Pods that declare no controller (use --force to override)"
        )
        assert blocking["cache"]["reason"] == "LocalStorage"
        assert blocking["cache"]["message"] == (
            "cannot delete Pods with local storage (use --delete-emptydir-data to override)"
        )
        assert not await gone_or_terminating(kube, "bare")
        assert not await gone_or_terminating(kube, "cache")
        drained = condition(obj, "Drained")
        assert drained is not None and drained["status"] == "False"
        assert "EvictedPod" not in h.events.reasons("safe")
        assert "DrainBlocked" in h.events.reasons("safe")
        for reason in ("NoController", "LocalStorage"):
            await eventually(
                lambda r=reason: blocked_gauge(r) == 1, f"the blocked-pods gauge at 1 for {reason}"
            )

        await kube.patch(NODEMAINTENANCES, "safe", {"spec": {"force": True, "deleteEmptyDirData": True}})
        await eventually(lambda: gone_or_terminating(kube, "bare"), "the bare pod evicted with force")
        await eventually(
            lambda: gone_or_terminating(kube, "cache"), "the emptyDir pod evicted with deleteEmptyDirData"
        )
        evicted = [e.message for e in h.events.events if e.reason == "EvictedPod"]
        assert any("default/bare" in m and "has no controller" in m for m in evicted), evicted
        assert not any("its owner did not answer" in m for m in evicted)
        await eventually(lambda: blocked_gauge("NoController") == 0, "the gauge back to 0 once evicted")


async def test_statefulset_pods_are_evicted_promptly_one_at_a_time_under_their_pdb(
    kube: KubeClient, node_names: list[str]
) -> None:
    target = node_names[0]
    db = await make_owner(kube, "StatefulSet", "db")
    for name in ("db-0", "db-1"):
        await make_pod(kube, name, target, owner="StatefulSet", owner_obj=db, labels={"app": "db"})
    patient = await make_owner(kube, "StatefulSet", "patient", annotations={WAIT_ANNOTATION: "true"})
    await make_pod(kube, "patient-0", target, owner="StatefulSet", owner_obj=patient)
    await make_pod(kube, "web", target, owner="ReplicaSet", answers=True)
    await kube.create(
        PODDISRUPTIONBUDGETS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        },
        namespace=NS,
    )
    await eventually(lambda: running(kube, "db-0", "db-1"), "the db pods running")
    with capture_logs() as logs:
        async with running_controllers(
            kube, DisruptionController, NodeMaintenanceController, gates=GATES
        ) as h:

            async def budget() -> bool:
                st = (await kube.get(PODDISRUPTIONBUDGETS, "db", namespace=NS)).get("status") or {}
                return st.get("currentHealthy") == 2 and st.get("disruptionsAllowed") == 1

            await eventually(budget, "the db budget computed (1 disruption allowed)")
            # The maintenance's own timeout is the default 180 s: nothing here may wait for it.
            await kube.create(NODEMAINTENANCES, node_maintenance("sts", [target], drain=True))

            async def one_gone_one_refused() -> dict[str, Any] | None:
                gone = [n for n in ("db-0", "db-1") if await gone_or_terminating(kube, n)]
                obj = await kube.get(NODEMAINTENANCES, "sts")
                blocking = blocking_of(obj, target)
                kept = [n for n in ("db-0", "db-1") if n not in gone]
                if len(gone) == 1 and kept and blocking.get(kept[0], {}).get("reason") == "EvictionRefused":
                    return blocking
                return None

            blocking = await eventually(
                one_gone_one_refused, "one db pod evicted, the other held by the budget", timeout=60
            )
            kept = next(
                n for n in ("db-0", "db-1") if n in blocking and blocking[n]["reason"] == "EvictionRefused"
            )
            assert "disruption budget db" in blocking[kept]["message"], blocking[kept]
            # Asked to wait, and answering owners, are not evicted before their time.
            assert blocking["patient-0"]["reason"] == "AwaitingEvacuation"
            assert "evicted after" in blocking["patient-0"]["message"]
            assert blocking["web"]["reason"] == "AwaitingEvacuation"
            assert not await gone_or_terminating(kube, "patient-0")
            assert not await gone_or_terminating(kube, "web")
            assert "EvictionRefused" in h.events.reasons("sts")
            await kube.delete(NODEMAINTENANCES, "sts")
            await eventually(lambda: nm_gone(kube, "sts"), "the maintenance released")

    def logged(event: str) -> list[MutableMapping[str, Any]]:
        return [e for e in logs if e.get("event") == event and e.get("log_level") == "info"]

    assert any(e["node"] == target and e["maintenance"] == "sts" for e in logged("cordoned node"))
    assert any(
        e["pod"] == "default/web" and e["maintenance"] == "sts" for e in logged("requested evacuation")
    )
    assert any(e["pod"].startswith("default/db-") and e["node"] == target for e in logged("evicted pod"))
    refused = logged("eviction refused")
    assert any(e["pod"] == f"default/{kept}" and "disruption budget db" in e["message"] for e in refused)
    assert any(e["pod"] == "default/web" for e in logged("withdrew evacuation request"))
    assert any(e["node"] == target for e in logged("uncordoned node"))


async def test_a_selector_that_matches_nothing_never_reports_drained(kube: KubeClient) -> None:
    typo = node_maintenance("typo", [], drain=True)
    typo["spec"]["nodeSelector"] = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["nod-1"]}]}
        ]
    }
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES) as h:
        await kube.create(NODEMAINTENANCES, typo)

        async def reported() -> dict[str, Any] | None:
            obj = await kube.get(NODEMAINTENANCES, "typo")
            c = condition(obj, "NodesSelected")
            return obj if c and c["status"] == "False" else None

        obj = await eventually(reported, "NodesSelected=False")
        selected = condition(obj, "NodesSelected")
        assert selected is not None and selected["reason"] == "NoNodesSelected"
        for type_ in ("Cordoned", "Drained"):
            c = condition(obj, type_)
            assert c is not None and (c["status"], c["reason"]) == ("False", "NoNodesSelected"), c
        await eventually(lambda: "NoNodesSelected" in h.events.reasons("typo"), "a NoNodesSelected event")
        assert h.events.reasons("typo").count("NoNodesSelected") == 1


async def test_cli_checks_every_node_before_changing_anything(
    kube: KubeClient, node_names: list[str]
) -> None:
    target = node_names[0]
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["drain", target, "node-99", "--timeout", "5s"])
    assert await run(args, kube, out=out, err=err) == 1
    assert 'nodes "node-99" not found; nothing was changed' in err.getvalue()
    assert (await kube.list(NODEMAINTENANCES))["items"] == []
    assert not (await node(kube, target))["spec"].get("unschedulable")
    for command in ("cordon", "uncordon"):
        out = io.StringIO()
        args = build_parser().parse_args([command, target, "--dry-run"])
        assert await run(args, kube, out=out, err=err) == 0
        assert f"node/{target} would be {command}ed (dry run)" in out.getvalue()
    assert (await kube.list(NODEMAINTENANCES))["items"] == []
    assert not (await node(kube, target))["spec"].get("unschedulable")


async def test_cli_timeout_says_the_maintenance_goes_on_and_can_cancel_it(
    kube: KubeClient, node_names: list[str]
) -> None:
    target = node_names[0]
    await make_pod(kube, "lonely", target, owner=None)
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES):
        out, err = io.StringIO(), io.StringIO()
        args = build_parser().parse_args(["drain", target, "--timeout", "2s", "--poll-interval", "0.1"])
        assert await run(args, kube, out=out, err=err) == 1
        text = err.getvalue()
        assert "timed out after 2s waiting for Drained" in text
        assert "default/lonely  NoController: cannot delete Pods that declare no controller" in text
        assert f"nodemaintenance {maintenance_name(target)} is still active" in text
        assert f"aiokcm uncordon {target}" in text and "--cancel-on-timeout" in text
        assert "drained" not in out.getvalue().splitlines()[-1]
        assert not await nm_gone(kube, maintenance_name(target))

        out, err = io.StringIO(), io.StringIO()
        args = build_parser().parse_args(
            ["drain", target, "--timeout", "1s", "--poll-interval", "0.1", "--cancel-on-timeout"]
        )
        assert await run(args, kube, out=out, err=err) == 1
        assert "cancelled: deleted nodemaintenance" in err.getvalue()
        await eventually(lambda: nm_gone(kube, maintenance_name(target)), "the maintenance cancelled")
        await eventually(lambda: _schedulable(kube, target), "the node uncordoned")
        assert not await gone_or_terminating(kube, "lonely")


async def _schedulable(kube: KubeClient, name: str) -> bool:
    return not (await node(kube, name))["spec"].get("unschedulable")


async def test_cli_stops_when_the_maintenance_or_the_node_goes(
    kube: KubeClient, node_names: list[str]
) -> None:
    first, second = node_names[0], node_names[1]
    await make_pod(kube, "stuck-1", first, owner=None)
    await make_pod(kube, "stuck-2", second, owner=None)
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]):
        results: dict[str, tuple[int, str]] = {}

        async def drain(n: str) -> None:
            out, err = io.StringIO(), io.StringIO()
            args = build_parser().parse_args(["drain", n, "--timeout", "60s", "--poll-interval", "0.1"])
            code = await run(args, kube, out=out, err=err)
            results[n] = (code, err.getvalue() + out.getvalue())

        async def blocked(n: str) -> bool:
            try:
                obj = await kube.get(NODEMAINTENANCES, maintenance_name(n))
            except Exception:
                return False
            return "stuck-1" in blocking_of(obj, n) or "stuck-2" in blocking_of(obj, n)

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain, first)
            tg.start_soon(drain, second)
            await eventually(lambda: blocked(first), "the first drain blocked")
            await eventually(lambda: blocked(second), "the second drain blocked")
            await kube.delete(NODEMAINTENANCES, maintenance_name(first))
            await kube.delete(NODES, second)
        code, text = results[first]
        assert code == 1 and "was deleted by someone else" in text, text
        code, text = results[second]
        assert code == 1 and f"node {second} was deleted before it drained" in text, text
        assert "drained:" not in text
        obj = await kube.get(NODEMAINTENANCES, maintenance_name(second))
        assert obj["status"]["nodes"][second]["phase"] == "NodeNotFound"
        drained = condition(obj, "Drained")
        assert drained is not None and drained["reason"] == "NodeNotFound"


async def test_cli_dry_run_tells_each_pods_fate_and_changes_nothing(
    kube: KubeClient, node_names: list[str]
) -> None:
    target = node_names[0]
    await make_pod(kube, "web", target, owner="ReplicaSet", answers=True)
    await make_pod(kube, "db-0", target, owner="StatefulSet")
    await make_pod(kube, "agent", target, owner="DaemonSet")
    await make_pod(kube, "bare", target, owner=None)
    await make_pod(kube, "cache", target, owner="StatefulSet", volumes=EMPTY_DIR)
    await make_pod(kube, "static", target, owner=None, mirror=True)
    before = await kube.get(NODES, target)
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["drain", target, "--dry-run"])
    assert await run(args, kube, out=out, err=err) == 0, err.getvalue()
    lines = {line.split()[1]: line for line in out.getvalue().splitlines() if line.startswith("  ")}
    assert "surge: ReplicaSet web-owner answers by surging" in lines["default/web"]
    assert "evict: StatefulSet db-0-owner cannot answer" in lines["default/db-0"]
    assert "skip: ignoring DaemonSet-managed Pods" in lines["default/agent"]
    assert (
        "block: cannot delete Pods that declare no controller (use --force to override)"
        in lines["default/bare"]
    )
    assert "block: cannot delete Pods with local storage" in lines["default/cache"]
    assert "skip: mirror (static) pod" in lines["default/static"]
    assert (await kube.list(NODEMAINTENANCES))["items"] == []
    assert (await kube.get(NODES, target))["metadata"]["resourceVersion"] == before["metadata"][
        "resourceVersion"
    ]

    out = io.StringIO()
    args = build_parser().parse_args(
        ["drain", target, "--dry-run", "--force", "--delete-emptydir-data", "--pod-selector", "app!=web"]
    )
    assert await run(args, kube, out=out, err=err) == 0
    lines = {line.split()[1]: line for line in out.getvalue().splitlines() if line.startswith("  ")}
    assert "default/web" not in lines  # not selected
    assert "evict: no controller" in lines["default/bare"]
    assert "evict: StatefulSet cache-owner cannot answer" in lines["default/cache"]


class HeldElsewhere:
    """A lease gate whose node leases all belong to someone else."""

    async def acquire(self, *, node: str, holder: str) -> LeaseDecision:
        return LeaseDecision(False, "kured/reboot-sentinel")

    async def release(self, *, node: str, holder: str) -> None:
        return None


async def test_cli_names_the_lease_holder_it_waits_for(kube: KubeClient, node_names: list[str]) -> None:
    target = node_names[0]

    def controller(ctx: ControllerContext) -> NodeMaintenanceController:
        return build(NodeMaintenanceController, ctx, lease_gate=HeldElsewhere())

    async with running_controllers(kube, controller, gates=GATES):
        out, err = io.StringIO(), io.StringIO()
        args = build_parser().parse_args(["drain", target, "--timeout", "2s", "--poll-interval", "0.1"])
        assert await run(args, kube, out=out, err=err) == 1
        assert f"{target}  maintenance lease held by kured/reboot-sentinel" in err.getvalue()
        assert f"{target}: WaitingForLease" in out.getvalue()
        assert not (await node(kube, target))["spec"].get("unschedulable")  # nothing done without the lease


async def test_pod_selector_and_grace_period_shape_the_drain(kube: KubeClient, node_names: list[str]) -> None:
    target = node_names[0]
    await make_pod(kube, "web", target, owner="ReplicaSet", answers=True, labels={"tier": "web"})
    await make_pod(kube, "db-0", target, owner="StatefulSet", labels={"tier": "db"})
    body = node_maintenance("db-only", [target], drain=True)
    body["spec"].update({"podSelector": "tier=db", "gracePeriodSeconds": 0})
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES):
        await kube.create(NODEMAINTENANCES, body)

        async def drained() -> dict[str, Any] | None:
            obj = await kube.get(NODEMAINTENANCES, "db-only")
            c = condition(obj, "Drained")
            return obj if c and c["status"] == "True" else None

        await eventually(drained, "Drained once the selected pod is gone")
        # gracePeriodSeconds 0: the evicted pod is removed at once, not left terminating.
        assert await pod(kube, "db-0") is None
        web = await pod(kube, "web")
        assert web is not None and not web["metadata"].get("deletionTimestamp")
        assert condition(web, "EvacuationRequest") is None  # not selected: not even asked


async def _deployment_pod(kube: KubeClient, node: str) -> None:
    """A pod of a RollingUpdate Deployment (maxSurge 25 %, the default) whose ReplicaSet is unmarked."""
    deployment = await make_owner(kube, "Deployment", "web")
    deployment = await kube.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 1}}, namespace=NS)  # surge: 1
    rs = await kube.create(
        REPLICASETS,
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": "web-1",
                "namespace": NS,
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "web",
                        "uid": deployment["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"owner": "web"}},
                "template": {
                    "metadata": {"labels": {"owner": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx"}]},
                },
            },
        },
        namespace=NS,
    )
    await make_pod(kube, "web-1-a", node, owner="ReplicaSet", owner_obj=rs)


@pytest.mark.parametrize(("surge_answers", "evicted"), [(False, True), (True, False)])
async def test_a_deployment_pod_waits_only_when_the_surging_controllers_run(
    kube: KubeClient, node_names: list[str], surge_answers: bool, evicted: bool
) -> None:
    """Beside KCM's ReplicaSet and Deployment controllers (deploy/'s default) nobody answers an
    EvacuationRequest, so a Deployment's pod is evicted at once, under its budget, as kubectl drain
    would; with aiokcm's own it is asked to leave and waits for the surge."""
    target = node_names[0]
    await _deployment_pod(kube, target)
    config = NodeMaintenanceConfig(surge_answers=surge_answers)
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[config]):
        # The maintenance's own timeout is the default 180 s: nothing here waits for it.
        await kube.create(NODEMAINTENANCES, node_maintenance("kernel", [target], drain=True))

        if evicted:
            # Until the ReplicaSet reaches the controller's cache the pod may be asked to leave
            # (waiting is the safe guess); then nobody can answer and it is evicted.
            await eventually(lambda: gone_or_terminating(kube, "web-1-a"), "the pod evicted")
            return

        async def waiting_for_the_surge() -> dict[str, Any] | None:
            obj = await kube.get(NODEMAINTENANCES, "kernel")
            entry = blocking_of(obj, target).get("web-1-a") or {}
            return entry if "answers by surging" in entry.get("message", "") else None

        async def asked_to_leave() -> bool:
            # The node's sync writes the request; the maintenance's status may report the plan first.
            requested = condition(await pod(kube, "web-1-a"), "EvacuationRequest")
            return requested is not None and requested["status"] == "True"

        await eventually(waiting_for_the_surge, "the pod waiting for its Deployment's surge")
        await eventually(asked_to_leave, "the pod's EvacuationRequest")
        assert not await gone_or_terminating(kube, "web-1-a")


async def test_cli_names_a_real_lease_holder_and_the_eviction_time(
    kube: KubeClient, node_names: list[str]
) -> None:
    """The blockers a timed-out drain names come from the cluster itself: the holder of the node's
    maintenance Lease (taken by kured with the lease library, as `aiokcm lease acquire` does), then,
    once it is released, the time the fallback eviction of a pod whose owner may answer is due."""
    target = node_names[0]
    await lease.acquire(kube, target, holder="kured/reboot-sentinel", duration_seconds=600)
    await make_pod(kube, "custom", target, owner="ReplicaSet", answers=True)

    def controller(ctx: ControllerContext) -> NodeMaintenanceController:
        return build(NodeMaintenanceController, ctx, lease_gate=MaintenanceLeaseGate(kube))

    async with running_controllers(kube, controller, gates=GATES):
        out, err = io.StringIO(), io.StringIO()
        args = build_parser().parse_args(["drain", target, "--timeout", "2s", "--poll-interval", "0.1"])
        assert await run(args, kube, out=out, err=err) == 1
        assert f"{target}  maintenance lease held by kured/reboot-sentinel" in err.getvalue()
        assert not (await node(kube, target))["spec"].get("unschedulable")  # nothing done without the lease

        assert await lease.release(kube, target, holder="kured/reboot-sentinel")
        out, err = io.StringIO(), io.StringIO()
        args = build_parser().parse_args(
            ["drain", target, "--timeout", "3s", "--poll-interval", "0.1", "--evacuation-timeout", "600s"]
        )
        assert await run(args, kube, out=out, err=err) == 1
        text = err.getvalue()
        assert (
            "default/custom  AwaitingEvacuation: no EvacuationInitiated yet (ReplicaSet custom-owner answers"
            in text
        ), text
        assert "; evicted after 20" in text, text  # the deadline, as an RFC 3339 time


async def test_an_owner_without_a_budget_loses_one_pod_at_a_time_and_a_workload_timeout_holds(
    kube: KubeClient, node_names: list[str]
) -> None:
    """Two pods of a StatefulSet with no PodDisruptionBudget: the second is evicted only once the
    first is gone (nothing else limits how many of its pods are down). A StatefulSet annotated with
    its own evacuation timeout (3 s) waits that long, not the maintenance's 180 s, then is evicted."""
    target = node_names[0]
    db = await make_owner(kube, "StatefulSet", "db")
    for name in ("db-0", "db-1"):
        await make_pod(kube, name, target, owner="StatefulSet", owner_obj=db, labels={"app": "db"})
    slow = await make_owner(kube, "StatefulSet", "slow", annotations={TIMEOUT_ANNOTATION: "3"})
    await make_pod(kube, "slow-0", target, owner="StatefulSet", owner_obj=slow)
    timeline: list[tuple[float, str, str]] = []  # (when, "leaving" | "gone", pod)
    listed = await kube.list(PODS, namespace=NS)

    async def watch_pods() -> None:
        leaving: set[str] = set()
        rv = listed["metadata"]["resourceVersion"]
        async with kube.watch(PODS, namespace=NS, resource_version=rv) as events:
            async for event in events:
                if event.type == "BOOKMARK":
                    continue
                name = event.object["metadata"]["name"]
                if event.type == "DELETED":
                    timeline.append((anyio.current_time(), "gone", name))
                elif event.object["metadata"].get("deletionTimestamp") and name not in leaving:
                    leaving.add(name)
                    timeline.append((anyio.current_time(), "leaving", name))

    async with (
        running_controllers(kube, NodeMaintenanceController, gates=GATES),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(watch_pods)
        start = anyio.current_time()
        await kube.create(
            NODEMAINTENANCES, node_maintenance("sts", [target], drain=True)
        )  # its own timeout: 180 s

        async def all_gone() -> bool:
            return {p for _, what, p in timeline if what == "gone"} >= {"db-0", "db-1", "slow-0"}

        await eventually(all_gone, "every StatefulSet pod evicted", timeout=60)
        tg.cancel_scope.cancel()
    db_events = [(what, p) for _, what, p in timeline if p.startswith("db-")]
    first = db_events[0][1]
    second = "db-1" if first == "db-0" else "db-0"
    assert db_events.index(("leaving", second)) > db_events.index(("gone", first)), db_events
    (slow_leaving,) = [t for t, what, p in timeline if p == "slow-0" and what == "leaving"]
    # The deadline counts from the EvacuationRequest's lastTransitionTime, a time in whole seconds.
    assert 2.0 <= slow_leaving - start < 60.0, timeline
