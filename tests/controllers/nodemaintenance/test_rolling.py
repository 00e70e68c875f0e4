"""Rolling maintenances on the 3-node local cluster, through real informers and the real CRD.

- `completion: Drained` rolls over the nodes one at a time, uncordoning each before the next.
- `completion: Annotation` waits for the node's completion annotation, then removes it.
- A node that does not come back from its reboot in time fails `nodeReady`: the rollout pauses,
  the node stays cordoned and the later nodes are not touched.
- Windows: outside every window nothing starts and the status says when the next one opens; on
  the controller's (virtual) clock moved into the window the next node starts. Bad windows are
  refused by the CRD or reported as `SpecValid=False` with the reason.
- The manager stopped at each stage (draining, in maintenance, gating) and started again goes on
  from the status: each node rebooted once, completed once, every gate run for every node.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from apiclient import ApiError, KubeClient
from apiclient.resources import NODEMAINTENANCES, NODES, STATEFULSETS
from controllers.context import ControllerContext
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.config import NodeMaintenanceConfig
from kubeutil.timestamps import format_time, parse_time
from localcluster.cluster import LocalCluster
from maintenancerollout.planner import COMPLETE_ANNOTATION
from nodemaintenancelease import lease
from tests.controllers.harness import running_controllers
from tests.controllers.nodemaintenance.helpers import (
    GATES,
    NO_CLUSTER_LIMIT,
    NS,
    condition,
    make_owner,
    make_pod,
)
from tests.e2e.rolling import NodeTimeline, node_phase, rolling_maintenance, rollout_status
from tests.support.reboots import reboot_agent
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("cluster", "crd")


async def _status_is(kube: KubeClient, name: str, check: Callable[[dict[str, Any]], bool]) -> bool:
    return check(await rollout_status(kube, name))


def _phase(phase: str) -> Callable[[dict[str, Any]], bool]:
    return lambda s: s.get("phase") == phase


async def test_a_rolling_drain_releases_each_node_before_the_next_starts(
    kube: KubeClient, node_names: list[str]
) -> None:
    for i, n in enumerate(node_names):
        await make_pod(kube, f"web-{i}", n, owner="StatefulSet")
    timeline = NodeTimeline()
    async with (
        running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]) as h,
        anyio.create_task_group() as tg,
    ):
        await tg.start(lambda task_status: timeline.run(kube, task_status=task_status))
        await kube.create(NODEMAINTENANCES, rolling_maintenance("roll", node_names, completion="Drained"))
        await eventually(
            lambda: _status_is(kube, "roll", _phase("Completed")), "rollout Completed", timeout=60
        )
        tg.cancel_scope.cancel()
    assert timeline.order_of_cordons() == node_names
    assert timeline.most_unschedulable == 1
    for n in node_names:
        assert len(timeline.nodes[n].cordoned) == 1 and len(timeline.nodes[n].uncordoned) == 1
    status = await rollout_status(kube, "roll")
    assert status["completedNodes"] == len(node_names) and status["currentNode"] == ""
    assert h.events.reasons("roll").count("NodeCompleted") == len(node_names)
    assert condition(await kube.get(NODEMAINTENANCES, "roll"), "Drained")["status"] == "True"  # type: ignore[index]


async def test_annotation_completion_waits_for_the_node_to_say_so(
    kube: KubeClient, node_names: list[str]
) -> None:
    first = node_names[0]
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]):
        await kube.create(
            NODEMAINTENANCES, rolling_maintenance("ann", node_names[:2], completion="Annotation")
        )

        await eventually(
            lambda: _status_is(kube, "ann", lambda s: s.get("phase") == "InMaintenance"), "in maintenance"
        )
        await anyio.sleep(1.0)
        status = await rollout_status(kube, "ann")
        assert status["nodes"][node_names[1]]["phase"] == "Waiting", status
        assert (await kube.get(NODES, first))["spec"].get("unschedulable") is True
        await kube.patch(NODES, first, {"metadata": {"annotations": {COMPLETE_ANNOTATION: "ann"}}})
        second = node_names[1]
        await eventually(
            lambda: _status_is(kube, "ann", lambda s: node_phase(s, second) == "InMaintenance"),
            "the second node in maintenance",
        )
        await kube.patch(NODES, second, {"metadata": {"annotations": {COMPLETE_ANNOTATION: "ann"}}})
        await eventually(
            lambda: _status_is(kube, "ann", _phase("Completed")), "rollout Completed", timeout=30
        )
        node = await kube.get(NODES, first)
        assert not node["spec"].get("unschedulable")
        assert COMPLETE_ANNOTATION not in (node["metadata"].get("annotations") or {}), (
            "annotation left behind"
        )


@pytest.mark.parametrize("how", ["never-rebooted", "down-too-long"])
async def test_a_node_not_back_in_time_pauses_and_stays_cordoned(
    cluster: LocalCluster, kube: KubeClient, node_names: list[str], how: str
) -> None:
    first, later = node_names[0], node_names[1:]
    async with (
        running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]) as h,
        anyio.create_task_group() as tg,
    ):
        if how == "down-too-long":  # rebooted, but NotReady far beyond the gate's timeout
            tg.start_soon(functools.partial(reboot_agent, cluster, maintenance="slow", down_seconds=60))
        await kube.create(
            NODEMAINTENANCES,
            rolling_maintenance(
                "slow", node_names, completion="Reboot", gates={"nodeReady": {"timeoutSeconds": 2}}
            ),
        )
        await eventually(lambda: _status_is(kube, "slow", _phase("Paused")), "rollout Paused", timeout=30)
        await anyio.sleep(1.0)
        status = await rollout_status(kube, "slow")
        tg.cancel_scope.cancel()
    assert status["rollout"]["pausedReason"] == "GateFailed", status
    assert "nodeReady" in status["rollout"]["pausedMessage"] and first in status["rollout"]["pausedMessage"]
    gate = next(g for g in status["gates"] if g["name"] == "nodeReady")
    assert gate["result"] == "Failed", gate
    assert ("reboot" if how == "never-rebooted" else "Ready") in gate["message"], gate
    assert (await kube.get(NODES, first))["spec"].get("unschedulable") is True
    for n in later:
        assert not (await kube.get(NODES, n))["spec"].get("unschedulable"), f"{n} was started"
        assert node_phase(status, n) == "Waiting"
    assert "RolloutPaused" in h.events.reasons("slow")


async def test_bad_windows_are_refused_or_reported(kube: KubeClient, node_names: list[str]) -> None:
    for bad in (
        [{"days": ["Mon"], "start": "25:00", "end": "04:00"}],
        [{"days": [], "start": "22:00", "end": "04:00"}],
        [{"days": ["Funday"], "start": "22:00", "end": "04:00"}],
    ):
        with pytest.raises(ApiError) as refused:
            await kube.create(NODEMAINTENANCES, rolling_maintenance("bad", node_names[:1], windows=bad))
        assert refused.value.status == 422, refused.value
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]):
        await kube.create(
            NODEMAINTENANCES,
            rolling_maintenance(
                "zone",
                node_names[:1],
                windows=[{"days": ["Mon"], "start": "22:00", "end": "04:00", "timeZone": "Mars/Olympus"}],
            ),
        )

        async def reported() -> bool:
            c = condition(await kube.get(NODEMAINTENANCES, "zone"), "SpecValid")
            return bool(c and c["status"] == "False" and "Mars/Olympus" in c["message"])

        await eventually(reported, "SpecValid=False naming the zone")
        assert not (await kube.get(NODES, node_names[0]))["spec"].get("unschedulable")


class Clock:
    """The controller's clock, moved by the test (the queue's own timers stay real)."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


