"""MaintenanceLeaseController: every node's maintenance Lease made and owned by its node, at a pace.

The Node Maintenance Lease proposal: one Lease per node, named after it, in namespace
`kube-node-maintenance`, owned by the node (so the garbage collector removes it with the node),
made by this controller for every node and made again when deleted while its node exists. A
holder (`aiokcm lease acquire`, the NodeMaintenance controller's gate) then only takes it; its
`nodemaintenancelease.lease.acquire` still creates a lease it finds missing (this controller off,
or not there yet), with the same body, so either way a node's lease is the same object.

Why eagerly, and why paced. Made in advance, a lease is there for every tool that reads before it
writes (`aiokcm lease status`, monitoring, a kubectl-wielding administrator), as the proposal
asks. But 5,000 creates at once would open with a burst of 30 and then spend the controller's
whole client budget (qps 20) for four minutes, its owner repairs queued behind them, so creates go
one at a time through a second queue
served by one worker, each waiting for a token of its own bucket (`CREATES_PER_SECOND` = 10, burst
1) and then going through the controller's own client, the one KCM-style budget it shares with its
owner repairs: a first start over 5,000 nodes makes their leases in the background in about 8
minutes, at half the controller's budget, and never delays another controller (each has its own
client). Progress is logged every `state.PROGRESS_EVERY` creates and counted in
`aiokcm_maintenance_lease_creates_total` and `aiokcm_maintenance_leases_missing`.

Create only: the controller never updates a lease's spec, so a holder that acquired first is never
undone; the 409 its create then gets is a success (`createsync`). Owner references of leases made
by others (by hand, a client-go LeaseLock, a lease that outlived its node's recreation) are
repaired by the owner queue (`ownersync`).

Keys are node names on both queues. Lease adds and updates queue the node for its owner; a node
added or recreated queues itself for its owner when its lease is cached, for a create otherwise; a
lease deleted while its node is cached queues the node for a create. The start looks once the
caches have synced: each node without a cached lease is queued for a create, nothing else, so a
restart over a settled cluster writes nothing and sends nothing beyond its lists and watches (and
reads the namespace only when no lease is cached). A lease whose node is gone is left to the
garbage collector; if it collects the lease before the node's delete reaches this cache, the lease
may be made once more, and is collected again (its owner's uid is gone).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiclient.resources import LEASES, NODES
from apiclient.throttle import TokenBucket
from controllers.base import Controller
from controllers.context import ControllerContext
from controllers.maintenancelease import metrics
from controllers.maintenancelease.createsync import LeaseCreateSync
from controllers.maintenancelease.ownersync import LeaseOwnerSync
from controllers.maintenancelease.state import Backlog
from controllers.worker import is_expected_failure
from informers import ResourceEventHandler, deleted_object
from nodemaintenancelease.lease import NAMESPACE, ensure_namespace, namespace_exists
from workqueue import RateLimitingQueue

Obj = Mapping[str, Any]

CREATES_PER_SECOND = 10.0  # half of the controller's client budget (qps 20), the rest for repairs


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


class MaintenanceLeaseController(Controller):
    """Every node's maintenance Lease, made (at `creates_per_second` at most) and owned by the node."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        name: str,
        workers: int,
        creates_per_second: float = CREATES_PER_SECOND,
    ) -> None:
        super().__init__(ctx, name=name, workers=workers)
        node_inf = ctx.informers.informer(NODES)
        lease_inf = ctx.informers.informer(LEASES, namespace=NAMESPACE)
        self.node_lister = node_inf.lister
        self.lease_lister = lease_inf.lister
        self.backlog = Backlog()
        self.started = False  # until the caches synced, the start's look queues the creates
        self.syncer = LeaseOwnerSync(
            client=ctx.client, node_lister=self.node_lister, lease_lister=self.lease_lister
        )
        self.create_queue: RateLimitingQueue[str] = RateLimitingQueue(name=f"{name}_create")
        self.create_syncer = LeaseCreateSync(
            client=ctx.client,
            node_lister=self.node_lister,
            lease_lister=self.lease_lister,
            backlog=self.backlog,
            pace=TokenBucket(creates_per_second, 1),
            log=self.log,
        )
        self.create_worker = self.make_worker(self.create_syncer.sync, on_drop=self.create_syncer.give_up)
        self.serve_also(self.create_queue, self.create_worker)  # one worker: the pace is one token at a time
        node_inf.add_event_handler(
            ResourceEventHandler(on_add=self._node_added, on_update=self._node_updated)
        )
        lease_inf.add_event_handler(
            ResourceEventHandler(
                on_add=self._enqueue,
                on_update=lambda _old, new: self._enqueue(new),
                on_delete=self._lease_deleted,
            )
        )
        metrics.COLLECTOR.watch(self, lambda c: c.lease_lister.list(NAMESPACE), lambda c: len(c.backlog))

    def _enqueue(self, obj: Obj) -> None:
        name = _name(obj)
        if name:
            self.enqueue(name)

    def _want_lease(self, name: str) -> None:
        if self.backlog.add(name):
            self.create_queue.add(name)

    async def prepare(self) -> None:
        """The namespace, on a fresh cluster (no lease cached: one read, and a create if it is
        missing), then a create queued for each node without a cached lease."""
        if len(self.lease_lister) == 0:
            try:
                if not await namespace_exists(self.client):
                    await ensure_namespace(self.client)
            except Exception as exc:
                if not is_expected_failure(exc):
                    raise
                # Not fatal: a create that finds the namespace missing ensures it again.
                self.log.warning("ensuring the lease namespace failed", error=str(exc), namespace=NAMESPACE)
        self.started = True
        for name in self.node_lister.keys():
            if self.lease_lister.get(name, NAMESPACE) is None:
                self._want_lease(name)
        if self.backlog:
            self.log.info(
                "creating missing maintenance leases in the background",
                missing=len(self.backlog),
                nodes=len(self.node_lister),
            )

    def _node_added(self, node: Obj) -> None:
        name = _name(node)
        if not name:
            return
        if self.lease_lister.get(name, NAMESPACE) is not None:
            self.enqueue(name)
        elif self.started:
            self._want_lease(name)

    def _node_updated(self, old: Obj, new: Obj) -> None:
        # Only a node recreated under the same name (new uid) changes what its lease should say.
        if (old.get("metadata") or {}).get("uid") != (new.get("metadata") or {}).get("uid"):
            self._node_added(new)

    def _lease_deleted(self, obj: object) -> None:
        lease = deleted_object(obj)
        name = _name(lease) if lease is not None else ""
        if name and self.started and self.node_lister.get(name) is not None:
            self._want_lease(name)

    async def sync(self, key: str) -> None:
        await self.syncer.sync(key)
