"""MaintenanceLeaseController: the namespace and one unheld Lease per node, never the holder fields.

The Node Maintenance Lease proposal asks the control plane to create, for every node, a Lease named after it in namespace
`kube-node-maintenance`, owned by the node (so the garbage collector removes it with the node), and
to recreate it when someone deletes it. Holding the lease is the holders' business (see `lease.py`):
this controller creates leases with an empty spec and otherwise only repairs the owner reference,
through a JSON patch of `metadata.ownerReferences` guarded by resourceVersion, so it can never
undo a holder's write.

Keys are node names. Node adds and deletes, and every Lease event in the namespace, enqueue the
node; the sync compares the two caches. A Lease whose node is gone is left to the garbage collector
(its owner reference says so). The namespace is ensured once before the workers start and again
whenever a create finds it missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from apiclient import ApiError
from apiclient.resources import LEASES, NODES
from controllers.base import Controller
from controllers.context import ControllerContext
from controllers.maintenancelease import metrics
from controllers.maintenancelease.lease import NAMESPACE, create_lease, ensure_namespace
from controllers.worker import is_expected_failure
from informers import DeletedFinalStateUnknown, ResourceEventHandler

Obj = Mapping[str, Any]
GATE = "NodeMaintenanceLease"


def _name(obj: Obj | DeletedFinalStateUnknown) -> str:
    inner = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
    return str((inner.get("metadata") or {}).get("name", ""))


def _node_ref(lease: Obj, node: Obj) -> tuple[int, Mapping[str, Any]] | None:
    """The lease's owner reference to a Node of that name, with its index; None if there is none."""
    node_name = (node.get("metadata") or {}).get("name")
    for i, ref in enumerate((lease.get("metadata") or {}).get("ownerReferences") or []):
        if ref.get("kind") == "Node" and ref.get("apiVersion") == "v1" and ref.get("name") == node_name:
            return i, ref
    return None


class MaintenanceLeaseController(Controller):
    """One maintenance Lease per node, owned by the node."""

    name: ClassVar[str] = "maintenance-lease"
    required_gates: ClassVar[tuple[str, ...]] = (GATE,)
    default_workers: ClassVar[int] = 2

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        node_inf = ctx.informers.informer(NODES)
        lease_inf = ctx.informers.informer(LEASES, namespace=NAMESPACE)
        self.node_lister = node_inf.lister
        self.lease_lister = lease_inf.lister
        node_inf.add_event_handler(ResourceEventHandler(
            on_add=self._enqueue, on_update=self._node_updated, on_delete=self._enqueue,
        ))
        lease_inf.add_event_handler(ResourceEventHandler(
            on_add=self._enqueue, on_update=lambda _old, new: self._enqueue(new), on_delete=self._enqueue,
        ))
        metrics.COLLECTOR.watch(self, lambda c: c.lease_lister.list(NAMESPACE))

    def _enqueue(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        name = _name(obj)
        if name:
            self.enqueue(name)

    def _node_updated(self, old: Obj, new: Obj) -> None:
        # Only a node recreated under the same name (new uid) changes what its lease should say.
        if (old.get("metadata") or {}).get("uid") != (new.get("metadata") or {}).get("uid"):
            self._enqueue(new)

    async def prepare(self) -> None:
        try:
            await ensure_namespace(self.client)
        except Exception as exc:
            if not is_expected_failure(exc):
                raise
            # Not fatal: a create that finds the namespace missing ensures it again.
            self.log.warning("ensuring the lease namespace failed", error=str(exc), namespace=NAMESPACE)

    async def sync(self, key: str) -> None:
        node = self.node_lister.get(key)
        if node is None:
            return  # the garbage collector removes the lease with its owner
        lease = self.lease_lister.get(key, NAMESPACE)
        if lease is None:
            created = await create_lease(self.client, node)
            if created is not None:
                self.recorder.event(node, "Normal", "MaintenanceLeaseCreated",
                                    f"created Lease {NAMESPACE}/{key}")
            return
        await self._own(lease, node)

    async def _own(self, lease: Obj, node: Obj) -> None:
        """Point the lease's owner reference at this node (a lease made by hand, or a recreated node)."""
        uid = (node.get("metadata") or {}).get("uid")
        found = _node_ref(lease, node)
        if found is not None and found[1].get("uid") == uid:
            return
        meta = lease.get("metadata") or {}
        ref = {"apiVersion": "v1", "kind": "Node", "name": str(meta.get("name")), "uid": str(uid)}
        refs = [dict(r) for r in meta.get("ownerReferences") or []]
        if found is not None:
            refs[found[0]] = ref
        else:
            refs.append(ref)
        # A merge patch carrying the resourceVersion read: 409 if anyone wrote since (then we look again).
        patch = {"metadata": {"resourceVersion": str(meta.get("resourceVersion", "")), "ownerReferences": refs}}
        try:
            await self.client.patch(LEASES, str(meta.get("name")), patch, namespace=NAMESPACE)
        except ApiError as exc:
            if not exc.not_found:
                raise
