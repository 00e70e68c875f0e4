"""The eviction-surge reconcile: write what the webhook's verdicts asked for.

A denied eviction of a pod with no evacuation under way gets `EvacuationRequest=True` with reason
`EvictionSurge` (the ReplicaSet and Deployment controllers answer it like a NodeMaintenance's);
a request no eviction has retried within the retry window is withdrawn (the drainer gave up or
went away, and the surge pods are then scaled back); a request older than the surge timeout is
reported once, with a Warning event on the pod.

In the EvictionRequest mode (`eviction_api` set) the same steps create, re-ask and withdraw the
webhook's EvictionRequest for the pod instead (`evictionrequests.py`); the surge timeout is then
counted from the `EvacuationRequest` the surge responder writes on the pod.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from structlog.typing import FilteringBoundLogger

from apiclient import KubeClient
from controllers.base import Result
from controllers.common.pods import is_pod_active
from controllers.context import EventRecorder
from controllers.evictionsurge import evictionrequests, metrics
from controllers.evictionsurge.decision import evacuation_requested_at, requested_by_us
from controllers.evictionsurge.requests import request_evacuation, withdraw_evacuation
from controllers.evictionsurge.state import SurgeState
from evictionapi import names
from evictionapi.served import EvictionAPI
from informers import Lister

Obj = Mapping[str, Any]

EVENT_REQUESTED = "EvictionSurgeRequested"
EVENT_WITHDRAWN = "EvictionSurgeWithdrawn"
EVENT_TIMED_OUT = "EvictionSurgeTimedOut"


@dataclass(kw_only=True, eq=False)
class EvictionSurgeSync:
    """One pod's evacuation request, made, followed and withdrawn; keys are pod keys."""

    client: KubeClient
    pod_lister: Lister
    state: SurgeState
    recorder: EventRecorder
    clock: Callable[[], datetime]
    surge_timeout: float
    retry_window: float
    log: FilteringBoundLogger
    # The EvictionRequest mode: the API's resources and the cache of its requests.
    eviction_api: EvictionAPI | None = None
    request_lister: Lister | None = None

    async def sync(self, key: str) -> Result | None:
        pod = self.pod_lister.get_by_key(key)
        if pod is None or not is_pod_active(pod):
            self.state.last_eviction.pop(key, None)
            self.state.wanted.discard(key)
            self.state.asked.pop(key, None)
            return None
        now = self.clock()
        if self.eviction_api is not None and self.request_lister is not None:
            return await self._sync_request(key, pod, self.eviction_api, self.request_lister, now)
        last = self.state.last_eviction.get(key)
        if requested_by_us(pod):
            self.state.wanted.discard(key)
            return await self._follow(key, pod, last, now)
        if key not in self.state.wanted:
            return None
        self.state.wanted.discard(key)
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

    async def _sync_request(
        self, key: str, pod: Obj, api: EvictionAPI, lister: Lister, now: datetime
    ) -> Result | None:
        """The EvictionRequest mode: ask, follow, withdraw (`evictionrequests.plan`)."""
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        name = evictionrequests.name_for(pod)
        request = lister.get(name, namespace)
        last = self.state.last_eviction.get(key)
        wanted = key in self.state.wanted
        self.state.wanted.discard(key)
        step = evictionrequests.plan(
            request,
            wanted=wanted,
            others_asking=evacuation_requested_at(pod, now) is not None,
            last=last,
            asked=self.state.asked.get(key),
            started=self.state.started,
            now=now,
            retry_window=self.retry_window,
        )
        S = evictionrequests.Step
        if step.step is S.NONE:
            return None
        if step.step is S.WITHDRAW:
            assert request is not None
            await evictionrequests.set_intent(self.client, api, request, names.INTENT_WITHDRAWN)
            self.state.last_eviction.pop(key, None)
            self.state.asked.pop(key, None)
            self.log.info("withdrew eviction request", key=key, request=name, retry_window=self.retry_window)
            self.recorder.event(
                pod,
                "Normal",
                EVENT_WITHDRAWN,
                f"No eviction retried within {self.retry_window:g}s: EvictionRequest {name} withdrawn",
            )
            metrics.REQUESTS.labels(action="withdraw").inc()
            return None
        if step.step is S.FOLLOW:
            assert step.wait is not None
            waits = [step.wait]
            requested_at = evacuation_requested_at(pod, now)
            if requested_at is not None:
                waits.extend(self._report_timeout(key, pod, requested_at, now))
            return Result(requeue_after=max(0.05, min(waits)))
        if step.step is S.CREATE:
            await evictionrequests.create_request(self.client, api, pod)
        else:
            assert request is not None
            await evictionrequests.set_intent(self.client, api, request, names.INTENT_EVICTION)
        self.state.asked[key] = now
        self.log.info(
            "requested eviction",
            key=key,
            request=name,
            action=step.step.value,
            reason="eviction held back until a replacement is available",
        )
        self.recorder.event(
            pod,
            "Normal",
            EVENT_REQUESTED,
            f"Eviction held back: EvictionRequest {name} asks the pod's responders to start a replacement "
            f"on another node first",
        )
        metrics.REQUESTS.labels(action="request").inc()
        return Result(requeue_after=self.retry_window)

    async def _follow(self, key: str, pod: Obj, last: datetime | None, now: datetime) -> Result | None:
        """Withdraw our request once evictions stop; report a surge that ran out of time once."""
        requested_at = evacuation_requested_at(pod, now) or now
        seen = max(last or self.state.started, requested_at)
        idle = (now - seen).total_seconds()
        if idle >= self.retry_window:
            await withdraw_evacuation(self.client, pod)
            self.state.last_eviction.pop(key, None)
            self.log.info("withdrew evacuation request", key=key, idle_seconds=round(idle, 1))
            self.recorder.event(
                pod,
                "Normal",
                EVENT_WITHDRAWN,
                f"No eviction retried within {self.retry_window:g}s: evacuation request withdrawn",
            )
            metrics.REQUESTS.labels(action="withdraw").inc()
            return None
        waits = [self.retry_window - idle, *self._report_timeout(key, pod, requested_at, now)]
        return Result(requeue_after=max(0.05, min(waits)))

    def _report_timeout(self, key: str, pod: Obj, requested_at: datetime, now: datetime) -> list[float]:
        """Report a surge past the timeout once; else the seconds until it will be."""
        timed_out_at = requested_at + timedelta(seconds=self.surge_timeout)
        marker = f"{(pod.get('metadata') or {}).get('uid', '')}@{requested_at.isoformat()}"
        if now >= timed_out_at:
            if self.state.reported.get(key) != marker:
                self.state.reported[key] = marker
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
            return []
        return [(timed_out_at - now).total_seconds()]
