"""The pod reconcile (the pod queue): KCM's `processPod`.

A pod that appears on a node already known not Ready is marked not ready at once, not at the
node's next health pass, so no Service sends it traffic meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

from controllers.nodelifecycle.state import NodeLifecycleState
from controllers.nodelifecycle.writes import NodeWrites
from informers import Lister


@dataclass(kw_only=True, eq=False)
class PodSync:
    """One pod against its node's last known health; keys are pod keys."""

    pod_lister: Lister
    state: NodeLifecycleState
    writes: NodeWrites

    async def sync(self, key: str) -> None:
        """`processPod`: a pod on a node known not Ready is marked not ready too."""
        pod = self.pod_lister.get_by_key(key)
        if pod is None:
            return
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        health = self.state.health.get(node_name)
        if health is None or health.ready is None:
            return
        if health.ready.get("status") != "True":
            await self.writes.mark_pods_not_ready([pod], node_name)
