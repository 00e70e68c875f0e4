"""The NodeMaintenance controller and CLI against the local API server, through real informers.

Pods are created bound to a node (`spec.nodeName`) so no scheduler is needed; owners are faked with
ownerReferences and their answer (`EvacuationInitiated`) is written by the test, as the ReplicaSet
controller would. The CRD is the one users install: `deploy/crds/nodemaintenance.yaml` (shipped as `controller_manager.crds`).
"""

from __future__ import annotations

import io
from typing import Any, cast

import anyio
import pytest

from apiclient import ApiError, KubeClient
from apiclient.resources import NODEMAINTENANCES, NODES, PODDISRUPTIONBUDGETS, PODS
from controller_manager.maintenance_cli import build_parser, maintenance_name, run
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.api import (
    FINALIZER,
    MAINTENANCES_ANNOTATION,
    ORIGINAL_UNSCHEDULABLE_ANNOTATION,
    PHASE_ANNOTATION,
)
from controllers.nodemaintenance.state import utcnow
from kubeutil.timestamps import format_time
from tests.controllers.harness import running_controllers
from tests.controllers.nodemaintenance.helpers import (
    GATES,
    NO_CLUSTER_LIMIT,
    NS,
    condition,
    gone_or_terminating,
    make_pod,
    nm_gone,
    node,
    pod,
)
from tests.support.objects import node_maintenance
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("cluster")


@pytest.mark.usefixtures("crd")
async def test_drain_without_cordon_is_rejected(kube: KubeClient, node_names: list[str]) -> None:
    with pytest.raises(ApiError) as err:
        await kube.create(NODEMAINTENANCES, node_maintenance("bad", node_names[:1], cordon=False, drain=True))
    assert err.value.invalid
    assert "requires spec.cordon" in err.value.message


@pytest.mark.usefixtures("crd")
async def test_cordon_and_release_on_delete(kube: KubeClient, node_names: list[str]) -> None:
    target, other = node_names[0], node_names[1]
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES):
        await kube.create(NODEMAINTENANCES, node_maintenance("m1", [target]))

        async def cordoned() -> bool:
            obj = await kube.get(NODEMAINTENANCES, "m1")
            c = condition(obj, "Cordoned")
            return bool(c and c["status"] == "True")

        await eventually(cordoned, "Cordoned=True")
        n = await node(kube, target)
        assert n["spec"]["unschedulable"] is True
        assert n["metadata"]["annotations"][PHASE_ANNOTATION] == "Cordoned"
        assert n["metadata"]["annotations"][MAINTENANCES_ANNOTATION] == "m1"
        assert not (await node(kube, other))["spec"].get("unschedulable")
        assert FINALIZER in (await kube.get(NODEMAINTENANCES, "m1"))["metadata"]["finalizers"]

        await kube.delete(NODEMAINTENANCES, "m1")
        await eventually(lambda: nm_gone(kube, "m1"), "the finalizer to be released")
        n = await node(kube, target)
        assert not n["spec"].get("unschedulable")
        annotations = n["metadata"].get("annotations") or {}
        assert not {PHASE_ANNOTATION, MAINTENANCES_ANNOTATION, ORIGINAL_UNSCHEDULABLE_ANNOTATION} & set(
            annotations
        )


@pytest.mark.usefixtures("crd")
async def test_never_uncordons_a_node_cordoned_before_or_still_held(
    kube: KubeClient, node_names: list[str]
) -> None:
    pre, shared = node_names[0], node_names[1]
    await kube.patch(NODES, pre, {"spec": {"unschedulable": True}})
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]):
        await kube.create(NODEMAINTENANCES, node_maintenance("a", [pre, shared]))
        await kube.create(NODEMAINTENANCES, node_maintenance("b", [shared]))

        async def both_applied() -> bool:
            annotations = (await node(kube, shared))["metadata"].get("annotations", {})
            return bool(annotations.get(MAINTENANCES_ANNOTATION) == "a,b")

        await eventually(both_applied, "both maintenances applied to the shared node")
        await kube.delete(NODEMAINTENANCES, "a")
        await eventually(lambda: nm_gone(kube, "a"), "maintenance a released")
        assert (await node(kube, pre))["spec"]["unschedulable"] is True  # cordoned by someone else before
        assert (await node(kube, shared))["spec"]["unschedulable"] is True  # b still cordons it

        await kube.patch(NODEMAINTENANCES, "b", {"spec": {"cordon": False}})

        async def uncordoned() -> bool:
            return not (await node(kube, shared))["spec"].get("unschedulable")

        await eventually(uncordoned, "the shared node uncordoned once b lets go")
        planning = (await node(kube, shared))["metadata"]["annotations"]
        assert planning[PHASE_ANNOTATION] == "Planning"


