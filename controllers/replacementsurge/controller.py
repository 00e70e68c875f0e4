"""ReplacementSurgeController: the caches and handlers feeding one queue of surge accounts.

Keys are accounts (`sync.account_key`): the Deployment of a pod's ReplicaSet, or the ReplicaSet
itself when it has no Deployment. Handlers enqueue only what can change an account's plan: a pod
that is asked to evacuate, is a copy, replaced one, or carries our deletion-cost mark (added,
changed or gone); a ReplicaSet whose replicas or evacuation-ready mark changed; a Deployment whose
spec changed. A quiet cluster therefore queues nothing and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from apiclient.resources import DEPLOYMENTS, PODS, REPLICASETS
from controllers.base import Controller, Result
from controllers.common.controller_ref import get_controller_of
from controllers.common.evacuation import has_evacuation_request, is_evacuation_ready
from controllers.context import ControllerContext
from controllers.replacementsurge import copies
from controllers.replacementsurge.state import SurgeState
from controllers.replacementsurge.sync import (
    COPY_OWNER_INDEX,
    ReplacementSurgeSync,
    account_key,
    copy_owner_index,
)
from informers import DeletedFinalStateUnknown, ResourceEventHandler
from kubeutil.timestamps import utcnow

Obj = Mapping[str, Any]

# How long a copy may take to become available before the pod is handed back to the drain.
SURGE_TIMEOUT = 600.0


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _relevant(pod: Obj) -> bool:
    return (
        has_evacuation_request(pod)
        or bool(copies.replaces(pod))
        or bool(copies.replaced(pod)[0])
        or copies.PREVIOUS_COST_ANNOTATION in (_meta(pod).get("annotations") or {})
    )


class ReplacementSurgeController(Controller):
    """Answers evacuation requests by surging through KCM's ReplicaSet controller; see the package."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        name: str,
        workers: int,
        clock: Callable[[], datetime] = utcnow,
        surge_timeout: float = SURGE_TIMEOUT,
    ) -> None:
        super().__init__(ctx, name=name, workers=workers)
        pod_inf = ctx.informers.informer(PODS)
        rs_inf = ctx.informers.informer(REPLICASETS)
        d_inf = ctx.informers.informer(DEPLOYMENTS)
        if COPY_OWNER_INDEX not in pod_inf.store.indexers:
            pod_inf.add_indexers({COPY_OWNER_INDEX: copy_owner_index})
        self.pod_lister = pod_inf.lister
        self.rs_lister = rs_inf.lister
        self.d_lister = d_inf.lister
        pod_inf.add_event_handler(ResourceEventHandler(
            on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted,
        ))  # fmt: skip
        rs_inf.add_event_handler(ResourceEventHandler(on_add=self._rs_event, on_update=self._rs_updated))
        d_inf.add_event_handler(ResourceEventHandler(on_update=self._d_updated))
        self.state = SurgeState()
        self.syncer = ReplacementSurgeSync(
            client=ctx.client,
            pod_lister=self.pod_lister,
            rs_lister=self.rs_lister,
            d_lister=self.d_lister,
            recorder=self.recorder,
            clock=clock,
            surge_timeout=surge_timeout,
            log=self.log,
            state=self.state,
        )

    # -- keys ---------------------------------------------------------------------------------

    def _rs_account(self, rs: Obj) -> str:
        meta = _meta(rs)
        ref = get_controller_of(rs)
        if ref is not None and ref.get("kind") == "Deployment":
            return account_key("Deployment", str(meta.get("namespace", "")), str(ref.get("name", "")))
        if ref is not None:
            return ""  # a ReplicaSet some other kind controls is not ours to surge
        return account_key("ReplicaSet", str(meta.get("namespace", "")), str(meta.get("name", "")))

    def _account_of_pod(self, pod: Obj) -> str:
        namespace = str(_meta(pod).get("namespace", ""))
        ref = get_controller_of(pod)
        if ref is None and copies.replaces(pod):
            ref = next(iter(_meta(pod).get("ownerReferences") or ()), None)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return ""
        rs = self.rs_lister.get(str(ref.get("name", "")), namespace)
        if rs is None or _meta(rs).get("uid") != ref.get("uid"):
            return ""
        return self._rs_account(rs)

    def _enqueue_pod(self, pod: Obj) -> None:
        key = self._account_of_pod(pod)
        if key:
            self.enqueue(key)

    # -- handlers -----------------------------------------------------------------------------

    def _pod_added(self, pod: Obj) -> None:
        if copies.replaces(pod):
            self.state.expectations.creation_observed(self._account_of_pod(pod))
        if _relevant(pod):
            self._enqueue_pod(pod)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if _relevant(new) or _relevant(old):
            self._enqueue_pod(new)

    def _pod_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.state.written.forget(f"{_meta(pod).get('namespace', '')}/{_meta(pod).get('name', '')}")
        if copies.replaces(pod):
            self.state.expectations.deletion_observed(self._account_of_pod(pod))
        if _relevant(pod):
            self._enqueue_pod(pod)

    def _rs_event(self, rs: Obj) -> None:
        key = self._rs_account(rs)
        if key and self.pod_lister.by_index(COPY_OWNER_INDEX, str(_meta(rs).get("uid", ""))):
            self.enqueue(key)

    def _rs_updated(self, old: Obj, new: Obj) -> None:
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        if old_spec.get("replicas") != new_spec.get("replicas") or is_evacuation_ready(
            old
        ) != is_evacuation_ready(new):
            key = self._rs_account(new)
            if key:
                self.enqueue(key)

    def _d_updated(self, old: Obj, new: Obj) -> None:
        if _meta(old).get("generation") != _meta(new).get("generation") or bool(
            _meta(old).get("deletionTimestamp")
        ) != bool(_meta(new).get("deletionTimestamp")):
            meta = _meta(new)
            self.enqueue(account_key("Deployment", str(meta.get("namespace", "")), str(meta.get("name", ""))))

    # -- work --------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        return await self.syncer.sync(key)
