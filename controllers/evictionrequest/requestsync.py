"""The EvictionRequest loop: validate the request, register the Eviction, copy its conditions.

One key is one EvictionRequest. A request for a missing pod, a pod of another UID, a pod in a
scheduling group or one with an unusable responder list fails at once (`EvictionInvalid`).
Otherwise, while some request of the pod wants the eviction and the pod has no live Eviction, one
is created (`pod-<n>-<pod>`), owned by this request and labelled with its requester; the refresh
loop adds the other requests as owners. The request's TargetEvicted and Failed conditions are the
relevant Eviction's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from structlog.typing import FilteringBoundLogger

from apiclient import ApiError, KubeClient
from controllers.context import EventRecorder
from controllers.evictionrequest import metrics
from controllers.evictionrequest.reader import Reader
from controllers.evictionrequest.rules import (
    convert_to_request_condition,
    find_relevant_eviction,
    has_eviction_intent,
    has_eviction_request_completed,
    is_deleted,
    new_eviction_name,
    owner_reference,
)
from controllers.evictionrequest.status import validate_eviction_request
from controllers.evictionrequest.target import NO_TARGET, target_index_value
from evictionapi import names, requests
from evictionapi.served import EvictionAPI

Obj = Mapping[str, Any]

EVENT_CREATED = "EvictionCreated"


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _merge_conditions(existing: list[Mapping[str, Any]], ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    types = {c["type"] for c in ours}
    return [dict(c) for c in existing if c.get("type") not in types] + ours


@dataclass
class RequestSync:
    client: KubeClient
    api: EvictionAPI
    reader: Reader
    recorder: EventRecorder
    clock: Callable[[], datetime]
    log: FilteringBoundLogger

    async def sync(self, key: str) -> None:
        request = self.reader.requests.get_by_key(key)
        if request is None:
            return
        meta = _meta(request)
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        target = self.reader.target_of(request)
        index = target_index_value(namespace, request)
        target_evictions = self.reader.evictions_for(index) if target.target_type() != NO_TARGET else []
        metrics.set_requester_intent(
            namespace, name, target.target_name(), target.target_type(), requests.requester_of(request),
            None if is_deleted(request) else requests.intent_of(request),
        )  # fmt: skip
        generation = meta.get("generation")
        observed = (request.get("status") or {}).get("observedGeneration")
        generation_changed = generation is not None and observed != generation
        if has_eviction_request_completed(request) and not generation_changed:
            return

        now = self.clock()
        problem = self.reader.responder_problem(target)
        failed, evicted, changed = validate_eviction_request(
            now, request, target, bool(target_evictions), problem
        )
        if failed is not None and evicted is not None:
            if changed or generation_changed:
                await self._write_status(request, [failed, evicted])
                metrics.ACTIONS.labels("invalidate-request").inc()
                self.log.info("eviction request invalid", key=key, message=failed["message"])
                self.recorder.event(request, "Warning", names.REASON_EVICTION_INVALID, str(failed["message"]))
            return

        relevant, should_create = find_relevant_eviction(target_evictions)
        evicted, evicted_changed = convert_to_request_condition(
            now, request, relevant, names.CONDITION_TARGET_EVICTED
        )
        failed, failed_changed = convert_to_request_condition(now, request, relevant, names.CONDITION_FAILED)

        if should_create and has_eviction_intent(self.reader.requests_for(index)):
            await self._create_eviction(key, request, target)

        if generation_changed or evicted_changed or failed_changed:
            await self._write_status(request, [failed, evicted])
            metrics.ACTIONS.labels("request-status").inc()
            self.log.info(
                "eviction request conditions synced", key=key,
                target_evicted=evicted["status"], failed=failed["status"], reason=failed["reason"],
            )  # fmt: skip

    async def _create_eviction(self, key: str, request: Obj, target: Any) -> None:
        meta = _meta(request)
        namespace = str(meta.get("namespace") or "")
        name = new_eviction_name(target, self.reader.evictions.list(namespace))
        body = {
            "apiVersion": self.api.evictions.api_version,
            "kind": names.EVICTION_KIND,
            "metadata": {
                "name": name,
                "namespace": namespace,
                # The refresh loop keeps the labels and owners from here on, by role.
                "labels": {requests.requester_of(request): names.ROLE_REQUESTER},
                "ownerReferences": [owner_reference(request, self.api.group)],
            },
            "spec": {"target": target.to_eviction_target()},
        }
        created = await self.client.create(self.api.evictions, body, namespace=namespace)
        metrics.ACTIONS.labels("create").inc()
        self.log.info("eviction created", key=key, eviction=name, pod=target.target_name())
        self.recorder.event(
            created, "Normal", EVENT_CREATED, f"Created for {target.target_type()} {target.target_name()}"
        )

    async def _write_status(self, request: Obj, conditions: list[dict[str, Any]]) -> None:
        meta = _meta(request)
        status: dict[str, Any] = {
            "conditions": _merge_conditions(requests.conditions_of(request), conditions)
        }
        if meta.get("generation") is not None:
            status["observedGeneration"] = meta["generation"]
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": status}
        try:
            await self.client.patch(
                self.api.requests, str(meta.get("name")), body, namespace=str(meta.get("namespace")),
                subresource="status",
            )  # fmt: skip
        except ApiError as exc:
            if not exc.not_found:
                raise