@pytest.mark.usefixtures("crd")
async def test_drain_requests_evacuation_and_completes_when_pods_leave(
    kube: KubeClient, node_names: list[str]
) -> None:
    target = node_names[0]
    await make_pod(kube, "web", target)
    await make_pod(kube, "agent", target, owner="DaemonSet")
    await make_pod(kube, "static", target, owner=None, mirror=True)
    await make_pod(kube, "elsewhere", node_names[1])
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES) as h:
        await kube.create(NODEMAINTENANCES, node_maintenance("d", [target], drain=True))

        async def requested() -> dict[str, Any] | None:
            c = condition(await pod(kube, "web"), "EvacuationRequest")
            return c if c and c["status"] == "True" else None

        req = await eventually(requested, "EvacuationRequest on the app pod")
        assert (req["reason"], req["message"]) == ("NodeMaintenance", "kernel upgrade")
        for skipped in ("agent", "static", "elsewhere"):
            assert condition(await pod(kube, skipped), "EvacuationRequest") is None

        async def status_node() -> dict[str, Any] | None:
            obj = await kube.get(NODEMAINTENANCES, "d")
            entry = ((obj.get("status") or {}).get("nodes") or {}).get(target)
            return entry if entry and entry["podsPendingEvacuation"] == 1 else None

        entry = await eventually(status_node, "one pod pending evacuation")
        assert entry["phase"] == "Draining"

        # The owner answers, as the ReplicaSet controller would.
        web = await pod(kube, "web")
        assert web is not None
        answered = {
            "type": "EvacuationInitiated",
            "status": "True",
            "reason": "NodeMaintenance",
            "lastTransitionTime": format_time(utcnow()),
        }
        await kube.patch(
            PODS,
            "web",
            [{"op": "add", "path": "/status/conditions/-", "value": answered}],
            namespace=NS,
            subresource="status",
            patch_type="json",
        )

        async def evacuating() -> bool:
            obj = await kube.get(NODEMAINTENANCES, "d")
            nodes = (obj.get("status") or {}).get("nodes") or {}
            return bool(nodes.get(target, {}).get("podsEvacuating") == 1)

        await eventually(evacuating, "podsEvacuating=1")
        await kube.delete(PODS, "web", namespace=NS, grace_period_seconds=0)

        async def drained() -> bool:
            c = condition(await kube.get(NODEMAINTENANCES, "d"), "Drained")
            return bool(c and c["status"] == "True")

        await eventually(drained, "Drained=True")
        assert (await node(kube, target))["metadata"]["annotations"][PHASE_ANNOTATION] == "Drained"
        assert (await pod(kube, "agent")) is not None  # DaemonSet pods stay
        # Later syncs (a label change wakes the maintenance's) do not announce it again.
        await kube.patch(NODEMAINTENANCES, "d", {"metadata": {"labels": {"touched": "yes"}}})
        await kube.patch(NODES, target, {"metadata": {"labels": {"touched": "yes"}}})
        assert h.events.reasons("d").count("Drained") == 1, h.events.reasons("d")


@pytest.mark.usefixtures("crd")
async def test_withdraws_only_its_own_requests(kube: KubeClient, node_names: list[str]) -> None:
    target = node_names[0]
    await make_pod(kube, "ours", target)
    theirs = await make_pod(kube, "theirs", target)
    other_request = {
        "type": "EvacuationRequest",
        "status": "True",
        "reason": "Descheduler",
        "message": "rebalance",
        "lastTransitionTime": format_time(utcnow()),
    }
    await kube.patch(
        PODS,
        "theirs",
        [
            {
                "op": "add",
                "path": "/status/conditions",
                "value": [*((theirs.get("status") or {}).get("conditions") or []), other_request],
            }
        ],
        namespace=NS,
        subresource="status",
        patch_type="json",
    )
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES):
        await kube.create(NODEMAINTENANCES, node_maintenance("w", [target], drain=True))

        async def ours_requested() -> bool:
            c = condition(await pod(kube, "ours"), "EvacuationRequest")
            return bool(c and c["status"] == "True")

        await eventually(ours_requested, "our request set")
        await kube.patch(NODEMAINTENANCES, "w", {"spec": {"drain": False}})

        async def withdrawn() -> bool:
            return condition(await pod(kube, "ours"), "EvacuationRequest") is None

        await eventually(withdrawn, "our request withdrawn")
        kept = condition(await pod(kube, "theirs"), "EvacuationRequest")
        assert kept is not None and (kept["reason"], kept["status"]) == ("Descheduler", "True")


