"""EvictionResponderController: the caches and handlers feeding one queue of Evictions.

Keys are Eviction keys, plus `pod:<namespace>/<name>` for a pod whose request may have outlived
its Eviction (`sync.py`). Handlers enqueue only what can change a plan: an Eviction that lists
this responder (added or changed; deleted, its pod is checked for a leftover request); a pod that
some Eviction targets (a pod event is how the surge's answer, the pod's deletion and its
termination are seen), or that carries our request (checked for a leftover one). The surge's
progress between pod events is refreshed by the plan's own wake-ups.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from apiclient.resources import DEPLOYMENTS, PODS, REPLICASETS
from controllers.base import Controller, Result
from controllers.common.pods import pod_key
from controllers.context import ControllerContext
from controllers.evictionresponder.marks import requested_by_us
from controllers.evictionresponder.plan import ANSWER_TIMEOUT
from controllers.evictionresponder.registration import RESPONDER_NAME
from controllers.evictionresponder.state import ResponderState
from controllers.evictionresponder.status import entry_of, target_pod
from controllers.evictionresponder.sync import (
    EVICTION_POD_UID_INDEX,
    POD_KEY_PREFIX,
    UNCONTROLLED_OWNER_INDEX,
    EvictionResponderSync,
    eviction_pod_uid_index,
    uncontrolled_owner_index,
)
from informers import DeletedFinalStateUnknown, ResourceEventHandler, meta_key
from kubeutil.timestamps import utcnow

Obj = Mapping[str, Any]


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _lists_us(eviction: Obj) -> bool:
    return entry_of(eviction, RESPONDER_NAME) is not None


class EvictionResponderController(Controller):
    """Answers Evictions of ReplicaSets' pods with a surge; see the package docstring."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        name: str,
        workers: int,
        clock: Callable[[], datetime] = utcnow,
        answer_timeout: float = ANSWER_TIMEOUT,
    ) -> None:
        super().__init__(ctx, name=name, workers=workers)
        ev_inf = ctx.informers.informer(ctx.eviction_api.evictions)
        pod_inf = ctx.informers.informer(PODS)
        rs_inf = ctx.informers.informer(REPLICASETS)
        d_inf = ctx.informers.informer(DEPLOYMENTS)
        if EVICTION_POD_UID_INDEX not in ev_inf.store.indexers:
            ev_inf.add_indexers({EVICTION_POD_UID_INDEX: eviction_pod_uid_index})
        if UNCONTROLLED_OWNER_INDEX not in pod_inf.store.indexers:
            pod_inf.add_indexers({UNCONTROLLED_OWNER_INDEX: uncontrolled_owner_index})
        self.eviction_lister = ev_inf.lister
        self.pod_lister = pod_inf.lister
        ev_inf.add_event_handler(ResourceEventHandler(
            on_add=self._eviction_event,
            on_update=self._eviction_updated,
            on_delete=self._eviction_deleted,
        ))  # fmt: skip
        pod_inf.add_event_handler(ResourceEventHandler(
            on_add=self._pod_event, on_update=lambda _old, new: self._pod_event(new), on_delete=self._pod_deleted,
        ))  # fmt: skip
        self.state = ResponderState()
        self.syncer = EvictionResponderSync(
            client=ctx.client,
            evictions=ctx.eviction_api.evictions,
            eviction_lister=self.eviction_lister,
            pod_lister=self.pod_lister,
            rs_lister=rs_inf.lister,
            d_lister=d_inf.lister,
            recorder=self.recorder,
            clock=clock,
            answer_timeout=answer_timeout,
            log=self.log,
            state=self.state,
        )

    # -- handlers -----------------------------------------------------------------------------

    def _eviction_event(self, eviction: Obj) -> None:
        if _lists_us(eviction):
            self.enqueue(meta_key(eviction))

    def _eviction_updated(self, old: Obj, new: Obj) -> None:
        if _lists_us(new) and (old.get("status") != new.get("status") or not _lists_us(old)):
            self.enqueue(meta_key(new))

    def _eviction_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        eviction = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.state.forget(meta_key(eviction))
        name, _uid = target_pod(eviction)
        if name and _lists_us(eviction):
            self.enqueue(f"{POD_KEY_PREFIX}{_meta(eviction).get('namespace', '')}/{name}")

    def _pod_event(self, pod: Obj) -> None:
        uid = str(_meta(pod).get("uid") or "")
        evictions = self.eviction_lister.by_index(EVICTION_POD_UID_INDEX, uid) if uid else []
        for eviction in evictions:
            if _lists_us(eviction):
                self.enqueue(meta_key(eviction))
        if not evictions and requested_by_us(pod):
            self.enqueue(f"{POD_KEY_PREFIX}{pod_key(pod)}")

    def _pod_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.state.pods.forget(pod_key(pod))
        uid = str(_meta(pod).get("uid") or "")
        for eviction in self.eviction_lister.by_index(EVICTION_POD_UID_INDEX, uid) if uid else ():
            if _lists_us(eviction):
                self.enqueue(meta_key(eviction))

    # -- work --------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        return await self.syncer.sync(key)
