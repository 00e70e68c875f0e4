"""What the rolling-maintenance stories share: the maintenance, the node timeline, the checks.

`NodeTimeline` watches nodes (a LIST then a WATCH, so no state the server went through is
missed) and records, per node, when it was cordoned and uncordoned, its boot IDs and when it was
Ready; the stories assert the order from it: one node at a time, each back and healthy before
the next is cordoned.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from anyio.abc import TaskStatus

from apiclient import KubeClient
from apiclient.resources import NODEMAINTENANCES, NODES


def rolling_maintenance(
    name: str,
    nodes: Sequence[str],
    *,
    completion: str | None = "Drained",
    gates: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": sorted(nodes)}]}
            ]
        },
        "cordon": True,
        "drain": True,
        **spec,
    }
    if completion is not None:
        body["completion"] = completion
    if gates is not None:
        body["gates"] = gates
    return {
        "apiVersion": "maintenance.aiokcm.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": body,
    }


def _ready(node: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def _boot(node: dict[str, Any]) -> str:
    return str(((node.get("status") or {}).get("nodeInfo") or {}).get("bootID") or "")


@dataclass
class NodeHistory:
    cordoned: list[float] = field(default_factory=list)
    uncordoned: list[float] = field(default_factory=list)
    boots: list[tuple[float, str]] = field(default_factory=list)
    ready_changes: list[tuple[float, bool]] = field(default_factory=list)


class NodeTimeline:
    """Every node's cordons, boots and readiness, in the order the API server made them."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeHistory] = {}
        self._last: dict[str, dict[str, Any]] = {}
        self.most_unschedulable = 0

    def _see(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        h = self.nodes.setdefault(name, NodeHistory())
        now = time.monotonic()
        old = self._last.get(name)
        unsched = bool((node.get("spec") or {}).get("unschedulable"))
        was = bool((old.get("spec") or {}).get("unschedulable")) if old else False
        if unsched and not was:
            h.cordoned.append(now)
        if was and not unsched:
            h.uncordoned.append(now)
        if not h.boots or h.boots[-1][1] != _boot(node):
            h.boots.append((now, _boot(node)))
        ready = _ready(node)
        if not h.ready_changes or h.ready_changes[-1][1] != ready:
            h.ready_changes.append((now, ready))
        self._last[name] = node
        self.most_unschedulable = max(
            self.most_unschedulable,
            sum(1 for n in self._last.values() if (n.get("spec") or {}).get("unschedulable")),
        )

    async def run(self, client: KubeClient, *, task_status: TaskStatus[None]) -> None:
        page = await client.list(NODES)
        for n in page["items"]:
            self._see(n)
        rv = page["metadata"]["resourceVersion"]
        started = False
        while True:
            async with client.watch(NODES, resource_version=rv) as events:
                if not started:
                    task_status.started()
                    started = True
                async for ev in events:
                    if ev.type == "ERROR":
                        raise AssertionError(f"node watch failed: {ev.object}")
                    rv = ev.object["metadata"].get("resourceVersion") or rv
                    if ev.type in ("ADDED", "MODIFIED"):
                        self._see(ev.object)

    def order_of_cordons(self) -> list[str]:
        return [n for _, n in sorted((h.cordoned[0], n) for n, h in self.nodes.items() if h.cordoned)]

    def back_before_next(self, order: Sequence[str]) -> list[str]:
        """Problems with the order: a node cordoned before the one before it rebooted, was Ready
        and uncordoned again."""
        problems = []
        for before, after in itertools.pairwise(order):
            b, a = self.nodes[before], self.nodes[after]
            start = a.cordoned[0]
            if not b.uncordoned or b.uncordoned[-1] > start:
                problems.append(f"{after} cordoned before {before} was uncordoned")
            if len(b.boots) < 2 or b.boots[-1][0] > start:
                problems.append(f"{after} cordoned before {before} rebooted")
            ready_at = [t for t, r in b.ready_changes if r]
            if not ready_at or ready_at[-1] > start:
                problems.append(f"{after} cordoned before {before} was Ready again")
        return problems


async def rollout_status(kube: KubeClient, name: str) -> dict[str, Any]:
    return dict((await kube.get(NODEMAINTENANCES, name)).get("status") or {})


async def phase_is(kube: KubeClient, name: str, phase: str) -> bool:
    return (await rollout_status(kube, name)).get("phase") == phase


def node_phase(status: dict[str, Any], node: str) -> str | None:
    """A node's phase in a maintenance's status (None before the first status is written)."""
    return ((status.get("nodes") or {}).get(node) or {}).get("phase")
