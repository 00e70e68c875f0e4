"""EvictionSurgeController: the admission side (`review`), the caches it reads and the queue it
feeds; the writes it causes are `sync.EvictionSurgeSync`'s.

`review` answers an AdmissionReview from the informer caches alone, synchronously: no API call
and no await on the request path, so a slow API server can never slow an eviction down (and the
API server's own timeout plus `failurePolicy: Ignore` cover aiokcm being slow or gone). What the
verdict asks for is written by the workers:
- a denied eviction of a pod with no evacuation under way enqueues the pod, and `sync` sets
  `EvacuationRequest=True` with reason `EvictionSurge` (the ReplicaSet and Deployment
  controllers answer it like a NodeMaintenance's);
- every eviction of a pod carrying our request is remembered (in memory, per pod); a request no
  eviction has retried within `--eviction-surge-retry-window` is withdrawn (the drainer gave up
  or went away, and the surge pods are then scaled back). After a restart the window starts anew;
- a request older than `--eviction-surge-timeout` is no longer held against evictions
  (`decision.decide`), and `sync` records one Warning event on the pod saying so.

In the EvictionRequest mode (`--eviction-surge-requests=EvictionRequest`) the request is the
webhook's EvictionRequest for the pod instead of the condition (`evictionrequests.py`), made and
withdrawn at the same points; the caches then include the API's requests (ours enqueue their
pod) and Evictions (to let the imperative evictor's own eviction through, `decision` rule 5).

Keys are pod keys (`namespace/name`). Pod events enqueue only pods that carry our request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, ClassVar

import structlog

from apiclient.resources import DEPLOYMENTS, PODS, REPLICASETS
from controllers.base import Controller, Result
from controllers.common.controller_ref import get_controller_of
from controllers.common.pods import pod_key
from controllers.context import ControllerContext
from controllers.evictionsurge import admission, evictionrequests, metrics
from controllers.evictionsurge.config import EvictionSurgeConfig
from controllers.evictionsurge.decision import (
    Decision,
    Facts,
    Why,
    decide,
    requested_by_us,
)
from controllers.evictionsurge.state import SurgeState
from controllers.evictionsurge.sync import EvictionSurgeSync
from evictionapi import requests
from informers import CONTROLLER_UID_INDEX, DeletedFinalStateUnknown, ResourceEventHandler, SharedInformer
from kubeutil.timestamps import utcnow

Obj = Mapping[str, Any]
log = structlog.get_logger()

WEBHOOK_PATH = "/validate-pods-eviction"
# Evictions by their target pod's key, to find a pod's Eviction from the cache.
EVICTION_TARGET_INDEX = "evictionsurge/target"


def _eviction_target(eviction: Obj) -> list[str]:
    key = requests.target_key_of(eviction)
    return [key] if key else []


class EvictionSurgeController(Controller):
    """Holds evictions back until a replacement has surged; see the module docstring."""

    webhook_path: ClassVar[str] = WEBHOOK_PATH

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        name: str,
        workers: int,
        config: EvictionSurgeConfig,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        super().__init__(ctx, name=name, workers=workers)
        self.clock = clock
        self.surge_timeout = config.surge_timeout
        self.public_surge = config.public_surge
        pod_inf = ctx.informers.informer(PODS)
        rs_inf = ctx.informers.informer(REPLICASETS)
        d_inf = ctx.informers.informer(DEPLOYMENTS)
        self._informers: tuple[SharedInformer, ...] = (pod_inf, rs_inf, d_inf)
        self.pod_lister = pod_inf.lister
        self.rs_lister = rs_inf.lister
        self.d_lister = d_inf.lister
        pod_inf.add_event_handler(ResourceEventHandler(
            on_add=self._pod_event, on_update=lambda _old, new: self._pod_event(new), on_delete=self._pod_gone,
        ))  # fmt: skip
        self.state = SurgeState(started=clock())
        # The EvictionRequest mode (the manager allows it only with the EvictionRequestAPI gate).
        self.eviction_api = ctx.eviction_api if config.eviction_requests else None
        self.request_lister = None
        self.eviction_index = None
        if self.eviction_api is not None:
            request_inf = ctx.informers.informer(self.eviction_api.requests)
            eviction_inf = ctx.informers.informer(self.eviction_api.evictions)
            if EVICTION_TARGET_INDEX not in eviction_inf.store.indexers:
                eviction_inf.add_indexers({EVICTION_TARGET_INDEX: _eviction_target})
            self._informers = (*self._informers, request_inf, eviction_inf)
            self.request_lister = request_inf.lister
            self.eviction_index = eviction_inf.lister
            request_inf.add_event_handler(ResourceEventHandler(
                on_add=self._request_event,
                on_update=lambda _old, new: self._request_event(new),
                on_delete=self._request_event,
            ))  # fmt: skip
        self.syncer = EvictionSurgeSync(
            client=ctx.client,
            pod_lister=self.pod_lister,
            state=self.state,
            recorder=self.recorder,
            clock=clock,
            surge_timeout=config.surge_timeout,
            retry_window=config.retry_window,
            log=self.log,
            eviction_api=self.eviction_api,
            request_lister=self.request_lister,
        )

    # -- handlers -----------------------------------------------------------------------------

    def _pod_event(self, pod: Obj) -> None:
        if self.ours(pod):
            self.enqueue(pod_key(pod))

    def _request_event(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        request = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if evictionrequests.is_ours(request) and (key := requests.target_key_of(request)):
            self.enqueue(key)

    def our_request(self, pod: Obj) -> Obj | None:
        """The webhook's EvictionRequest for `pod` from the cache (the EvictionRequest mode only)."""
        if self.request_lister is None:
            return None
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        found: Obj | None = self.request_lister.get(evictionrequests.name_for(pod), namespace)
        return found if evictionrequests.is_ours(found) else None

    def ours(self, pod: Obj) -> bool:
        """The webhook's request for `pod` is in place: its condition, or its EvictionRequest asking."""
        if self.eviction_api is not None:
            return evictionrequests.asking(self.our_request(pod))
        return requested_by_us(pod)

    def _eviction_of(self, pod: Obj) -> Obj | None:
        """The pod's live Eviction (the one without a settled outcome, newest first), from the cache."""
        if self.eviction_index is None:
            return None
        uid = (pod.get("metadata") or {}).get("uid")
        found = [
            e for e in self.eviction_index.by_index(EVICTION_TARGET_INDEX, pod_key(pod))
            if (requests.target_pod_of(e) or ("", ""))[1] == uid
        ]  # fmt: skip
        live = [e for e in found if not requests.failed(e) and not requests.target_evicted(e)] or found
        live.sort(key=lambda e: str((e.get("metadata") or {}).get("creationTimestamp") or ""), reverse=True)
        return live[0] if live else None

    def _pod_gone(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.state.forget(pod_key(pod))

    # -- admission ----------------------------------------------------------------------------

    def synced(self) -> bool:
        return all(inf.has_synced for inf in self._informers)

    def facts(self, namespace: str, name: str, *, dry_run: bool) -> Facts:
        """What the caches say about pod `namespace/name` (never an API call)."""
        pod = self.pod_lister.get(name, namespace)
        if pod is None or dry_run:
            return Facts(pod, None, None, dry_run=dry_run)
        extra: dict[str, Any] = {}
        if self.eviction_api is not None:
            extra = {
                "request_name": evictionrequests.name_for(pod),
                "request": self.our_request(pod),
                "eviction": self._eviction_of(pod),
            }
        rs = self._owned_by(pod, "ReplicaSet", self.rs_lister.get)
        d = self._owned_by(rs, "Deployment", self.d_lister.get) if rs is not None else None
        if rs is None:
            return Facts(pod, rs, d, **extra)
        if d is None:
            if get_controller_of(rs) is not None:
                return Facts(pod, rs, d, **extra)
            return Facts(
                pod,
                rs,
                None,
                self.pod_lister.by_index(CONTROLLER_UID_INDEX, str(rs["metadata"].get("uid"))),
                **extra,
            )
        pods: list[Obj] = []
        for owned in self.rs_lister.by_index(CONTROLLER_UID_INDEX, str(d["metadata"].get("uid"))):
            pods.extend(self.pod_lister.by_index(CONTROLLER_UID_INDEX, str(owned["metadata"].get("uid"))))
        return Facts(pod, rs, d, pods, **extra)

    @staticmethod
    def _owned_by(obj: Obj, kind: str, get: Callable[[str, str], Obj | None]) -> Obj | None:
        ref = get_controller_of(obj)
        if ref is None or ref.get("kind") != kind:
            return None
        owner = get(str(ref.get("name", "")), str((obj.get("metadata") or {}).get("namespace", "")))
        if owner is None or (owner.get("metadata") or {}).get("uid") != ref.get("uid"):
            return None
        return owner

    def review(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one AdmissionReview from the caches; what to write is queued, never done here."""
        request = admission.parse_review(body)
        if not request.applies or not self.synced():
            return admission.allowed(request.uid)
        now = self.clock()
        facts = self.facts(request.namespace, request.name, dry_run=request.dry_run)
        decision = decide(facts, now=now, surge_timeout=self.surge_timeout, public_surge=self.public_surge)
        self._record(request, facts, decision, now)
        return admission.response(request.uid, decision)

    def _record(
        self, request: admission.EvictionRequest, facts: Facts, decision: Decision, now: datetime
    ) -> None:
        metrics.DECISIONS.labels(
            decision="deny" if decision.holds_back else "allow", why=decision.why.value
        ).inc()
        key = f"{request.namespace}/{request.name}"
        # An eviction let through because the responders are past the surge is most likely the
        # imperative evictor's own: it must not keep our request (and so itself) going.
        if (
            decision.why not in (Why.DRY_RUN, Why.RESPONDERS_DONE)
            and facts.pod is not None
            and (decision.holds_back or self.ours(facts.pod))
        ):
            self.state.last_eviction[key] = now
        if decision.request:
            self.state.wanted.add(key)
        if decision.request or decision.why is Why.SURGE_TIMED_OUT:
            self.enqueue(key)
        if decision.why not in (Why.DRY_RUN, Why.UNKNOWN_POD, Why.NOT_RUNNING, Why.NO_ANSWER):
            log.info(
                "eviction reviewed",
                controller=self.name,
                key=key,
                allowed=decision.allowed,
                why=decision.why.value,
            )

    # -- work --------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        return await self.syncer.sync(key)