async def test_a_node_waits_for_a_window_wrapping_midnight_across_a_daylight_saving_change(
    kube: KubeClient, node_names: list[str]
) -> None:
    # Saturday 2026-10-24, the night the clocks go back in Berlin (03:00 CEST -> 02:00 CET on
    # Sunday). The window opens Saturdays at 23:30 local (21:30Z, CEST) and wraps past midnight to
    # 02:30 (the first 02:30 of that night, 00:30Z).
    clock = Clock(datetime(2026, 10, 24, 20, 0, tzinfo=UTC))
    window = [{"days": ["Sat"], "start": "23:30", "end": "02:30", "timeZone": "Europe/Berlin"}]

    def build(ctx: ControllerContext) -> NodeMaintenanceController:
        return NodeMaintenanceController(
            ctx,
            name="nodemaintenance-controller",
            workers=2,
            config=NodeMaintenanceConfig(max_unschedulable="100%"),
            clock=clock,
        )

    async def poke(value: str) -> None:
        await kube.patch(NODEMAINTENANCES, "night", {"metadata": {"annotations": {"test/poke": value}}})

    async with running_controllers(kube, build, gates=GATES):
        await kube.create(NODEMAINTENANCES, rolling_maintenance("night", node_names[:1], windows=window))
        await eventually(
            lambda: _status_is(kube, "night", _phase("WaitingForWindow")), "waiting for the window"
        )
        status = await rollout_status(kube, "night")
        assert status["nextWindowTime"] == "2026-10-24T21:30:00Z", status
        assert node_phase(status, node_names[0]) == "Waiting"
        clock.at = datetime(2026, 10, 24, 21, 29, tzinfo=UTC)
        await poke("1")
        await anyio.sleep(1.5)
        assert not (await kube.get(NODES, node_names[0]))["spec"].get("unschedulable"), (
            "started before the window"
        )
        # Sunday 00:10Z is 02:10 CEST: past midnight, still inside the wrapped window.
        clock.at = datetime(2026, 10, 25, 0, 10, tzinfo=UTC)
        await poke("2")
        await eventually(
            lambda: _status_is(kube, "night", _phase("Completed")), "done inside the window", timeout=30
        )


