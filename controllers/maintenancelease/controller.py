"""MaintenanceLeaseController: each node's maintenance Lease owned by its node, never the holder fields.

The Node Maintenance Lease proposal: one Lease per node, named after it, in namespace
`kube-node-maintenance`, owned by the node (so the garbage collector removes it with the node).
Leases are made when first needed, not in advance: `nodemaintenancelease.lease.acquire` (every holder:
`aiokcm lease acquire`, the NodeMaintenance controller's gate) creates the node's lease, owned by
the node, together with the namespace when either is missing (the controller makes the namespace
at start on a fresh cluster; a restart only reads it). A node without a lease is free.
Creating 5,000 empty leases at start would cost 5,000 writes (four minutes of a qps-20 budget)
for leases most nodes never need, and a start that writes is not a quiet one.

This controller repairs what others made: a lease created by hand (kubectl, a client-go
LeaseLock) without the owner reference, or one that outlived its node's recreation under the
same name. The repair is `sync.MaintenanceLeaseSync`.

Keys are node names. Lease adds and updates enqueue the node; a node added or recreated enqueues
itself only when its lease is cached (a node without one has nothing to repair, so a start over
5,000 nodes queues nothing). A lease whose node is gone is left to the garbage collector.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiclient.resources import LEASES, NODES
from controllers.base import Controller
from controllers.context import ControllerContext
from controllers.maintenancelease import metrics
from controllers.maintenancelease.sync import MaintenanceLeaseSync
from controllers.worker import is_expected_failure
from informers import ResourceEventHandler
from nodemaintenancelease.lease import NAMESPACE, ensure_namespace, namespace_exists

Obj = Mapping[str, Any]


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


class MaintenanceLeaseController(Controller):
    """Every node's maintenance Lease, once someone made it, owned by the node."""

    def __init__(self, ctx: ControllerContext, *, name: str, workers: int) -> None:
        super().__init__(ctx, name=name, workers=workers)
        node_inf = ctx.informers.informer(NODES)
        lease_inf = ctx.informers.informer(LEASES, namespace=NAMESPACE)
        self.node_lister = node_inf.lister
        self.lease_lister = lease_inf.lister
        self.syncer = MaintenanceLeaseSync(
            client=ctx.client, node_lister=self.node_lister, lease_lister=self.lease_lister
        )
        node_inf.add_event_handler(
            ResourceEventHandler(on_add=self._node_added, on_update=self._node_updated)
        )
        lease_inf.add_event_handler(
            ResourceEventHandler(
                on_add=self._enqueue,
                on_update=lambda _old, new: self._enqueue(new),
            )
        )
        metrics.COLLECTOR.watch(self, lambda c: c.lease_lister.list(NAMESPACE))

    def _enqueue(self, obj: Obj) -> None:
        name = _name(obj)
        if name:
            self.enqueue(name)

    async def prepare(self) -> None:
        """The namespace, made on a fresh cluster so the first holder does not wait for it; a read
        otherwise (a restart writes nothing)."""
        try:
            if not await namespace_exists(self.client):
                await ensure_namespace(self.client)
        except Exception as exc:
            if not is_expected_failure(exc):
                raise
            # Not fatal: a create that finds the namespace missing ensures it again.
            self.log.warning("ensuring the lease namespace failed", error=str(exc), namespace=NAMESPACE)

    def _node_added(self, node: Obj) -> None:
        name = _name(node)
        if name and self.lease_lister.get(name, NAMESPACE) is not None:
            self.enqueue(name)

    def _node_updated(self, old: Obj, new: Obj) -> None:
        # Only a node recreated under the same name (new uid) changes what its lease should say.
        if (old.get("metadata") or {}).get("uid") != (new.get("metadata") or {}).get("uid"):
            self._node_added(new)

    async def sync(self, key: str) -> None:
        await self.syncer.sync(key)
