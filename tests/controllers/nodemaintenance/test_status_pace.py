"""While pods are asked one by one, the maintenance's status follows in batches, not one write per pod.

Each EvacuationRequest changes the status (the pod moves from "not set yet" to waiting for its
owner). While pods are leaving, that progress (counts, messages) is written at most about once a
second. The echo of the controller's own status write must not start the next write at once, or a
node of N pods costs N status writes (and N API requests) in its first second. Slowness only spreads
the writes further apart, so the count is checked against the time they took.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import NODEMAINTENANCES
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.controller import STATUS_BATCH_SECONDS
from tests.controllers.harness import running_controllers
from tests.controllers.nodemaintenance.helpers import GATES, condition, make_pod, pod
from tests.support.objects import node_maintenance
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("cluster", "crd")

PODS_ON_NODE = 12


async def test_status_follows_the_requests_in_batches(kube: KubeClient, node_names: list[str]) -> None:
    target = node_names[0]
    for i in range(PODS_ON_NODE):
        await make_pod(kube, f"w{i}", target)  # an owner that answers: each pod waits for its answer
    listed = await kube.list(NODEMAINTENANCES)
    statuses: list[dict[str, Any]] = []
    arrived: list[float] = []

    async def record() -> None:
        async with kube.watch(
            NODEMAINTENANCES, resource_version=listed["metadata"]["resourceVersion"], allow_bookmarks=False
        ) as stream:
            async for ev in stream:
                status = ev.object.get("status")
                if ev.type == "MODIFIED" and status and (not statuses or statuses[-1] != status):
                    statuses.append(status)
                    arrived.append(anyio.current_time())

    async def all_asked() -> bool:
        for i in range(PODS_ON_NODE):
            asked = condition(await pod(kube, f"w{i}"), "EvacuationRequest")
            if not asked or asked["status"] != "True":
                return False
        return True

    def waiting_for_owners() -> bool:
        if not statuses:
            return False
        entry = (statuses[-1].get("nodes") or {}).get(target) or {}
        blocking = entry.get("blockingPods") or []
        return len(blocking) == PODS_ON_NODE and all(
            b["message"].startswith("no EvacuationInitiated yet") for b in blocking
        )

    async with (
        anyio.create_task_group() as tg,
        running_controllers(kube, NodeMaintenanceController, gates=GATES),
    ):
        tg.start_soon(record)
        await kube.create(NODEMAINTENANCES, node_maintenance("m", [target], drain=True))
        await eventually(all_asked, "every pod asked")
        await eventually(waiting_for_owners, "the status to show every pod waiting for its owner")
        tg.cancel_scope.cancel()
    progress_only = sum(1 for i in range(1, len(statuses)) if _shape(statuses[i]) == _shape(statuses[i - 1]))
    # A node change (its cordon, its phase annotation) may bring progress along at once; the rest
    # comes a batch apart. Written per pod, the 12 requests made 8 or more statuses in 0.1-0.3 s.
    span = arrived[-1] - arrived[0]
    assert progress_only <= math.ceil(span / STATUS_BATCH_SECONDS) + 2, (progress_only, round(span, 3))
    # The batching delays progress, never loses it: the last status has every pod.
    assert statuses[-1]["podsPendingEvacuation"] == PODS_ON_NODE


def _shape(status: dict[str, Any]) -> tuple[Any, ...]:
    """What is more than progress: the conditions' states and the nodes' phases."""
    conds = sorted((c["type"], c["status"], c["reason"]) for c in status.get("conditions") or [])
    phases = sorted((n, (e or {}).get("phase")) for n, e in (status.get("nodes") or {}).items())
    return tuple(conds), tuple(phases)
