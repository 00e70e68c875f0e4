"""The create reconcile: make a node's maintenance Lease when it has none, at a pace.

The lease made is `nodemaintenancelease.lease.create_lease`'s, the one `acquire` makes for a first
holder minus the holder fields: named after the node, in `kube-node-maintenance`, owned by the
node, `spec: {}` (free). The namespace is made first if the create finds it missing.

Create only, never update: a 409 AlreadyExists means a holder created it in between (its `acquire`
came first), which is what we wanted, so it counts as done. Nothing here can undo a holder's claim.

Pacing: each create waits for a token of the controller's own bucket (`CREATES_PER_SECOND`, burst
1), then goes through the controller's own client (its `--kube-api-qps` / `--kube-api-burst`). The
cache is read again after the wait: a lease a holder made meanwhile costs no request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from structlog.typing import FilteringBoundLogger

from apiclient import KubeClient
from apiclient.throttle import TokenBucket
from controllers.maintenancelease import metrics
from controllers.maintenancelease.state import Backlog, Progress
from informers import Lister
from nodemaintenancelease.lease import NAMESPACE, create_lease

Obj = Mapping[str, Any]


@dataclass(kw_only=True, eq=False)
class LeaseCreateSync:
    """One node's missing lease, made; keys are node names."""

    client: KubeClient
    node_lister: Lister
    lease_lister: Lister
    backlog: Backlog
    pace: TokenBucket
    log: FilteringBoundLogger

    def _needed(self, key: str) -> Obj | None:
        """The node, if it is there and no lease of it is cached."""
        node = self.node_lister.get(key)
        if node is None or self.lease_lister.get(key, NAMESPACE) is not None:
            return None
        return node

    async def sync(self, key: str) -> None:
        if self._needed(key) is None:
            self._settled(key, created=False)
            return
        await self.pace.acquire()
        node = self._needed(key)  # what the wait let the cache learn
        if node is None:
            self._settled(key, created=False)
            return
        made = await create_lease(self.client, node)
        metrics.CREATES.labels("created" if made is not None else "already_exists").inc()
        self._settled(key, created=made is not None)

    def _settled(self, key: str, *, created: bool) -> None:
        self.report(self.backlog.settle(key, created=created))

    def give_up(self, key: str) -> None:
        """The worker's `on_drop`: the node's retries are spent; its next event queues it again."""
        self.report(self.backlog.give_up(key))

    def report(self, progress: Progress | None) -> None:
        if progress is None or not (progress.created or progress.failed):
            return
        self.log.info(
            f"created {progress.created} of {progress.missing} missing maintenance leases",
            created=progress.created,
            missing=progress.missing,
            skipped=progress.skipped,
            failed=progress.failed,
            finished=progress.finished,
        )
