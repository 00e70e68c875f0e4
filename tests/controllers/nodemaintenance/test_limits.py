"""How much a maintenance disrupts at once, on the 3-node local cluster through real informers.

- A maintenance over every node drains them one at a time, in name order, each staying cordoned
  once drained (watched event by event on the nodes and on the maintenance's status); so does one
  that cordoned every node first and is told to drain afterwards.
- A restart between a cordon and the status that records it never uncordons the node.
- The cluster-wide guard (default: half the nodes unschedulable) holds the next cordon back with a
  condition and an event and touches nothing; an override lets it go on; a maintenance held back
  starts on its own once another one lets its nodes go.
- The CRD refuses a limit that is not a positive count or a percentage.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from prometheus_client import REGISTRY

from apiclient import ApiError, KubeClient
from apiclient.resources import NODEMAINTENANCES, NODES, PODS
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.api import MAINTENANCES_ANNOTATION, ORIGINAL_UNSCHEDULABLE_ANNOTATION
from tests.controllers.harness import running_controllers
from tests.controllers.nodemaintenance.helpers import (
    GATES,
    NO_CLUSTER_LIMIT,
    NS,
    RolloutWatch,
    condition,
    make_owner,
    make_pod,
    nm_gone,
    node,
    pod,
)
from tests.support.objects import node_maintenance
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("cluster", "crd", "eviction")


async def _condition_is(kube: KubeClient, name: str, type_: str, status: str) -> bool:
    c = condition(await kube.get(NODEMAINTENANCES, name), type_)
    return bool(c and c["status"] == status)


async def test_a_maintenance_over_every_node_drains_one_at_a_time(
    kube: KubeClient, node_names: list[str]
) -> None:
    owner = await make_owner(kube, "StatefulSet", "db")
    for i, n in enumerate(node_names):
        for j in range(2):
            await make_pod(kube, f"db-{i}-{j}", n, owner="StatefulSet", owner_obj=owner)
    watch = RolloutWatch()
    async with (
        running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]) as h,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(watch.nodes, kube)
        tg.start_soon(watch.maintenance, kube, "all")
        await kube.create(NODEMAINTENANCES, node_maintenance("all", node_names, drain=True))
        await eventually(
            lambda: _condition_is(kube, "all", "Drained", "True"), "every node drained", timeout=60
        )
        obj = await kube.get(NODEMAINTENANCES, "all")
        await anyio.sleep(0.2)  # the last watch events
        tg.cancel_scope.cancel()
    assert watch.status_events > len(node_names)  # the status was seen moving, not only at the end
    assert watch.most_in_progress == 1
    assert watch.most_cordoned_not_drained == 1
    assert watch.cordon_order == node_names  # a stable order: by name
    assert {e["phase"] for e in obj["status"]["nodes"].values()} == {"Drained"}
    for n in node_names:  # drained nodes stay cordoned until the maintenance ends
        assert (await node(kube, n))["spec"]["unschedulable"] is True
    started = [e.message.split(":")[0] for e in h.events.events if e.reason == "NodeStarted"]
    assert started == [f"node {n}" for n in node_names]


async def test_the_cluster_guard_holds_back_then_override_or_release_lets_go(
    kube: KubeClient, node_names: list[str]
) -> None:
    first, second, third = node_names
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES) as h:
        # 3 nodes, at most 50% unschedulable: one node
        await kube.create(NODEMAINTENANCES, node_maintenance("wide", [first, second]))
        await eventually(
            lambda: _condition_is(kube, "wide", "ClusterLimitReached", "True"), "the guard holding back"
        )
        obj = await kube.get(NODEMAINTENANCES, "wide")
        held = condition(obj, "ClusterLimitReached")
        assert (
            held is not None
            and "would make 2 of 3 nodes unschedulable; the cluster allows 1" in held["message"]
        )
        assert obj["status"]["nodes"][first]["phase"] == "Cordoned"
        assert obj["status"]["nodes"][second]["phase"] == "Waiting"
        assert obj["status"]["nodes"][second]["message"] == held["message"]
        assert condition(obj, "Cordoned")["status"] == "False"  # type: ignore[index]
        assert not (await node(kube, second))["spec"].get("unschedulable")  # no action
        assert h.events.reasons("wide").count("MaxUnschedulableReached") == 1
        assert REGISTRY.get_sample_value("aiokcm_nodemaintenance_nodes_waiting", {"limit": "cluster"}) == 1

        # a second maintenance waits too, and starts by itself once the first lets its node go
        await kube.create(NODEMAINTENANCES, node_maintenance("other", [third]))
        await eventually(
            lambda: _condition_is(kube, "other", "ClusterLimitReached", "True"), "the second held back"
        )
        assert not (await node(kube, third))["spec"].get("unschedulable")
        await kube.delete(NODEMAINTENANCES, "wide")
        await eventually(lambda: nm_gone(kube, "wide"), "the first released")
        await eventually(
            lambda: _condition_is(kube, "other", "Cordoned", "True"), "the second cordoning its node"
        )
        assert await _condition_is(kube, "other", "ClusterLimitReached", "False")

        # an explicit override goes beyond the guard, still one node at a time
        await kube.create(
            NODEMAINTENANCES,
            {
                **node_maintenance("forced", [first, second]),
                "spec": {
                    **node_maintenance("forced", [first, second])["spec"],
                    "overrideMaxUnschedulable": True,
                },
            },
        )
        await eventually(
            lambda: _condition_is(kube, "forced", "Cordoned", "True"), "the override cordoning both"
        )
        assert all([(await node(kube, n))["spec"].get("unschedulable") for n in node_names])


async def test_the_cluster_guard_counts_a_node_an_operator_cordoned(
    kube: KubeClient, node_names: list[str]
) -> None:
    """The guard's count of unschedulable nodes follows the node cache as nodes are cordoned and
    uncordoned by anyone, not only by maintenances."""
    first, _, third = node_names
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES):
        await kube.patch(NODES, third, {"spec": {"unschedulable": True}})  # `kubectl cordon`
        # 3 nodes, at most 50% unschedulable: one node, and the operator's cordon takes it
        await kube.create(NODEMAINTENANCES, node_maintenance("one", [first]))
        await eventually(
            lambda: _condition_is(kube, "one", "ClusterLimitReached", "True"), "the guard holding back"
        )
        assert not (await node(kube, first))["spec"].get("unschedulable")
        await kube.patch(NODES, third, {"spec": {"unschedulable": None}})  # `kubectl uncordon`
        await eventually(
            lambda: _condition_is(kube, "one", "Cordoned", "True"), "cordoning once room is made"
        )
        assert await _condition_is(kube, "one", "ClusterLimitReached", "False")


@pytest.mark.parametrize("bad", [0, -1, "lots", "0%", "150%", "2"])
async def test_the_crd_refuses_a_limit_that_is_not_a_count_or_a_percentage(
    kube: KubeClient, node_names: list[str], bad: object
) -> None:
    body = node_maintenance("bad", node_names)
    body["spec"]["maxConcurrentNodes"] = bad
    with pytest.raises(ApiError) as err:
        await kube.create(NODEMAINTENANCES, body)
    assert err.value.invalid and "maxConcurrentNodes" in err.value.message


async def test_the_crd_defaults_the_limit_to_one_node(kube: KubeClient, node_names: list[str]) -> None:
    created = await kube.create(NODEMAINTENANCES, node_maintenance("plain", node_names))
    assert created["spec"]["maxConcurrentNodes"] == 1
    assert created["spec"]["overrideMaxUnschedulable"] is False
    body = node_maintenance("half", node_names)
    body["spec"]["maxConcurrentNodes"] = "50%"
    assert (await kube.create(NODEMAINTENANCES, body))["spec"]["maxConcurrentNodes"] == "50%"


async def test_a_restart_between_cordon_and_status_never_undoes_the_cordon(
    kube: KubeClient, node_names: list[str]
) -> None:
    """Killed after cordoning its next node but before writing the status that says so."""
    first, second = node_names[0], node_names[1]
    await kube.create(NODEMAINTENANCES, node_maintenance("m", [first, second], drain=True))
    await kube.patch(
        NODEMAINTENANCES,
        "m",
        {
            "status": {
                "nodes": {
                    first: {
                        "phase": "Drained",
                        "podsPendingEvacuation": 0,
                        "podsEvacuating": 0,
                        "blockingPods": [],
                    },
                    second: {
                        "phase": "Waiting",
                        "podsPendingEvacuation": 0,
                        "podsEvacuating": 0,
                        "blockingPods": [],
                    },
                }
            }
        },
        subresource="status",
    )
    for n in (first, second):
        await kube.patch(
            NODES,
            n,
            {
                "spec": {"unschedulable": True},
                "metadata": {
                    "annotations": {MAINTENANCES_ANNOTATION: "m", ORIGINAL_UNSCHEDULABLE_ANNOTATION: "false"}
                },
            },
        )
    await make_pod(kube, "web", second)  # something to drain, so the node is in progress a while
    uncordoned: list[str] = []

    async def watch_second() -> None:
        listed = await kube.list(NODES)
        async with kube.watch(NODES, resource_version=listed["metadata"]["resourceVersion"]) as events:
            async for ev in events:
                if ev.type == "BOOKMARK" or (ev.object.get("metadata") or {}).get("name") != second:
                    continue
                if not (ev.object.get("spec") or {}).get("unschedulable"):
                    uncordoned.append(ev.type)

    async with (
        running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(watch_second)

        async def requested() -> bool:
            return condition(await pod(kube, "web"), "EvacuationRequest") is not None

        await eventually(requested, "the drain of the node it had started going on")
        await kube.delete(PODS, "web", namespace=NS)
        await eventually(lambda: _condition_is(kube, "m", "Drained", "True"), "both nodes drained")
        tg.cancel_scope.cancel()
    assert uncordoned == []


async def test_cordoned_first_then_drained_still_one_node_at_a_time(
    kube: KubeClient, node_names: list[str]
) -> None:
    owner = await make_owner(kube, "StatefulSet", "db")
    for i, n in enumerate(node_names):
        await make_pod(kube, f"db-{i}", n, owner="StatefulSet", owner_obj=owner)
    watch = RolloutWatch()
    async with (
        running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]),
        anyio.create_task_group() as tg,
    ):
        await kube.create(NODEMAINTENANCES, node_maintenance("two-step", node_names))
        await eventually(lambda: _condition_is(kube, "two-step", "Cordoned", "True"), "every node cordoned")
        tg.start_soon(watch.maintenance, kube, "two-step")
        await kube.patch(NODEMAINTENANCES, "two-step", {"spec": {"drain": True}})

        async def one_draining_others_wait() -> dict[str, Any] | None:
            obj = await kube.get(NODEMAINTENANCES, "two-step")
            nodes = (obj.get("status") or {}).get("nodes") or {}
            waiting = [
                e
                for e in nodes.values()
                if e.get("phase") == "Cordoned" and "its turn" in e.get("message", "")
            ]
            return obj if len(waiting) == len(node_names) - 1 else None

        await eventually(
            one_draining_others_wait, "the drain started on one cordoned node, the others waiting"
        )
        await eventually(
            lambda: _condition_is(kube, "two-step", "Drained", "True"), "every node drained", timeout=60
        )
        tg.cancel_scope.cancel()
    assert watch.most_in_progress == 1
    for n in node_names:  # cordoned all along
        assert (await node(kube, n))["spec"]["unschedulable"] is True