@pytest.mark.parametrize("stage", ["Draining", "InMaintenance", "Gating"])
async def test_a_manager_stopped_at_each_stage_goes_on_from_the_status(
    cluster: LocalCluster, kube: KubeClient, node_names: list[str], stage: str
) -> None:
    for i, n in enumerate(node_names):
        if i != 1:
            await make_pod(kube, f"db-{i}", n, owner="StatefulSet")
    # The second node's workload is short of a replica until the test says otherwise: its node
    # stays Gating meanwhile.
    short = await make_owner(kube, "StatefulSet", "short")
    await kube.patch(STATEFULSETS, "short", {"spec": {"replicas": 1}}, namespace=NS)
    await make_pod(kube, "short-0", node_names[1], owner="StatefulSet", owner_obj=short)
    rebooted: list[str] = []
    spec = rolling_maintenance(
        "resume",
        node_names,
        completion="Reboot",
        gates={"nodeReady": {"timeoutSeconds": 60}, "workloads": {"timeoutSeconds": 60}},
    )
    completed: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            functools.partial(
                reboot_agent, cluster, maintenance="resume", down_seconds=1.5, rebooted=rebooted
            )
        )
        async with running_controllers(
            kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]
        ) as first:
            await kube.create(NODEMAINTENANCES, spec)

            def reached(s: dict[str, Any]) -> bool:
                return (s.get("nodes") or {}).get(node_names[1], {}).get("phase") == stage or (
                    stage == "Draining" and s.get("phase") == "Draining" and s.get("completedNodes") == 1
                )

            await eventually(lambda: _status_is(kube, "resume", reached), f"second node {stage}", timeout=60)
        completed += [e.message for e in first.events.events if e.reason == "NodeCompleted"]
        async with running_controllers(
            kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]
        ) as second:
            await anyio.sleep(1.0)
            assert (await rollout_status(kube, "resume"))["nodes"][node_names[2]]["phase"] == "Waiting"
            await kube.patch(
                STATEFULSETS,
                "short",
                {"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}},
                namespace=NS,
                subresource="status",
            )
            await eventually(
                lambda: _status_is(kube, "resume", _phase("Completed")), "rollout Completed", timeout=90
            )
        completed += [e.message for e in second.events.events if e.reason == "NodeCompleted"]
        tg.cancel_scope.cancel()
    assert sorted(rebooted) == node_names, f"each node rebooted once: {rebooted}"
    done = sorted(m.split(":")[0].removeprefix("node ") for m in completed)
    assert done == node_names, f"each node completed once: {completed}"
    status = await rollout_status(kube, "resume")
    assert {g["name"]: g["result"] for g in status["gates"]} == {
        "nodeReady": "Successful",
        "workloads": "Successful",
    }
    for n in node_names:
        assert not (await kube.get(NODES, n))["spec"].get("unschedulable")


async def test_a_released_node_stays_cordoned_when_someone_else_holds_it(
    kube: KubeClient, node_names: list[str]
) -> None:
    admin, other, free = node_names
    await kube.patch(NODES, admin, {"spec": {"unschedulable": True}})  # cordoned by a person beforehand
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]):
        # Another (non-rolling) maintenance holds `other` for as long as it exists.
        await kube.create(NODEMAINTENANCES, rolling_maintenance("hold", [other], completion=None))
        await eventually(
            lambda: _node_is(kube, other, lambda n: bool(n["spec"].get("unschedulable"))), "held cordoned"
        )
        await kube.create(NODEMAINTENANCES, rolling_maintenance("roll", node_names, completion="Drained"))
        await eventually(
            lambda: _status_is(kube, "roll", _phase("Completed")), "rollout Completed", timeout=60
        )
        assert (await kube.get(NODES, admin))["spec"].get("unschedulable") is True, (
            "the person's cordon was lifted"
        )
        assert (await kube.get(NODES, other))["spec"].get("unschedulable") is True, (
            "the other maintenance's too"
        )
        assert not (await kube.get(NODES, free))["spec"].get("unschedulable")


