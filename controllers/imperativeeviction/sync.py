"""The imperative evictor's reconcile: one Eviction, its pod evicted through `pods/<name>/eviction`.

Upstream's `sync` and `evict`, step for step. The Eviction must name this responder, have been
observed by the evictionrequest controller (`status.observedGeneration`), give this responder
the Active state and an entry in `status.responders` without a completionTime; anything else
is not (or no longer) its turn, and it does nothing: a Canceled or Interrupted state stops it
between two tries. The pod is read from the cache: gone, replaced (another UID) or terminal
means done (completionTime); terminating means wait (a heartbeat every 3 min with the time the
deletion is due); else one `/eviction` call, with the pod's UID as a precondition, unless the
last failure's backoff has not run out.

A sync woken before the cache has seen its own last write (the pod's deletion, say, arriving
right after the report of its eviction) waits for it instead of reading the message it replaced.

Backoff and heartbeats are the queue's delayed requeue (`Result.requeue_after`), never a sleep,
and never more than 3 min apart: a longer backoff is waited out across heartbeats. A failed
call is reported in the responder's message, not raised, so the rate limiter keeps its backoff
for real errors (a failed status write).

The status write is a JSON patch of this responder's entry alone (`test` its name at its index,
then `replace` it), so it cannot overwrite the evictionrequest controller's or other responders'
entries and needs no resourceVersion; see the package docstring for why not server-side apply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apiclient import ApiError, KubeClient
from apiclient.resources import Resource
from controllers.base import Result
from controllers.common.written import WrittenVersions
from controllers.context import EventRecorder
from controllers.imperativeeviction import metrics, plan
from controllers.imperativeeviction.state import LastEvictionAttempts
from controllers.worker import is_expected_failure
from evictionapi import names
from informers import Lister

Obj = Mapping[str, Any]

# Event reasons on the Eviction, one per action.
REASON_EVICTED = "PodEvicted"
REASON_EVICTION_FAILED = "PodEvictionFailed"
REASON_COMPLETED = "EvictionCompleted"


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


@dataclass(kw_only=True, eq=False)
class ImperativeEvictionSync:
    """One Eviction per key (`namespace/name`)."""

    client: KubeClient
    evictions: Resource
    eviction_lister: Lister
    pod_lister: Lister
    attempts: LastEvictionAttempts
    written: WrittenVersions
    recorder: EventRecorder
    log: Any
    clock: Callable[[], datetime]

    async def sync(self, key: str) -> Result | None:
        eviction = self.eviction_lister.get_by_key(key)
        if eviction is None or not plan.should_handle(eviction):
            return None
        if self.written.superseded(key, eviction):
            return None  # our last write is on its way to the cache, and its arrival wakes the key
        if (eviction.get("status") or {}).get("observedGeneration") is None:
            return None  # the evictionrequest controller has not set it up yet
        target = plan.target_responder(eviction)
        if target is None or target.get("state") != names.STATE_ACTIVE:
            return None
        last = plan.responder_status(eviction)
        if last is None or last.get("completionTime"):
            return None
        pod_ref = plan.target_pod(eviction) or {}
        namespace = str(_meta(eviction).get("namespace", ""))
        pod = self.pod_lister.get(str(pod_ref.get("name", "")), namespace)
        last_message = str(last.get("message") or "")

        found = plan.assess(pod_ref, pod, last_message)
        message, requeue_after = found.message, found.requeue_after
        if found.evict and pod is not None:
            message, requeue_after = await self._evict(key, eviction, pod, last_message)

        now = self.clock()
        if requeue_after is not None and requeue_after > plan.HEARTBEAT_INTERVAL:
            requeue_after = plan.HEARTBEAT_INTERVAL
        entry = plan.status_update(
            last,
            message=message,
            completed=found.completed,
            expected_completion=found.expected_completion,
            now=now,
        )
        if entry is not None:
            await self._write(key, eviction, entry)
        return Result(requeue_after=requeue_after) if requeue_after else None

    async def _evict(self, key: str, eviction: Obj, pod: Obj, last_message: str) -> tuple[str, float | None]:
        """One `/eviction` call unless still backing off: (the message to report, when to look again)."""
        meta = _meta(pod)
        uid, name, namespace = (
            str(meta.get("uid", "")),
            str(meta.get("name", "")),
            str(meta.get("namespace", "")),
        )
        last_attempt = self.attempts.get(uid)
        if last_attempt is not None:
            wait = plan.wait_before_retry(last_message, last_attempt, self.clock())
            if wait > 0:
                return last_message, wait
        try:
            await self.client.evict(namespace, name, delete_options={"preconditions": {"uid": uid}})
        except Exception as exc:
            if not is_expected_failure(exc):
                raise
            self.attempts.set(uid, self.clock())
            message, wait = plan.after_failure(name, last_message, exc)
            reason = exc.reason if isinstance(exc, ApiError) else "Unknown"
            metrics.FAILED_EVICTIONS.labels(reason).inc()
            metrics.ACTIONS.labels("evict-failed").inc()
            self.log.info(
                "pod eviction failed", key=key, pod=f"{namespace}/{name}", reason=reason, retry_in=wait,
                attempts=plan.recorded_attempts(message), error=plan.error_message(exc),
            )  # fmt: skip
            self.recorder.event(eviction, "Warning", REASON_EVICTION_FAILED, message)
            return message, wait
        self.attempts.remove(uid)
        message = plan.evicted_message(name)
        metrics.ACTIONS.labels("evict").inc()
        self.log.info("pod evicted", key=key, pod=f"{namespace}/{name}")
        self.recorder.event(eviction, "Normal", REASON_EVICTED, message)
        return message, None

    async def _write(self, key: str, eviction: Obj, entry: dict[str, Any]) -> None:
        """This responder's entry replaced, the list's other entries untouched."""
        index = plan.responder_index(eviction)
        meta = _meta(eviction)
        path = f"/status/responders/{index}"
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": f"{path}/name", "value": names.IMPERATIVE_EVICTOR},
            {"op": "replace", "path": path, "value": entry},
        ]
        written = await self.client.patch(
            self.evictions, str(meta.get("name", "")), ops,
            namespace=str(meta.get("namespace", "")), subresource="status", patch_type="json",
        )  # fmt: skip
        self.written.wrote(key, eviction, written)
        completed = "completionTime" in entry
        metrics.ACTIONS.labels("complete" if completed else "status").inc()
        self.log.info(
            "responder status written", key=key, message=entry.get("message"), completed=completed,
            heartbeat=entry.get("heartbeatTime"), expected_completion=entry.get("expectedCompletionTime"),
        )  # fmt: skip
        if completed:
            self.recorder.event(eviction, "Normal", REASON_COMPLETED, str(entry.get("message", "")))
