"""The node queue's reconcile: KCM's `doNoScheduleTaintingPass`, then `reconcileNodeLabels`.

A node's conditions map to taints (Ready False/Unknown -> `not-ready`/`unreachable`,
MemoryPressure/DiskPressure/PIDPressure/NetworkUnavailable True -> their taints, all NoSchedule;
`spec.unschedulable` -> `unschedulable`), written as one diff so the scheduler never sees half of
a change. Then the beta OS/arch labels are kept equal to the stable ones (`labels`).
"""

from __future__ import annotations

from dataclasses import dataclass

from controllers.nodelifecycle.labels import labels_to_reconcile
from controllers.nodelifecycle.taints import controller_no_schedule_taints, no_schedule_taints
from controllers.nodelifecycle.writes import NodeWrites
from informers import Lister
from kubeutil.meta import object_meta
from kubeutil.taints import taint_set_diff


@dataclass(kw_only=True, eq=False)
class NoScheduleTaintSync:
    """One node's condition taints in step with its conditions, and its labels; keys are node names."""

    node_lister: Lister
    writes: NodeWrites

    async def sync(self, key: str) -> None:
        """`doNodeProcessingPassWorker`: both passes; the labels are reconciled even if tainting failed."""
        try:
            await self.no_schedule_tainting_pass(key)
        finally:
            await self.reconcile_node_labels(key)

    async def no_schedule_tainting_pass(self, key: str) -> None:
        """`doNoScheduleTaintingPass`: make the node's condition taints match its conditions."""
        node = self.node_lister.get(key)
        if node is None:
            return
        add, remove = taint_set_diff(no_schedule_taints(node), controller_no_schedule_taints(node))
        if add or remove:
            await self.writes.swap_node_taints(key, add, remove)

    async def reconcile_node_labels(self, key: str) -> None:
        """`reconcileNodeLabels`: the beta OS/arch labels follow the stable ones."""
        node = self.node_lister.get(key)
        if node is None:
            return
        update = labels_to_reconcile(object_meta(node).get("labels"))
        if update:
            await self.writes.add_or_update_labels(key, update)
