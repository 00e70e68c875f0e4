"""The NoSchedule taint reconcile (the node queue): KCM's `doNoScheduleTaintingPass`.

A node's conditions map to taints (Ready False/Unknown -> `not-ready`/`unreachable`,
MemoryPressure/DiskPressure/PIDPressure/NetworkUnavailable True -> their taints, all NoSchedule;
`spec.unschedulable` -> `unschedulable`), written as one diff so the scheduler never sees half of
a change.
"""

from __future__ import annotations

from dataclasses import dataclass

from controllers.nodelifecycle.taints import controller_no_schedule_taints, no_schedule_taints
from controllers.nodelifecycle.writes import NodeWrites
from informers import Lister
from kubeutil.taints import taint_set_diff


@dataclass(kw_only=True, eq=False)
class NoScheduleTaintSync:
    """One node's condition taints in step with its conditions; keys are node names."""

    node_lister: Lister
    writes: NodeWrites

    async def sync(self, key: str) -> None:
        """`doNoScheduleTaintingPass`: make the node's condition taints match its conditions."""
        node = self.node_lister.get(key)
        if node is None:
            return
        add, remove = taint_set_diff(no_schedule_taints(node), controller_no_schedule_taints(node))
        if add or remove:
            await self.writes.swap_node_taints(key, add, remove)
