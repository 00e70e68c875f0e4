"""EvictionRequestController: three queues fed by the Eviction, EvictionRequest and pod caches.

- the Eviction queue (the controller's own): an Eviction's status (`evictionsync`);
- the EvictionRequest queue: validation, registration, conditions copied back (`requestsync`);
- the refresh queue, one worker: an Eviction's labels and owners (`metasync`).

Handlers follow upstream's: an Eviction's change requeues it (and its refresh when its labels or
owners changed, and its requests when TargetEvicted or Failed changed); a request's change
requeues it, and the target's Evictions when its intent or deletion changed; a pod's deletion,
deletion timestamp or terminal phase requeues the pod's live Evictions (a deletion after the
graceful completion delay, to give the Active responder time to report).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from anyio.abc import TaskGroup

from apiclient.resources import PODS
from controllers.base import Controller, Result
from controllers.context import ControllerContext
from controllers.evictionrequest import metrics
from controllers.evictionrequest.config import EvictionRequestConfig
from controllers.evictionrequest.evictionsync import EvictionSync
from controllers.evictionrequest.metasync import MetadataSync
from controllers.evictionrequest.reader import TARGET_INDEX, Reader, target_index
from controllers.evictionrequest.requestsync import RequestSync
from controllers.evictionrequest.rules import GRACEFUL_COMPLETION_DELAY, has_eviction_completed
from controllers.evictionrequest.target import is_pod_terminal, target_index_value, target_index_value_for_pod
from evictionapi import names, requests
from informers import DeletedFinalStateUnknown, ResourceEventHandler
from kubeutil.timestamps import utcnow
from workqueue import RateLimitingQueue

Obj = Mapping[str, Any]


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: Obj) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _unwrap(obj: Obj | DeletedFinalStateUnknown) -> Obj:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


class EvictionRequestController(Controller):
    """Coordinates the graceful eviction of pods asked for by EvictionRequests; see the package."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        name: str,
        workers: int,
        config: EvictionRequestConfig,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        super().__init__(ctx, name=name, workers=workers)
        self.clock = clock
        api = ctx.eviction_api
        pod_inf = ctx.informers.informer(PODS)
        request_inf = ctx.informers.informer(api.requests)
        eviction_inf = ctx.informers.informer(api.evictions)
        for inf in (request_inf, eviction_inf):
            if TARGET_INDEX not in inf.store.indexers:
                inf.add_indexers({TARGET_INDEX: target_index})
        self.reader = Reader(
            pod_inf.lister, request_inf.lister, eviction_inf.lister, config.implicit_responders
        )
        eviction_inf.add_event_handler(ResourceEventHandler(
            on_add=self._eviction_added, on_update=self._eviction_updated, on_delete=self._eviction_deleted,
        ))  # fmt: skip
        request_inf.add_event_handler(ResourceEventHandler(
            on_add=self._request_added, on_update=self._request_updated, on_delete=self._request_deleted,
        ))  # fmt: skip
        pod_inf.add_event_handler(
            ResourceEventHandler(on_update=self._pod_updated, on_delete=self._pod_deleted)
        )

        self.request_queue: RateLimitingQueue[str] = RateLimitingQueue(name=f"{name}_eviction_request")
        self.refresh_queue: RateLimitingQueue[str] = RateLimitingQueue(
            name=f"{name}_eviction_metadata_refresh"
        )
        self.eviction_syncer = EvictionSync(
            ctx.client, api.evictions, self.reader, self.recorder, clock, self.log
        )
        self.request_syncer = RequestSync(ctx.client, api, self.reader, self.recorder, clock, self.log)
        self.refresh_syncer = MetadataSync(ctx.client, api, self.reader, self.log)
        self.request_worker = self.make_worker(self.request_syncer.sync)
        self.refresh_worker = self.make_worker(self.refresh_syncer.sync)
        self.serve_also(self.request_queue, self.request_worker)
        self.serve_also(self.refresh_queue, self.refresh_worker)

    def make_queue(self) -> RateLimitingQueue[str]:
        return RateLimitingQueue(name=f"{self.name}_eviction")

    def start_workers(self, tg: TaskGroup, workers: int) -> None:
        # As upstream: `workers` for the Eviction and EvictionRequest queues, one for the refresh.
        tg.start_soon(self.worker.run, self.queue, workers)
        tg.start_soon(self.request_worker.run, self.request_queue, workers)
        tg.start_soon(self.refresh_worker.run, self.refresh_queue)

    # -- enqueueing ----------------------------------------------------------------------------

    def _enqueue_requests_of(self, obj: Obj) -> None:
        for request in self.reader.requests_for(
            target_index_value(str(_meta(obj).get("namespace") or ""), obj)
        ):
            self.request_queue.add(_key(request))

    def _evictions_of(self, obj: Obj) -> list[Obj]:
        return self.reader.evictions_for(target_index_value(str(_meta(obj).get("namespace") or ""), obj))

    # -- handlers ------------------------------------------------------------------------------

    def _eviction_added(self, eviction: Obj) -> None:
        self.enqueue(_key(eviction))
        self.refresh_queue.add(_key(eviction))

    def _eviction_updated(self, old: Obj, new: Obj) -> None:
        self.enqueue(_key(new))
        old_meta, new_meta = _meta(old), _meta(new)
        if old_meta.get("ownerReferences") != new_meta.get("ownerReferences") or old_meta.get(
            "labels"
        ) != new_meta.get("labels"):
            self.refresh_queue.add(_key(new))
        for type_ in (names.CONDITION_TARGET_EVICTED, names.CONDITION_FAILED):
            if requests.condition(old, type_) != requests.condition(new, type_):
                self._enqueue_requests_of(new)
                break

    def _eviction_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        eviction = _unwrap(obj)
        # Only a hand-made deletion leaves requests behind: they register a new Eviction.
        self._enqueue_requests_of(eviction)
        metrics.forget_eviction(
            str(_meta(eviction).get("namespace") or ""), str(_meta(eviction).get("name") or "")
        )

    def _request_added(self, request: Obj) -> None:
        self.request_queue.add(_key(request))
        for eviction in self._evictions_of(request):
            self.enqueue(_key(eviction))
            self.refresh_queue.add(_key(eviction))

    def _request_updated(self, old: Obj, new: Obj) -> None:
        self.request_queue.add(_key(new))
        if requests.intent_of(old) != requests.intent_of(new) or (
            not _meta(old).get("deletionTimestamp") and _meta(new).get("deletionTimestamp")
        ):
            for eviction in self._evictions_of(new):
                self.enqueue(_key(eviction))

    def _request_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        request = _unwrap(obj)
        for eviction in self._evictions_of(request):
            self.enqueue(_key(eviction))
            self.refresh_queue.add(_key(eviction))
        metrics.forget_request(
            str(_meta(request).get("namespace") or ""), str(_meta(request).get("name") or "")
        )

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        deletion_changed = _meta(old).get("deletionTimestamp") != _meta(new).get("deletionTimestamp")
        phase_old = (old.get("status") or {}).get("phase")
        became_terminal = phase_old != (new.get("status") or {}).get("phase") and is_pod_terminal(new)
        if deletion_changed and _meta(new).get("deletionTimestamp"):
            now = self.clock()
            self.reader.terminal_times.record(str(_meta(new).get("uid") or ""), now, now)
        if deletion_changed or became_terminal:
            for eviction in self.reader.evictions_for(target_index_value_for_pod(new)):
                self.enqueue(_key(eviction))

    def _pod_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = _unwrap(obj)
        # The grace runs from the moment the pod is gone, which is when a responder that waits for
        # it (as the imperative evictor does) can report; its deletionTimestamp may be long past.
        now = self.clock()
        self.reader.terminal_times.record(str(_meta(pod).get("uid") or ""), now, now)
        for eviction in self.reader.evictions_for(target_index_value_for_pod(pod)):
            if not has_eviction_completed(eviction):
                self.queue.add_after(_key(eviction), GRACEFUL_COMPLETION_DELAY)

    # -- work ----------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        return await self.eviction_syncer.sync(key)
