"""One Deployment's reconcile, as `syncDeployment` in `pkg/controller/deployment/deployment_controller.go`.

`DeploymentReconcile.sync(key)` reads the Deployment from the cache, waits when the cache has not
yet delivered this controller's last write to it or one of its ReplicaSets (the informer wakes the
key again when it has), claims ReplicaSets (adopt and release as the selector says), then, in
order: status only while being deleted; evacuation marks and totals (gate
`NodeMaintenanceDeployment`); pause conditions; an evacuation step in a steady state; paused ->
scale only; a rollback request; a scaling event; otherwise one step of the strategy, Recreate or
RollingUpdate. Annotation changes made along the way go out with the sync's status write (one
`/status` write per sync).

The steps themselves are `DeploymentSync`'s and the strategy modules'; this module only orders
them, so the controller's module keeps to informers and event handlers.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from structlog.typing import FilteringBoundLogger

from apiclient.resources import DEPLOYMENTS, REPLICASETS
from controllers.common.controller_ref import (
    ORPHAN_INDEX,
    ControllerRefManager,
    fresh_getter,
    recheck_deletion_timestamp,
)
from controllers.common.deploymentstrategy import RECREATE, strategy_type
from controllers.common.evacuation import replicas_to_evacuate
from controllers.context import EventRecorder
from controllers.deployment import evacuation
from controllers.deployment.recreate import rollout_recreate
from controllers.deployment.rollback import rollback
from controllers.deployment.rolling import rollout_rolling
from controllers.deployment.sync import RS, DeploymentSync
from controllers.deployment.util import is_paused, meta, rollback_to, uid_of
from informers import CONTROLLER_UID_INDEX, Lister
from kubeutil.selectors import from_label_selector
from kubeutil.timestamps import utcnow

Obj = Mapping[str, Any]


@dataclass(kw_only=True, eq=False)
class DeploymentReconcile:
    """The Deployment queue's reconcile; keys are Deployment keys.

    `evacuation_enabled()` is read on every sync, so a feature gate's value is the one in force then.
    """

    syncer: DeploymentSync
    d_lister: Lister
    rs_lister: Lister
    pod_lister: Lister
    recorder: EventRecorder
    evacuation_enabled: Callable[[], bool]
    log: FilteringBoundLogger

    async def sync(self, key: str) -> None:
        cached = self.d_lister.get_by_key(key)
        if cached is None:
            return
        owned = self.rs_lister.by_index(CONTROLLER_UID_INDEX, uid_of(cached))
        if self.syncer.is_behind_our_writes(cached, owned):
            # Our last write is on its way through the informer, which wakes this key again.
            self.log.debug("cache behind our last write, waiting for it")
            return
        d: RS = copy.deepcopy(dict(cached))
        await self._reconcile(d)
        await self.syncer.flush_annotations(d)

    async def _reconcile(self, d: RS) -> None:
        s = self.syncer
        if (d.get("spec") or {}).get("selector") == {}:
            self.recorder.event(
                d,
                "Warning",
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.",
            )
            status = copy.deepcopy(d.get("status") or {})
            if int(status.get("observedGeneration") or 0) < int(meta(d).get("generation") or 0):
                status["observedGeneration"] = meta(d).get("generation")
                await s.update_status(d, status)
            return
        rs_list = await self.replica_sets_for(d)
        pod_map = self.pod_map(rs_list)
        if meta(d).get("deletionTimestamp"):
            await s.sync_status_only(d, rs_list)
            return
        rs_list = await evacuation.sync_marks(s, d, rs_list, enabled=self.evacuation_enabled())
        await s.check_paused_conditions(d)
        if self.evacuation_enabled() and rollback_to(d) is None and await self._evacuate(d, rs_list, pod_map):
            return
        if is_paused(d):
            await s.sync(d, rs_list)
            return
        if rollback_to(d) is not None:
            await rollback(s, d, rs_list)
            return
        if await s.is_scaling_event(d, rs_list):
            await s.sync(d, rs_list)
            return
        if strategy_type(d) == RECREATE:
            await rollout_recreate(s, d, rs_list, pod_map)
        else:
            await rollout_rolling(s, d, rs_list, pod_map)

    async def _evacuate(self, d: RS, rs_list: list[RS], pod_map: Mapping[str, list[Obj]]) -> bool:
        """One evacuation step when the Deployment is steady and has requested pods; True if taken."""
        s = self.syncer
        if not evacuation.can_answer(d, [rs for rs in rs_list if (rs.get("spec") or {}).get("replicas")]):
            return False
        new_rs, old_rss = await s.get_all_replica_sets_and_sync_revision(
            d, rs_list, create_if_not_existed=False
        )
        steady = evacuation.steady_replica_set(d, new_rs, old_rss)
        if steady is None:
            return False
        pods = pod_map.get(uid_of(steady), [])
        requested = evacuation.requested_pods(pods)
        if evacuation.scale_unobserved(steady) and (requested or replicas_to_evacuate(d) > 0):
            # Mid-evacuation, our last scale (a surge or a release) has reached the cache but not
            # the ReplicaSet controller, whose status write for it (observedGeneration, replicas)
            # wakes this Deployment again: one status write then covers both, where writing now
            # (only unavailableReplicas moves) made two per step and spent the controller's qps
            # budget, which sets a large drain's pace.
            return True
        if not requested:
            return False
        await evacuation.reconcile(s, d, steady, pods, now=utcnow())
        all_rss: list[RS | None] = [*old_rss, new_rs]
        if is_paused(d):
            await s.sync_deployment_status(all_rss, new_rs, d)
        else:
            await s.sync_rollout_status(all_rss, new_rs, d)
        return True

    # -- reads ----------------------------------------------------------------------------

    def pod_map(self, rs_list: list[RS]) -> dict[str, list[Obj]]:
        """`getPodMapForDeployment`: pods grouped by the UID of the owning ReplicaSet."""
        return {
            uid_of(rs): list(self.pod_lister.by_index(CONTROLLER_UID_INDEX, uid_of(rs))) for rs in rs_list
        }

    async def replica_sets_for(self, d: RS) -> list[RS]:
        """`getReplicaSetsForDeployment`: adopt matching orphans, release owned non-matching ones."""
        client = self.syncer.client
        manager = ControllerRefManager(
            client,
            d,
            from_label_selector((d.get("spec") or {}).get("selector")),
            api_version="apps/v1",
            kind="Deployment",
            can_adopt=recheck_deletion_timestamp(fresh_getter(client, DEPLOYMENTS, d)),
            resource=REPLICASETS,
        )
        # The cached objects themselves, read-only (KCM lists from the lister and copies only what
        # it writes): copying each ReplicaSet of the namespace cost ~40 us apiece on every sync.
        # Only ours and orphans can be claimed, so the indexes find them without a namespace scan.
        namespace = meta(d).get("namespace")
        owned = [
            rs
            for rs in self.rs_lister.by_index(CONTROLLER_UID_INDEX, uid_of(d))
            if meta(rs).get("namespace") == namespace
        ]
        orphans = self.rs_lister.by_index(ORPHAN_INDEX, str(namespace)) if namespace else []
        return await manager.claim(owned + orphans)
