"""The Deployment controller's wiring, as `pkg/controller/deployment/deployment_controller.go`.

Informers on Deployments, ReplicaSets and Pods; handlers only enqueue Deployment keys:
- a Deployment added, updated or deleted;
- a ReplicaSet event goes to its controlling Deployment, or, for an orphan, to every Deployment
  whose selector matches it (one may adopt it); a ReplicaSet whose owner changed wakes both;
- a pod deletion wakes a Recreate Deployment once its last old pod is gone (Recreate waits for
  that), and pod changes on an evacuation-ready ReplicaSet with an evacuation under way wake
  its Deployment (evacuation steps wait on pods becoming available or going away).

`sync(key)` hands the key to `reconcile.DeploymentReconcile` (`syncDeployment`: the order of
the steps and the choice of strategy); this module holds the informers and the event handlers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apiclient.resources import DEPLOYMENTS, PODS, REPLICASETS
from controllers import features
from controllers.base import Controller
from controllers.common.controller_ref import (
    ensure_orphan_index,
    get_controller_of,
)
from controllers.common.deploymentstrategy import RECREATE, strategy_type
from controllers.common.evacuation import (
    has_evacuation_request,
    is_evacuation_ready,
    replicas_to_evacuate,
)
from controllers.context import ControllerContext
from controllers.deployment.reconcile import DeploymentReconcile
from controllers.deployment.sync import DeploymentSync
from controllers.deployment.util import meta, uid_of
from informers import (
    CONTROLLER_UID_INDEX,
    DeletedFinalStateUnknown,
    ResourceEventHandler,
    meta_key,
)
from kubeutil.selectors import SelectorError, from_label_selector

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
        self.reconciler = DeploymentReconcile(
            syncer=self.syncer,
            d_lister=self.d_informer.lister,
            rs_lister=self.rs_informer.lister,
            pod_lister=self.pod_informer.lister,
            recorder=self.recorder,
            evacuation_enabled=self._evacuation_enabled,
            log=self.log,
        )

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
            try:
                selector = from_label_selector((d.get("spec") or {}).get("selector"))
            except SelectorError:
                continue  # an invalid selector matches nothing; the Deployment's own sync says why
            # A nil or empty selector must match nothing, not everything.
            if not selector.empty and selector.matches(labels):
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

    # -- the reconcile ---------------------------------------------------------------------

    def _evacuation_enabled(self) -> bool:
        return self.ctx.gates.enabled(features.NODE_MAINTENANCE_DEPLOYMENT)

    async def sync(self, key: str) -> None:
        await self.reconciler.sync(key)