async def _node_is(kube: KubeClient, name: str, check: Callable[[dict[str, Any]], bool]) -> bool:
    return check(await kube.get(NODES, name))


async def test_soak_time_and_spec_paused_hold_the_next_node(kube: KubeClient, node_names: list[str]) -> None:
    first, second = node_names[0], node_names[1]
    async with running_controllers(
        kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]
    ) as h:
        await kube.create(
            NODEMAINTENANCES, rolling_maintenance("soak", node_names[:2], soakSeconds=3, paused=True)
        )
        await eventually(lambda: _status_is(kube, "soak", _phase("Paused")), "paused by spec")
        status = await rollout_status(kube, "soak")
        assert status["nodes"][first]["phase"] == "Waiting", status
        assert not (await kube.get(NODES, first))["spec"].get("unschedulable")
        await kube.patch(NODEMAINTENANCES, "soak", {"spec": {"paused": False}})
        await eventually(lambda: _status_is(kube, "soak", _phase("Soaking")), "soaking after the first node")
        soaking = await rollout_status(kube, "soak")
        assert node_phase(soaking, first) == "Completed" and node_phase(soaking, second) == "Waiting", soaking
        soak_until = parse_time(soaking["rollout"]["lastCompletionTime"])
        await eventually(
            lambda: _status_is(kube, "soak", lambda s: node_phase(s, second) not in (None, "Waiting")),
            "the second node started after the soak",
            timeout=30,
        )
        assert soak_until is not None
        assert f"soaking until {format_time(soak_until + timedelta(seconds=3))}" in str(
            soaking["nodes"][second].get("message")
        ), soaking["nodes"][second]
        await eventually(
            lambda: _status_is(kube, "soak", _phase("Completed")), "rollout Completed", timeout=30
        )
    assert "RolloutPaused" not in h.events.reasons("soak")  # a pause by spec is the user's own


async def test_a_rolling_maintenance_holds_the_lease_of_the_node_it_works_on(
    kube: KubeClient, node_names: list[str]
) -> None:
    first, second = node_names[0], node_names[1]
    holder = "aiokcm/nodemaintenance/leased"
    with_leases = {**GATES, "NodeMaintenanceLease": True}
    async with running_controllers(
        kube, NodeMaintenanceController, gates=with_leases, configs=[NO_CLUSTER_LIMIT]
    ):
        await kube.create(
            NODEMAINTENANCES, rolling_maintenance("leased", node_names[:2], completion="Annotation")
        )
        await eventually(
            lambda: _status_is(kube, "leased", lambda s: node_phase(s, first) == "InMaintenance"),
            "in maintenance",
        )
        held = await lease.status(kube, first)
        assert held is not None and held.holder == holder, held
        waiting = await lease.status(kube, second)
        assert waiting is None or waiting.holder is None, "the waiting node's lease taken early"
        await kube.patch(NODES, first, {"metadata": {"annotations": {COMPLETE_ANNOTATION: "leased"}}})

        async def released() -> bool:
            state = await lease.status(kube, first)
            return state is not None and state.holder is None

        await eventually(released, "the first node's lease released once it completed")
        await eventually(
            lambda: _status_is(kube, "leased", lambda s: node_phase(s, second) == "InMaintenance"),
            "second in",
        )
        taken = await lease.status(kube, second)
        assert taken is not None and taken.holder == holder, taken
