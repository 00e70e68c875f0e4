"""The ReplicaSet controller's wiring: informers, event handlers and expectations bookkeeping.

As `pkg/controller/replicaset/replica_set.go`: handlers never reconcile, they only (a) tell the
expectations what the cache has now seen and (b) queue the key of the ReplicaSet that should
look again:

- a pod added or deleted under a controller reference counts as an observed create/delete for
  that ReplicaSet; an orphan pod queues every ReplicaSet whose selector matches it (for adoption);
- a pod update queues its (old and new) owner; a pod that just became ready is looked at again
  after `minReadySeconds` (+1 s), when it becomes available;
- a pod seen with a `deletionTimestamp` is treated as deleted right away (its replacement need
  not wait for the kubelet's grace period).

The reconcile itself is `sync.ReplicaSetSync`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiclient.resources import PODS, REPLICASETS
from controllers.base import Controller
from controllers.common.controller_ref import ORPHAN_INDEX, ensure_orphan_index, get_controller_of
from controllers.common.expectations import UIDTrackingControllerExpectations
from controllers.common.pods import is_pod_ready, pod_key
from controllers.context import ControllerContext
from controllers.replicaset.sync import BURST_REPLICAS, RS_KIND, ReplicaSetSync
from informers import DeletedFinalStateUnknown, ResourceEventHandler, deleted_object, meta_key
from kubeutil.meta import object_meta
from kubeutil.selectors import SelectorError, from_label_selector

Obj = dict[str, Any]

__all__ = ["ORPHAN_INDEX", "ReplicaSetController"]


class ReplicaSetController(Controller):
    """KCM's `replicaset` controller (alias `replicaset-controller`)."""

    def __init__(
        self, ctx: ControllerContext, *, name: str, workers: int, burst_replicas: int = BURST_REPLICAS
    ) -> None:
        super().__init__(ctx, name=name, workers=workers)
        self.rs_informer = ctx.informers.informer(REPLICASETS)
        self.pod_informer = ctx.informers.informer(PODS)
        ensure_orphan_index(self.pod_informer)
        self.rs_lister = self.rs_informer.lister
        self.pod_lister = self.pod_informer.lister
        self.expectations = UIDTrackingControllerExpectations()
        self.syncer = ReplicaSetSync(
            client=ctx.client,
            rs_lister=self.rs_lister,
            pod_lister=self.pod_lister,
            expectations=self.expectations,
            recorder=self.recorder,
            gates=ctx.gates,
            burst_replicas=burst_replicas,
        )
        self.rs_informer.add_event_handler(
            ResourceEventHandler(on_add=self.add_rs, on_update=self.update_rs, on_delete=self.delete_rs)
        )
        self.pod_informer.add_event_handler(
            ResourceEventHandler(on_add=self.add_pod, on_update=self.update_pod, on_delete=self.delete_pod)
        )

    async def sync(self, key: str) -> None:
        await self.syncer.sync(key)

    # -- ReplicaSet events -------------------------------------------------------------

    def add_rs(self, rs: Obj) -> None:
        self.enqueue(meta_key(rs))

    def update_rs(self, old: Obj, cur: Obj) -> None:
        if object_meta(old).get("uid") != object_meta(cur).get("uid"):
            # Deleted and recreated under the same name between two watch events.
            self.delete_rs(DeletedFinalStateUnknown(meta_key(old), old))
        self.enqueue(meta_key(cur))

    def delete_rs(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        rs = deleted_object(obj)
        if rs is None:
            return
        key = meta_key(rs)
        self.expectations.delete_expectations(key)
        self.enqueue(key)

    # -- Pod events ----------------------------------------------------------------------

    def resolve_controller_ref(self, namespace: str, ref: Mapping[str, Any] | None) -> Obj | None:
        """The ReplicaSet a controller reference points at, if it is ours and still the same object."""
        if ref is None or ref.get("kind") != RS_KIND:
            return None
        rs = self.rs_lister.get(str(ref.get("name")), namespace)
        if rs is None or object_meta(rs).get("uid") != ref.get("uid"):
            return None
        return rs

    def pod_replicasets(self, pod: Mapping[str, Any]) -> list[Obj]:
        """ReplicaSets in the pod's namespace whose (non-empty) selector matches it
        (`GetPodReplicaSets`: none for a pod without labels)."""
        labels = object_meta(pod).get("labels") or {}
        if not labels:
            return []
        namespace = str(object_meta(pod).get("namespace") or "")
        out: list[Obj] = []
        for rs in self.rs_lister.list(namespace):
            if str(object_meta(rs).get("namespace") or "") != namespace:
                continue
            try:
                selector = from_label_selector((rs.get("spec") or {}).get("selector"))
            except SelectorError:
                continue
            if selector.empty or not selector.matches(labels):
                continue
            out.append(rs)
        return out

    def add_pod(self, pod: Obj) -> None:
        meta = object_meta(pod)
        if meta.get("deletionTimestamp"):
            # A restarted controller sees pods already pending deletion: count them as deleted.
            self.delete_pod(pod)
            return
        ref = get_controller_of(pod)
        if ref is not None:
            rs = self.resolve_controller_ref(str(meta.get("namespace")), ref)
            if rs is not None:
                key = meta_key(rs)
                self.expectations.creation_observed(key)
                self.enqueue(key)
            return
        for rs in self.pod_replicasets(pod):
            self.enqueue(meta_key(rs))

    def update_pod(self, old: Obj, cur: Obj) -> None:
        old_meta, cur_meta = object_meta(old), object_meta(cur)
        if old_meta.get("resourceVersion") == cur_meta.get("resourceVersion"):
            return  # a periodic resync: nothing changed
        label_changed = (old_meta.get("labels") or {}) != (cur_meta.get("labels") or {})
        if cur_meta.get("deletionTimestamp"):
            self.delete_pod(cur)
            if label_changed:
                self.delete_pod(old)
            return
        namespace = str(cur_meta.get("namespace"))
        cur_ref, old_ref = get_controller_of(cur), get_controller_of(old)
        ref_changed = cur_ref != old_ref  # any field of the reference, as Go's DeepEqual
        if ref_changed and old_ref is not None:
            old_rs = self.resolve_controller_ref(namespace, old_ref)
            if old_rs is not None:
                self.enqueue(meta_key(old_rs))
        if cur_ref is not None:
            rs = self.resolve_controller_ref(namespace, cur_ref)
            if rs is None:
                return
            key = meta_key(rs)
            self.enqueue(key)
            min_ready = int((rs.get("spec") or {}).get("minReadySeconds") or 0)
            if min_ready > 0 and not is_pod_ready(old) and is_pod_ready(cur):
                self.queue.add_after(key, float(min_ready) + 1.0)
            return
        if label_changed or ref_changed:
            for rs in self.pod_replicasets(cur):
                self.enqueue(meta_key(rs))

    def delete_pod(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = deleted_object(obj)
        if pod is None:
            return
        ref = get_controller_of(pod)
        if ref is None:
            return
        rs = self.resolve_controller_ref(str(object_meta(pod).get("namespace")), ref)
        if rs is None:
            return
        key = meta_key(rs)
        self.expectations.deletion_observed(key, pod_key(pod))
        self.enqueue(key)
