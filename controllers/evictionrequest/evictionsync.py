"""The Eviction loop: validate the Eviction, follow its requesters, advance its responders.

One key is one Eviction. Its status is computed by `status.compute_eviction_status` and written
with a merge patch carrying the cached resourceVersion, so a responder's heartbeat written in the
meantime turns into a conflict and a retry instead of being overwritten. Every state transition
of a responder, and the final condition, is logged, counted and posted as an Event on the Eviction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from structlog.typing import FilteringBoundLogger

from apiclient import ApiError, KubeClient
from apiclient.resources import Resource
from controllers.base import Result
from controllers.context import EventRecorder
from controllers.evictionrequest import metrics
from controllers.evictionrequest.reader import Reader
from controllers.evictionrequest.rules import find_relevant_eviction, has_eviction_completed
from controllers.evictionrequest.status import (
    compute_eviction_status,
    invalid_eviction_status,
    validate_eviction,
)
from controllers.evictionrequest.target import target_index_value
from evictionapi import names, requests

Obj = Mapping[str, Any]

EVENT_FOR_STATE = {
    names.STATE_ACTIVE: "ResponderActivated",
    names.STATE_COMPLETED: "ResponderCompleted",
    names.STATE_INTERRUPTED: "ResponderInterrupted",
    names.STATE_CANCELED: "ResponderCanceled",
}
EVENT_INVALID = "EvictionInvalid"


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


@dataclass
class EvictionSync:
    client: KubeClient
    evictions: Resource
    reader: Reader
    recorder: EventRecorder
    clock: Callable[[], datetime]
    log: FilteringBoundLogger

    async def sync(self, key: str) -> Result | None:
        eviction = self.reader.evictions.get_by_key(key)
        if eviction is None or has_eviction_completed(eviction):
            return None  # a final Eviction is never reopened
        namespace = str(_meta(eviction).get("namespace") or "")
        target = self.reader.target_of(eviction)
        now = self.clock()
        index = target_index_value(namespace, eviction)
        relevant, _ = find_relevant_eviction(self.reader.evictions_for(index))
        is_duplicate = (
            relevant is not None
            and not has_eviction_completed(relevant)
            and _meta(relevant).get("uid") != _meta(eviction).get("uid")
        )
        generation = _meta(eviction).get("generation")
        observed = (eviction.get("status") or {}).get("observedGeneration")
        generation_changed = generation is not None and observed != generation
        problem = None if requests.target_responders_of(eviction) else self.reader.responder_problem(target)
        failed, evicted, changed = validate_eviction(now, eviction, target, is_duplicate, problem)
        if failed is not None and evicted is not None:
            if changed or generation_changed:
                await self._write(eviction, invalid_eviction_status(eviction, failed, evicted))
                metrics.ACTIONS.labels("invalidate").inc()
                self.log.info("eviction invalid", key=key, message=failed["message"])
                self.recorder.event(eviction, "Warning", EVENT_INVALID, str(failed["message"]))
            return None

        plan = compute_eviction_status(now, eviction, target, self.reader.requests_for(index))
        metrics.set_responder_states(
            namespace, str(_meta(eviction).get("name") or ""), target.target_name(), target.target_type(),
            plan.target_responders,
        )  # fmt: skip
        if plan.changed or generation_changed:
            await self._write(eviction, plan.status)
            metrics.ACTIONS.labels("status").inc()
            self._report_transitions(key, eviction, plan.status)
        if plan.resync_after is not None:
            return Result(requeue_after=max(plan.resync_after, 0.001))
        return None

    async def _write(self, eviction: Obj, status: dict[str, Any]) -> None:
        meta = _meta(eviction)
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": status}
        try:
            await self.client.patch(
                self.evictions, str(meta.get("name")), body, namespace=str(meta.get("namespace")),
                subresource="status",
            )  # fmt: skip
        except ApiError as exc:
            if exc.not_found:
                return  # deleted meanwhile (the garbage collector): nothing left to report on
            raise

    def _report_transitions(self, key: str, eviction: Obj, status: Mapping[str, Any]) -> None:
        before = {str(r.get("name")): r.get("state") for r in requests.target_responders_of(eviction)}
        for responder in status.get("targetResponders") or ():
            name, state = str(responder.get("name")), str(responder.get("state"))
            if before.get(name) == state or state not in EVENT_FOR_STATE:
                continue
            metrics.ACTIONS.labels(f"responder-{state.lower()}").inc()
            self.log.info("responder state changed", key=key, responder=name, state=state)
            self.recorder.event(eviction, "Normal", EVENT_FOR_STATE[state], f"Responder {name} is {state}")
        for condition in status.get("conditions") or ():
            if condition.get("type") not in (names.CONDITION_FAILED, names.CONDITION_TARGET_EVICTED):
                continue
            if condition.get("status") != "True" or requests.condition_is_true(
                eviction, str(condition["type"])
            ):
                continue
            kind = "Warning" if condition["type"] == names.CONDITION_FAILED else "Normal"
            self.log.info(
                "eviction finished", key=key, condition=condition["type"], reason=condition.get("reason"),
            )  # fmt: skip
            self.recorder.event(eviction, kind, str(condition.get("reason")), str(condition.get("message")))
