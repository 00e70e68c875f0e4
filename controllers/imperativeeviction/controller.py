"""ImperativeEvictionResponderController: the Eviction and pod caches feeding one queue of Evictions.

Keys are Evictions (`namespace/name`). An Eviction is enqueued when it is added naming this
responder, and on an update only when what the evictor acts on changed: its own target
responder entry (the state the evictionrequest controller assigns), its label (the role can
change), or the number of responder entries (their first initialization). Its own status
writes change none of these, so they do not wake it; its backoff and heartbeats come back
through the queue's delayed requeue. The one update of its own it waits for is the arrival of
its last write in the cache, when a sync came before it (`controllers.common.written`).

A pod that starts terminating, reaches a terminal phase or is deleted wakes the Eviction that
targets it (found by the pod's UID in an index of the Eviction cache), and forgets the pod's
last failed attempt. Upstream does the same and, as it, enqueues nothing for a pod while any
of its Evictions has not been observed by the evictionrequest controller yet (that Eviction's
own update will come).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from apiclient.resources import PODS
from controllers.base import Controller, Result
from controllers.common.pods import is_pod_terminal
from controllers.common.written import WrittenVersions
from controllers.context import ControllerContext
from controllers.imperativeeviction import plan
from controllers.imperativeeviction.state import LastEvictionAttempts
from controllers.imperativeeviction.sync import ImperativeEvictionSync
from evictionapi import names
from informers import DeletedFinalStateUnknown, ResourceEventHandler, meta_key
from kubeutil.timestamps import utcnow

Obj = Mapping[str, Any]

# Evictions by the UID of the pod they target.
EVICTION_BY_POD_UID = "imperativeeviction/evictionByPodUID"


def eviction_by_pod_uid(eviction: Obj) -> list[str]:
    target = plan.target_pod(eviction)
    uid = target.get("uid") if target else None
    return [str(uid)] if uid else []


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


class ImperativeEvictionResponderController(Controller):
    """The default `imperative-eviction.k8s.io/evictor` responder; see the package."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        name: str,
        workers: int,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        super().__init__(ctx, name=name, workers=workers)
        self.evictions = ctx.eviction_api.evictions
        eviction_inf = ctx.informers.informer(self.evictions)
        pod_inf = ctx.informers.informer(PODS)
        if EVICTION_BY_POD_UID not in eviction_inf.store.indexers:
            eviction_inf.add_indexers({EVICTION_BY_POD_UID: eviction_by_pod_uid})
        self.eviction_lister = eviction_inf.lister
        self.pod_lister = pod_inf.lister
        self.attempts = LastEvictionAttempts()
        self.written = WrittenVersions()
        eviction_inf.add_event_handler(ResourceEventHandler(
            on_add=self._eviction_added, on_update=self._eviction_updated, on_delete=self._eviction_deleted,
        ))  # fmt: skip
        pod_inf.add_event_handler(
            ResourceEventHandler(on_update=self._pod_updated, on_delete=self._pod_deleted)
        )
        self.syncer = ImperativeEvictionSync(
            client=ctx.client,
            evictions=self.evictions,
            eviction_lister=self.eviction_lister,
            pod_lister=self.pod_lister,
            attempts=self.attempts,
            written=self.written,
            recorder=self.recorder,
            log=self.log,
            clock=clock,
        )

    # -- Evictions ----------------------------------------------------------------------------

    def _eviction_added(self, eviction: Obj) -> None:
        if plan.should_handle(eviction):
            self.enqueue(meta_key(eviction))

    def _eviction_updated(self, old: Obj, new: Obj) -> None:
        if self.written.superseded(meta_key(new), old):
            self.enqueue(meta_key(new))  # the cache caught up with our write: a sync waits for that
            return
        if not plan.should_handle(new):
            return
        old_responders = (old.get("status") or {}).get("responders") or []
        new_responders = (new.get("status") or {}).get("responders") or []
        if (
            plan.target_responder(old) != plan.target_responder(new)
            or plan.label_changed(old, new, names.IMPERATIVE_EVICTOR)
            or len(old_responders) != len(new_responders)
        ):
            self.enqueue(meta_key(new))

    def _eviction_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        eviction = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.written.forget(meta_key(eviction))
        target = plan.target_pod(eviction)
        if target is not None:
            self.attempts.remove(str(target.get("uid", "")))

    # -- pods ---------------------------------------------------------------------------------

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        deletion_changed = _meta(old).get("deletionTimestamp") != _meta(new).get("deletionTimestamp")
        phase_changed = (old.get("status") or {}).get("phase") != (new.get("status") or {}).get("phase")
        if deletion_changed or (phase_changed and is_pod_terminal(new)):
            self._pod_gone(new)

    def _pod_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        self._pod_gone(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)

    def _pod_gone(self, pod: Obj) -> None:
        uid = str(_meta(pod).get("uid", ""))
        self.attempts.remove(uid)
        for key in self._active_evictions_for(pod):
            self.enqueue(key)

    def _active_evictions_for(self, pod: Obj) -> list[str]:
        """The keys of the Evictions of this pod the evictor acts on (normally one at most)."""
        keys: list[str] = []
        for eviction in self.eviction_lister.by_index(EVICTION_BY_POD_UID, str(_meta(pod).get("uid", ""))):
            if (eviction.get("status") or {}).get("observedGeneration") is None:
                return []  # its own update enqueues it once the evictionrequest controller saw it
            if plan.should_handle(eviction):
                keys.append(meta_key(eviction))
        if len(keys) > 1:
            self.log.error(
                "found more than 1 active eviction matching pod",
                pod=f"{_meta(pod).get('namespace', '')}/{_meta(pod).get('name', '')}", evictions=len(keys),
            )  # fmt: skip
        return keys

    async def sync(self, key: str) -> Result | None:
        return await self.syncer.sync(key)