@pytest.mark.usefixtures("crd", "eviction")
async def test_silent_owner_is_evicted_and_a_pdb_refusal_is_reported(
    kube: KubeClient, node_names: list[str]
) -> None:
    target = node_names[0]
    # Their ReplicaSets have no surging Deployment: nobody answers, so timeout 0 evicts them at once.
    await make_pod(kube, "lonely", target, labels={"app": "lonely"}, answers=False)
    await make_pod(kube, "guarded", target, labels={"app": "guarded"}, answers=False)
    await kube.create(
        PODDISRUPTIONBUDGETS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
        namespace=NS,
    )

    # The eviction API skips the budget for Pending pods, so the guard only holds once the
    # kubelet has the pod running.
    async def running() -> bool:
        guarded = await pod(kube, "guarded")
        assert guarded is not None
        return bool(guarded.get("status", {}).get("phase") == "Running")

    await eventually(running, "the guarded pod running")
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES) as h:
        await kube.create(NODEMAINTENANCES, node_maintenance("e", [target], drain=True, timeout=0))
        await eventually(lambda: gone_or_terminating(kube, "lonely"), "the unanswered pod evicted")

        async def blocked() -> dict[str, Any] | None:
            obj = await kube.get(NODEMAINTENANCES, "e")
            c = condition(obj, "Blocked")
            return obj if c and c["status"] == "True" else None

        obj = await eventually(blocked, "Blocked=True for the PDB-protected pod")
        blocking = obj["status"]["nodes"][target]["blockingPods"]
        reasons = {b["name"]: b["reason"] for b in blocking}
        assert reasons.pop("guarded") == "EvictionRefused"
        # Evicted pods still terminating under the kubelet's grace period are listed as such.
        assert set(reasons.values()) <= {"Terminating"}, blocking
        assert not await gone_or_terminating(kube, "guarded")
        assert "EvictionRefused" in h.events.reasons("e")

        # The CLI's timeout lists the blocking pod and fails.
        out, err = io.StringIO(), io.StringIO()
        args = build_parser().parse_args(
            ["drain", target, "--timeout", "3s", "--evacuation-timeout", "0", "--poll-interval", "0.2"]
        )
        assert await run(args, kube, out=out, err=err) == 1
        assert "guarded" in err.getvalue() and "EvictionRefused" in err.getvalue()


@pytest.mark.usefixtures("crd")
async def test_cli_drain_then_uncordon(kube: KubeClient, node_names: list[str]) -> None:
    target = node_names[0]
    await make_pod(kube, "batch", target)

    async def owner() -> None:
        """The pod's owner: answers the request by deleting the pod."""

        async def requested() -> bool:
            return condition(await pod(kube, "batch"), "EvacuationRequest") is not None

        await eventually(requested, "the drain to ask for the pod")
        await kube.delete(PODS, "batch", namespace=NS, grace_period_seconds=0)

    async with (
        running_controllers(kube, NodeMaintenanceController, gates=GATES),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(owner)
        out, err = io.StringIO(), io.StringIO()
        args = build_parser().parse_args(["drain", target, "--poll-interval", "0.1", "--timeout", "60s"])
        assert await run(args, kube, out=out, err=err) == 0, err.getvalue()
        assert f"drained: {target}" in out.getvalue()
        assert (await node(kube, target))["spec"]["unschedulable"] is True

        await kube.create(NODEMAINTENANCES, node_maintenance("ops", [target], cordon=False))
        out, err = io.StringIO(), io.StringIO()
        args = build_parser().parse_args(["uncordon", target, "--poll-interval", "0.1", "--timeout", "60s"])
        assert await run(args, kube, out=out, err=err) == 0, err.getvalue()
        assert await nm_gone(kube, maintenance_name(target))
        assert not (await node(kube, target))["spec"].get("unschedulable")
        assert "also under NodeMaintenance ops" not in err.getvalue()  # ops does not cordon: no collision


class _CreatesHeld:
    """A client whose NodeMaintenance creates are answered only once `expected` of them are in
    flight together: a command that waits for one answer before it sends the next never gets one."""

    def __init__(self, kube: KubeClient, expected: int) -> None:
        self._kube = kube
        self._expected = expected
        self.in_flight = 0
        self._all_sent = anyio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)

    async def create(self, resource: Any, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if resource is NODEMAINTENANCES:
            self.in_flight += 1
            if self.in_flight >= self._expected:
                self._all_sent.set()
            with anyio.fail_after(5):
                await self._all_sent.wait()
        return await self._kube.create(resource, body, **kw)


@pytest.mark.usefixtures("crd")
async def test_cli_drain_of_several_nodes_creates_every_maintenance_before_any_is_answered(
    kube: KubeClient, node_names: list[str]
) -> None:
    """As `kubectl drain a b c` cordons all three before it evicts, so that the replacements of
    a's pods do not land on b while b's maintenance is still to be sent."""
    held = _CreatesHeld(kube, expected=len(node_names))
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]):
        out, err = io.StringIO(), io.StringIO()
        args = build_parser().parse_args(["drain", *node_names, "--poll-interval", "0.1", "--timeout", "30s"])
        assert await run(args, cast(KubeClient, held), out=out, err=err) == 0, err.getvalue()
    assert held.in_flight == len(node_names)
    for n in node_names:
        assert (await node(kube, n))["spec"]["unschedulable"] is True
        assert f"nodemaintenance/{maintenance_name(n)} draining node {n}" in out.getvalue()


