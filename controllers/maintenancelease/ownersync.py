"""The owner reconcile: point a node's maintenance Lease owner reference at the node.

Only a lease made without it is repaired (by hand, a client-go LeaseLock, or one that outlived its
node's recreation under the same name): the write is a merge patch of `metadata.ownerReferences`
guarded by the resourceVersion read, so it can never undo a holder's write. A lease this
controller or `acquire` made is owned from its create on and costs nothing here but a cache read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apiclient import ApiError, KubeClient
from apiclient.resources import LEASES
from informers import Lister
from nodemaintenancelease.lease import NAMESPACE

Obj = Mapping[str, Any]


def _node_ref(lease: Obj, node: Obj) -> tuple[int, Mapping[str, Any]] | None:
    """The lease's owner reference to a Node of that name, with its index; None if there is none."""
    node_name = (node.get("metadata") or {}).get("name")
    for i, ref in enumerate((lease.get("metadata") or {}).get("ownerReferences") or []):
        if ref.get("kind") == "Node" and ref.get("apiVersion") == "v1" and ref.get("name") == node_name:
            return i, ref
    return None


@dataclass(kw_only=True, eq=False)
class LeaseOwnerSync:
    """One node's lease, owned by that node; keys are node names."""

    client: KubeClient
    node_lister: Lister
    lease_lister: Lister

    async def sync(self, key: str) -> None:
        node = self.node_lister.get(key)
        if node is None:
            return  # the garbage collector removes the lease with its owner
        lease = self.lease_lister.get(key, NAMESPACE)
        if lease is None:
            return  # missing: the create queue makes it (a lease's delete puts its node there)
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
        patch = {
            "metadata": {"resourceVersion": str(meta.get("resourceVersion", "")), "ownerReferences": refs}
        }
        try:
            await self.client.patch(LEASES, str(meta.get("name")), patch, namespace=NAMESPACE)
        except ApiError as exc:
            if not exc.not_found:
                raise
