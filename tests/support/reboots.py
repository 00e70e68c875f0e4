"""A kured-style reboot agent for the tests, and what a test reads of a node's boot.

    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(reboot_agent, cluster, maintenance="kernel-patch", rebooted=seen))
        ...                                   # the maintenance drains node-1: the agent reboots it
        tg.cancel_scope.cancel()

kured reboots a node once it holds the cluster's reboot lock; with a rolling NodeMaintenance
(`completion: Reboot`) the maintenance is the lock: the controller marks the node it has drained
with `maintenance.aiokcm.io/phase: Drained` (and lists itself in `maintenance.aiokcm.io/maintenances`),
and waits for a new boot ID. The agent polls the nodes through the cluster's API every
`POLL_SECONDS` and reboots each node once each time it becomes Drained, through the simulated
kubelet (`cluster.kubelets[name].reboot`), so it works on either backend. A failed poll (an API
server restarting under a fault test) is tried again at the next one.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import anyio

from apiclient import ApiError
from apiclient.resources import NODES
from controllers.nodemaintenance.api import MAINTENANCES_ANNOTATION, PHASE_ANNOTATION

POLL_SECONDS = 0.2
DRAINED = "Drained"


async def reboot_agent(
    cluster: Any,
    *,
    maintenance: str | None = None,
    down_seconds: float = 1.0,
    rebooted: list[str] | None = None,
) -> None:
    """Until cancelled: reboot each node that becomes Drained (for `maintenance`, when given),
    once per time it does, appending its name to `rebooted`."""
    client = await cluster.client()
    seen_drained: set[str] = set()
    try:
        while True:
            try:
                nodes = await client.list_all(NODES)
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError):
                nodes = []  # a restarting API server: look again at the next poll
            for node in nodes:
                name = node["metadata"]["name"]
                if not drained_for(node, maintenance):
                    seen_drained.discard(name)
                    continue
                if name in seen_drained:
                    continue
                try:
                    kubelet = cluster.kubelets[name]
                except KeyError:
                    continue  # no simulated kubelet: nothing to reboot
                seen_drained.add(name)
                kubelet.reboot(down_seconds=down_seconds)
                if rebooted is not None:
                    rebooted.append(name)
            await anyio.sleep(POLL_SECONDS)
    finally:
        with anyio.CancelScope(shield=True):
            await client.close()


def drained_for(node: dict[str, Any], maintenance: str | None) -> bool:
    """The node says it is drained (for `maintenance`, when given)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    if annotations.get(PHASE_ANNOTATION) != DRAINED:
        return False
    if maintenance is None:
        return True
    return maintenance in (annotations.get(MAINTENANCES_ANNOTATION) or "").split(",")


def boot_id(node_obj: dict[str, Any]) -> str:
    """The node's `status.nodeInfo.bootID` ("" when it reports none)."""
    return str(((node_obj.get("status") or {}).get("nodeInfo") or {}).get("bootID") or "")