class _SlowCordon:
    """The controller's client, with the patches of one node answered `delay` seconds late; it
    notes whether that node's patch was answered before each pod status write was sent."""

    def __init__(self, kube: KubeClient, node: str, delay: float) -> None:
        self._kube = kube
        self._node = node
        self._delay = delay
        self.node_patched = False
        self.pod_writes_before: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)

    async def patch(self, resource: Any, name: str, body: Any, **kw: Any) -> dict[str, Any]:
        if resource is NODES and name == self._node:
            await anyio.sleep(self._delay)
            answer = await self._kube.patch(resource, name, body, **kw)
            self.node_patched = True
            return answer
        if resource is PODS and kw.get("subresource") == "status" and not self.node_patched:
            self.pod_writes_before.append(name)
        return await self._kube.patch(resource, name, body, **kw)


@pytest.mark.usefixtures("crd")
async def test_maintenances_created_together_cordon_every_node_before_any_pod_is_asked(
    kube: KubeClient, node_names: list[str]
) -> None:
    """Two maintenances made at once are one drain, as `kubectl drain a b` is: a's pods are not
    asked while b's cordon is still on its way, or their replacements could land on b."""
    first, second = node_names[0], node_names[1]
    await make_pod(kube, "web", first)
    slow = _SlowCordon(kube, second, delay=1.0)
    async with running_controllers(
        cast(KubeClient, slow),
        NodeMaintenanceController,
        gates=GATES,
        configs=[NO_CLUSTER_LIMIT],
        informer_client=kube,
    ):
        await kube.create(NODEMAINTENANCES, node_maintenance("a", [first], drain=True))
        await kube.create(NODEMAINTENANCES, node_maintenance("b", [second], drain=True))

        async def asked() -> bool:
            c = condition(await pod(kube, "web"), "EvacuationRequest")
            return c is not None and c["status"] == "True"

        await eventually(asked, "web asked to evacuate", timeout=30)
    assert slow.node_patched
    assert slow.pod_writes_before == []
    assert (await node(kube, second))["spec"]["unschedulable"] is True


@pytest.mark.usefixtures("eviction")
async def test_cli_fallback_refuses_what_kubectl_refuses(kube: KubeClient, node_names: list[str]) -> None:
    target = node_names[0]
    await make_pod(kube, "legacy", target)
    await make_pod(kube, "legacy-agent", target, owner="DaemonSet")
    await make_pod(kube, "legacy-bare", target, owner=None)
    await make_pod(kube, "legacy-cache", target, volumes=[{"name": "scratch", "emptyDir": {}}])
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["drain", target, "--poll-interval", "0.1", "--timeout", "5s"])
    assert await run(args, kube, out=out, err=err) == 1
    text = err.getvalue()
    assert "falling back" in text
    assert (
        "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/legacy-agent"
        in text
    )
    assert (
        "cannot delete Pods that declare no controller (use --force to override): default/legacy-bare" in text
    )
    assert (
        "cannot delete Pods with local storage (use --delete-emptydir-data to override): default/legacy-cache"
        in text
    )
    assert "There are pending nodes to be drained" in text
    # As kubectl: the node is cordoned, and not one pod is evicted while any is refused.
    assert (await node(kube, target))["spec"]["unschedulable"] is True
    for name in ("legacy", "legacy-agent", "legacy-bare", "legacy-cache"):
        assert not await gone_or_terminating(kube, name), name

    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(
        [
            "drain",
            target,
            "--poll-interval",
            "0.1",
            "--timeout",
            "20s",
            "--force",
            "--delete-emptydir-data",
            "--ignore-daemonsets",
            "--grace-period",
            "0",
        ]
    )
    code = await run(args, kube, out=out, err=err)
    assert code == 0, err.getvalue()
    assert f"drained: {target}" in out.getvalue()
    assert "ignoring DaemonSet-managed Pods: default/legacy-agent" in err.getvalue()
    for name in ("legacy", "legacy-bare", "legacy-cache"):
        assert await pod(kube, name) is None, name
    assert not await gone_or_terminating(kube, "legacy-agent")
