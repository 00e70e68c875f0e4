"""EvictionSurgeController: the admission side (`review`) and the writes it causes (`sync`).

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

Keys are pod keys (`namespace/name`). Pod events enqueue only pods that carry our request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar

import structlog

from apiclient.resources import DEPLOYMENTS, PODS, REPLICASETS
from controllers.base import Controller, Result
from controllers.common.controller_ref import get_controller_of
from controllers.common.pods import is_pod_active, pod_key
from controllers.context import ControllerContext
from controllers.evictionsurge import admission, metrics
from controllers.evictionsurge.config import EvictionSurgeConfig
from controllers.evictionsurge.decision import (
    Decision,
    Facts,
    Why,
    decide,
    evacuation_requested_at,
    requested_by_us,
)
from controllers.evictionsurge.requests import request_evacuation, withdraw_evacuation
from informers import CONTROLLER_UID_INDEX, DeletedFinalStateUnknown, ResourceEventHandler
from kubeutil.timestamps import utcnow

Obj = Mapping[str, Any]
log = structlog.get_logger()

WEBHOOK_PATH = "/validate-pods-eviction"

EVENT_REQUESTED = "EvictionSurgeRequested"
EVENT_WITHDRAWN = "EvictionSurgeWithdrawn"
EVENT_TIMED_OUT = "EvictionSurgeTimedOut"


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
        self.retry_window = config.retry_window
        pod_inf = ctx.informers.informer(PODS)
        rs_inf = ctx.informers.informer(REPLICASETS)
        d_inf = ctx.informers.informer(DEPLOYMENTS)
        self._informers = (pod_inf, rs_inf, d_inf)
        self.pod_lister = pod_inf.lister
        self.rs_lister = rs_inf.lister
        self.d_lister = d_inf.lister
        pod_inf.add_event_handler(ResourceEventHandler(
            on_add=self._pod_event, on_update=lambda _old, new: self._pod_event(new), on_delete=self._pod_gone,
        ))  # fmt: skip
        self.started = clock()
        # Per pod key: when an eviction last reached us, and requests to write.
        self.last_eviction: dict[str, datetime] = {}
        self.wanted: set[str] = set()
        self.reported: dict[str, str] = {}  # pod key -> the timed-out request already told (uid@time)

    # -- handlers -----------------------------------------------------------------------------

    def _pod_event(self, pod: Obj) -> None:
        if requested_by_us(pod):
            self.enqueue(pod_key(pod))

    def _pod_gone(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        key = pod_key(pod)
        self.last_eviction.pop(key, None)
        self.wanted.discard(key)
        self.reported.pop(key, None)

    # -- admission ----------------------------------------------------------------------------

    def synced(self) -> bool:
        return all(inf.has_synced for inf in self._informers)

    def facts(self, namespace: str, name: str, *, dry_run: bool) -> Facts:
        """What the caches say about pod `namespace/name` (never an API call)."""
        pod = self.pod_lister.get(name, namespace)
        if pod is None or dry_run:
            return Facts(pod, None, None, dry_run=dry_run)
        rs = self._owned_by(pod, "ReplicaSet", self.rs_lister.get)
        d = self._owned_by(rs, "Deployment", self.d_lister.get) if rs is not None else None
        if rs is None or d is None:
            return Facts(pod, rs, d)
        pods: list[Obj] = []
        for owned in self.rs_lister.by_index(CONTROLLER_UID_INDEX, str(d["metadata"].get("uid"))):
            pods.extend(self.pod_lister.by_index(CONTROLLER_UID_INDEX, str(owned["metadata"].get("uid"))))
        return Facts(pod, rs, d, pods)

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
        decision = decide(facts, now=now, surge_timeout=self.surge_timeout)
        self._record(request, facts, decision, now)
        return admission.response(request.uid, decision)

    def _record(
        self, request: admission.EvictionRequest, facts: Facts, decision: Decision, now: datetime
    ) -> None:
        metrics.DECISIONS.labels(
            decision="deny" if decision.holds_back else "allow", why=decision.why.value
        ).inc()
        key = f"{request.namespace}/{request.name}"
        if (
            decision.why is not Why.DRY_RUN
            and facts.pod is not None
            and (decision.holds_back or requested_by_us(facts.pod))
        ):
            self.last_eviction[key] = now
        if decision.request:
            self.wanted.add(key)
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

    # -- writes -------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        namespace, _, name = key.partition("/")
        pod = self.pod_lister.get(name, namespace)
        if pod is None or not is_pod_active(pod):
            self.last_eviction.pop(key, None)
            self.wanted.discard(key)
            return None
        now = self.clock()
        last = self.last_eviction.get(key)
        if requested_by_us(pod):
            self.wanted.discard(key)
            return await self._follow(key, pod, last, now)
        if key not in self.wanted:
            return None
        self.wanted.discard(key)
        if evacuation_requested_at(pod, now) is not None or last is None:
            return None  # someone else's evacuation is under way
        if (now - last).total_seconds() >= self.retry_window:
            return None  # the drainer has gone away since
        await request_evacuation(
            self.client, pod, message="an eviction is waiting for a replacement", now=now
        )
        self.log.info(
            "requested evacuation", key=key, reason="eviction held back until a replacement is available"
        )
        self.recorder.event(
            pod,
            "Normal",
            EVENT_REQUESTED,
            "Eviction held back: asked the owner to start a replacement on another node first",
        )
        metrics.REQUESTS.labels(action="request").inc()
        return Result(requeue_after=self.retry_window)

    async def _follow(self, key: str, pod: Obj, last: datetime | None, now: datetime) -> Result | None:
        """Withdraw our request once evictions stop; report a surge that ran out of time once."""
        requested_at = evacuation_requested_at(pod, now) or now
        seen = max(last or self.started, requested_at)
        idle = (now - seen).total_seconds()
        if idle >= self.retry_window:
            await withdraw_evacuation(self.client, pod)
            self.last_eviction.pop(key, None)
            self.log.info("withdrew evacuation request", key=key, idle_seconds=round(idle, 1))
            self.recorder.event(
                pod,
                "Normal",
                EVENT_WITHDRAWN,
                f"No eviction retried within {self.retry_window:g}s: evacuation request withdrawn",
            )
            metrics.REQUESTS.labels(action="withdraw").inc()
            return None
        waits = [self.retry_window - idle]
        timed_out_at = requested_at + timedelta(seconds=self.surge_timeout)
        marker = f"{(pod.get('metadata') or {}).get('uid', '')}@{requested_at.isoformat()}"
        if now >= timed_out_at:
            if self.reported.get(key) != marker:
                self.reported[key] = marker
                self.log.warning(
                    "evacuation did not finish in time, eviction no longer held back",
                    key=key,
                    timeout_seconds=self.surge_timeout,
                )
                self.recorder.event(
                    pod,
                    "Warning",
                    EVENT_TIMED_OUT,
                    f"No replacement became available within {self.surge_timeout:g}s: evictions are no longer "
                    f"held back, the PodDisruptionBudget decides",
                )
                metrics.REQUESTS.labels(action="timed-out").inc()
        else:
            waits.append((timed_out_at - now).total_seconds())
        return Result(requeue_after=max(0.05, min(waits)))
