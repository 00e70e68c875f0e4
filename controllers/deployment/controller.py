"""The Deployment controller's wiring, as `pkg/controller/deployment/deployment_controller.go`.

Informers on Deployments, ReplicaSets and Pods; handlers only enqueue Deployment keys:
- a Deployment added, updated or deleted;
- a ReplicaSet event goes to its controlling Deployment, or, for an orphan, to every Deployment
  whose selector matches it (one may adopt it); a ReplicaSet whose owner changed wakes both;
- a pod deletion wakes a Recreate Deployment once its last old pod is gone (Recreate waits for
  that), and pod changes on an evacuation-ready ReplicaSet with an evacuation under way wake
  its Deployment (evacuation steps wait on pods becoming available or going away).

`sync(key)` follows `syncDeployment`, unless the cache has not yet delivered this controller's
last write to the Deployment or one of its ReplicaSets (the informer wakes it again when it has):
claim ReplicaSets (adopt and release as the selector says),
then, in order: status only while being deleted; evacuation marks and totals (gate
`NodeMaintenanceDeployment`); pause conditions; an evacuation step in a steady state; paused ->
scale only; a rollback request; a scaling event; otherwise one step of the strategy. Annotation changes made along the way go out with the
sync's status write (one `/status` write per sync).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from apiclient.resources import DEPLOYMENTS, PODS, REPLICASETS
from controllers import features
from controllers.base import Controller
from controllers.common.controller_ref import (
    ORPHAN_INDEX,
    ControllerRefManager,
    ensure_orphan_index,
    fresh_getter,
    get_controller_of,
    recheck_deletion_timestamp,
)
from controllers.common.deploymentstrategy import RECREATE, strategy_type
from controllers.common.evacuation import (
    has_evacuation_request,
    is_evacuation_ready,
    replicas_to_evacuate,
)
from controllers.context import ControllerContext
from controllers.deployment import evacuation
from controllers.deployment.recreate import rollout_recreate
from controllers.deployment.rollback import rollback, rollback_to
from controllers.deployment.rolling import rollout_rolling
from controllers.deployment.sync import RS, DeploymentSync
from controllers.deployment.util import is_paused, meta, uid_of
from informers import (
    CONTROLLER_UID_INDEX,
    DeletedFinalStateUnknown,
    ResourceEventHandler,
    meta_key,
    split_key,
)
from kubeutil.selectors import from_label_selector
from kubeutil.timestamps import utcnow

Obj = Mapping[str, Any]


class DeploymentController(Controller):
    def __init__(self, ctx: ControllerContext, *, name: str, workers: int) -> None:
        super().__init__(ctx, name=name, workers=workers)
        self.d_informer = ctx.informers.informer(DEPLOYMENTS)
        self.rs_informer = ctx.informers.informer(REPLICASETS)
        ensure_orphan_index(self.rs_informer)
        self.pod_informer = ctx.informers.informer(PODS)
        self.d_informer.add_event_handler(
            ResourceEventHandler(
                on_add=self._enqueue_obj,
                on_update=lambda _o, n: self._enqueue_obj(n),
                on_delete=self._delete_deployment,
            )
        )
        self.rs_informer.add_event_handler(
            ResourceEventHandler(on_add=self._add_rs, on_update=self._update_rs, on_delete=self._delete_rs)
        )
        self.pod_informer.add_event_handler(
            ResourceEventHandler(on_add=self._add_pod, on_update=self._update_pod, on_delete=self._delete_pod)
        )
        self.syncer = DeploymentSync(self.client, self.recorder, requeue_after=self._requeue_after)

    # -- handlers -----------------------------------------------------------------------------

    def _enqueue_obj(self, d: Obj) -> None:
        self.enqueue(meta_key(d))

    def _requeue_after(self, d: Obj, seconds: float) -> None:
        """A later look at `d`; "now" goes through the rate limiter, as KCM's `enqueueRateLimited`,
        so a Deployment whose deadline is due can never requeue itself in a busy loop."""
        if seconds <= 0:
            self.queue.add_rate_limited(meta_key(d))
        else:
            self.queue.add_after(meta_key(d), seconds)

    def _delete_deployment(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        d = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if d is not None:
            self.syncer.forget(d, replica_set=False)
            self._enqueue_obj(d)

    def _resolve_controller_ref(self, namespace: str, ref: Mapping[str, Any] | None) -> Obj | None:
        """The Deployment a controller reference names, if it is ours and the UID matches."""
        if ref is None or ref.get("kind") != "Deployment":
            return None
        d = self.d_informer.lister.get(str(ref.get("name")), namespace)
        if d is None or uid_of(d) != ref.get("uid"):
            return None
        return d

    def _deployments_for_rs(self, rs: Obj) -> list[Obj]:
        """`getDeploymentsForReplicaSet`: Deployments in the namespace whose selector matches."""
        labels = meta(rs).get("labels") or {}
        if not labels:
            return []
        out: list[Obj] = []
        for d in self.d_informer.lister.list(meta(rs).get("namespace")):
            selector = (d.get("spec") or {}).get("selector")
            if selector and from_label_selector(selector).matches(labels):
                out.append(d)
        return out

    def _add_rs(self, rs: Obj) -> None:
        if meta(rs).get("deletionTimestamp"):
            self._delete_rs(rs)
            return
        ns = str(meta(rs).get("namespace", ""))
        ref = get_controller_of(rs)
        if ref is not None:
            d = self._resolve_controller_ref(ns, ref)
            if d is not None:
                self._enqueue_obj(d)
            return
        for d in self._deployments_for_rs(rs):
            self._enqueue_obj(d)

    def _update_rs(self, old: Obj, cur: Obj) -> None:
        if meta(old).get("resourceVersion") == meta(cur).get("resourceVersion"):
            return
        ns = str(meta(cur).get("namespace", ""))
        old_ref, cur_ref = get_controller_of(old), get_controller_of(cur)
        ref_changed = (old_ref or {}).get("uid") != (cur_ref or {}).get("uid")
        if ref_changed and old_ref is not None:
            d = self._resolve_controller_ref(ns, old_ref)
            if d is not None:
                self._enqueue_obj(d)
        if cur_ref is not None:
            d = self._resolve_controller_ref(ns, cur_ref)
            if d is not None:
                self._enqueue_obj(d)
            return
        labels_changed = (meta(old).get("labels") or {}) != (meta(cur).get("labels") or {})
        if labels_changed or ref_changed:
            for d in self._deployments_for_rs(cur):
                self._enqueue_obj(d)

    def _delete_rs(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        rs = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if rs is None:
            return
        self.syncer.forget(rs, replica_set=True)
        d = self._resolve_controller_ref(str(meta(rs).get("namespace", "")), get_controller_of(rs))
        if d is not None:
            self._enqueue_obj(d)

    def _deployment_for_pod(self, pod: Obj) -> tuple[Obj | None, Obj | None]:
        """The pod's ReplicaSet and that ReplicaSet's Deployment (None when not ours)."""
        ref = get_controller_of(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return None, None
        ns = str(meta(pod).get("namespace", ""))
        rs = self.rs_informer.lister.get(str(ref.get("name")), ns)
        if rs is None or uid_of(rs) != ref.get("uid"):
            return None, None
        return rs, self._resolve_controller_ref(ns, get_controller_of(rs))

    def _pod_matters_for_evacuation(self, rs: Obj, d: Obj, *pods: Obj) -> bool:
        if not is_evacuation_ready(rs):
            return False
        return (
            replicas_to_evacuate(rs) > 0
            or replicas_to_evacuate(d) > 0
            or any(has_evacuation_request(p) for p in pods)
        )

    def _add_pod(self, pod: Obj) -> None:
        rs, d = self._deployment_for_pod(pod)
        if rs is not None and d is not None and self._pod_matters_for_evacuation(rs, d, pod):
            self._enqueue_obj(d)

    def _update_pod(self, old: Obj, cur: Obj) -> None:
        if meta(old).get("resourceVersion") == meta(cur).get("resourceVersion"):
            return
        rs, d = self._deployment_for_pod(cur)
        if rs is not None and d is not None and self._pod_matters_for_evacuation(rs, d, old, cur):
            self._enqueue_obj(d)

    def _delete_pod(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if pod is None:
            return
        rs, d = self._deployment_for_pod(pod)
        if rs is None or d is None:
            return
        if strategy_type(d) == RECREATE:
            # Recreate waits for every old pod to be gone: wake it when the last one goes.
            if not self._pods_of(d, self.rs_informer.lister.list(meta(d).get("namespace"))):
                self._enqueue_obj(d)
        elif self._pod_matters_for_evacuation(rs, d, pod):
            self._enqueue_obj(d)

    # -- reads ----------------------------------------------------------------------------

    def _pods_of(self, d: Obj, rs_list: Sequence[Obj]) -> list[Obj]:
        uids = {uid_of(rs) for rs in rs_list if (get_controller_of(rs) or {}).get("uid") == uid_of(d)}
        return [p for uid in uids for p in self.pod_informer.lister.by_index(CONTROLLER_UID_INDEX, uid)]

    def pod_map(self, rs_list: list[RS]) -> dict[str, list[Obj]]:
        """`getPodMapForDeployment`: pods grouped by the UID of the owning ReplicaSet."""
        return {
            uid_of(rs): list(self.pod_informer.lister.by_index(CONTROLLER_UID_INDEX, uid_of(rs)))
            for rs in rs_list
        }

    async def replica_sets_for(self, d: RS) -> list[RS]:
        """`getReplicaSetsForDeployment`: adopt matching orphans, release owned non-matching ones."""
        selector = from_label_selector((d.get("spec") or {}).get("selector"))
        manager = ControllerRefManager(
            self.client,
            d,
            selector,
            api_version="apps/v1",
            kind="Deployment",
            can_adopt=recheck_deletion_timestamp(fresh_getter(self.client, DEPLOYMENTS, d)),
            resource=REPLICASETS,
        )
        # The cached objects themselves, read-only (KCM lists from the lister and copies only what
        # it writes): copying each ReplicaSet of the namespace cost ~40 us apiece on every sync.
        # Only ours and orphans can be claimed, so the indexes find them without a namespace scan.
        namespace = meta(d).get("namespace")
        lister = self.rs_informer.lister
        owned = [
            rs
            for rs in lister.by_index(CONTROLLER_UID_INDEX, uid_of(d))
            if meta(rs).get("namespace") == namespace
        ]
        orphans = lister.by_index(ORPHAN_INDEX, str(namespace)) if namespace else []
        return await manager.claim(owned + orphans)

    # -- the reconcile ---------------------------------------------------------------------

    @property
    def evacuation_enabled(self) -> bool:
        return self.ctx.gates.enabled(features.NODE_MAINTENANCE_DEPLOYMENT)

    async def sync(self, key: str) -> None:
        namespace, name = split_key(key)
        cached = self.d_informer.lister.get(name, namespace or None)
        if cached is None:
            return
        owned = self.rs_informer.lister.by_index(CONTROLLER_UID_INDEX, uid_of(cached))
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
        rs_list = await evacuation.sync_marks(s, d, rs_list, enabled=self.evacuation_enabled)
        await s.check_paused_conditions(d)
        if self.evacuation_enabled and rollback_to(d) is None and await self._evacuate(d, rs_list, pod_map):
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
        if not evacuation.requested_pods(pods):
            return False
        await evacuation.reconcile(s, d, steady, pods, now=utcnow())
        all_rss: list[RS | None] = [*old_rss, new_rs]
        if is_paused(d):
            await s.sync_deployment_status(all_rss, new_rs, d)
        else:
            await s.sync_rollout_status(all_rss, new_rs, d)
        return True
