"""The desired status of an Eviction and of an EvictionRequest, computed from the caches.

Pure: `(eviction, requests, target, now)` in, the status to write, whether it differs from the
one present, and when to look again out. The syncs only read the caches and write what these
functions return.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controllers.evictionrequest.progression import (
    compute_responder_progression,
    get_or_initialize_target_responders,
    sort_eviction_requests_by_relevance,
)
from controllers.evictionrequest.rules import (
    Condition,
    find_responder_status,
    find_target_responder_idx,
    has_eviction_intent,
    is_deleted,
    set_condition,
    should_defer_completion,
    sort_target_responders,
)
from controllers.evictionrequest.target import NO_TARGET, TargetInfo
from evictionapi import names, requests
from kubeutil.timestamps import format_time

Obj = Mapping[str, Any]

MSG_UNSUPPORTED_TARGET = "Unsupported target type."
MSG_DUPLICATE = "Active Eviction already exists for the same target."
MSG_POD_DELETED = "Target pod has been deleted."
MSG_POD_TERMINAL = "Pod has reached terminal state."
MSG_NO_REQUESTERS = "No active requesters with eviction intent."
MSG_NO_FURTHER_RESPONDER = "All responders have completed without evicting the target."


def msg_not_found(target_type: str) -> str:
    return f"Target {target_type} not found."


def msg_uid_mismatch(target_type: str, expected: str, got: str) -> str:
    return f"Target {target_type} UID mismatch: expected {expected}, got {got}."


def msg_scheduling_group(target_type: str) -> str:
    return f"Target {target_type} references a SchedulingGroup. Eviction is currently not supported."


Validation = tuple[Condition | None, Condition | None, bool]


def _invalid(now: datetime, existing: Sequence[Obj], message: str) -> Validation:
    failed, failed_changed = set_condition(
        now, existing, names.CONDITION_FAILED, "True", names.REASON_EVICTION_INVALID, message
    )
    evicted, evicted_changed = set_condition(
        now, existing, names.CONDITION_TARGET_EVICTED, "False", names.REASON_EVICTION_FAILED, ""
    )
    return failed, evicted, failed_changed or evicted_changed


def validate_eviction(
    now: datetime, eviction: Obj, target: TargetInfo, is_duplicate: bool, responder_problem: str | None = None
) -> Validation:
    """`(Failed, TargetEvicted, changed)` when the Eviction is invalid; `(None, None, False)` else.

    Only the invariants: whether the target matches is the EvictionRequests' check.
    """
    if target.target_type() == NO_TARGET:
        message = MSG_UNSUPPORTED_TARGET
    elif is_duplicate:
        message = MSG_DUPLICATE
    elif target.has_scheduling_group():
        message = msg_scheduling_group(target.target_type())
    elif responder_problem:
        message = responder_problem
    else:
        return None, None, False
    return _invalid(now, requests.conditions_of(eviction), message)


def validate_eviction_request(
    now: datetime,
    eviction_request: Obj,
    target: TargetInfo,
    has_evictions: bool,
    responder_problem: str | None = None,
) -> Validation:
    """`(Failed, TargetEvicted, changed)` when the request cannot be acted on; `(None, None, False)`
    else. Once an Eviction exists, a missing or replaced pod is its business (TargetEvicted)."""
    if target.target_type() == NO_TARGET:
        message = MSG_UNSUPPORTED_TARGET
    elif not has_evictions and not target.target_found_by_name():
        message = msg_not_found(target.target_type())
    elif not has_evictions and target.target_uid() != target.object_uid():
        message = msg_uid_mismatch(target.target_type(), target.target_uid(), target.object_uid())
    elif target.has_scheduling_group():
        message = msg_scheduling_group(target.target_type())
    elif responder_problem and not has_evictions:
        message = responder_problem
    else:
        return None, None, False
    return _invalid(now, requests.conditions_of(eviction_request), message)


def compute_eviction_conditions(
    now: datetime,
    eviction: Obj,
    waiting_for_responder_update: bool,
    is_gone: bool,
    is_terminal: bool,
    is_canceled: bool,
    is_progression_done: bool,
) -> tuple[Condition, Condition, bool]:
    """`(Failed, TargetEvicted, changed)`: both always set, False until one turns True."""
    existing = requests.conditions_of(eviction)
    failed_c, target_c = names.CONDITION_FAILED, names.CONDITION_TARGET_EVICTED
    if is_gone and not waiting_for_responder_update:
        evicted, e_changed = set_condition(
            now, existing, target_c, "True", names.REASON_POD_DELETED, MSG_POD_DELETED
        )
        failed, f_changed = set_condition(now, existing, failed_c, "False", names.REASON_SUCCEEDED, "")
    elif is_terminal and not waiting_for_responder_update:
        evicted, e_changed = set_condition(
            now, existing, target_c, "True", names.REASON_POD_TERMINAL, MSG_POD_TERMINAL
        )
        failed, f_changed = set_condition(now, existing, failed_c, "False", names.REASON_SUCCEEDED, "")
    elif is_canceled:
        failed, f_changed = set_condition(
            now, existing, failed_c, "True", names.REASON_CANCELED_DUE_TO_NO_REQUESTERS, MSG_NO_REQUESTERS
        )
        evicted, e_changed = set_condition(now, existing, target_c, "False", names.REASON_EVICTION_FAILED, "")
    elif is_progression_done:
        failed, f_changed = set_condition(
            now, existing, failed_c, "True", names.REASON_NO_FURTHER_RESPONDER, MSG_NO_FURTHER_RESPONDER
        )
        evicted, e_changed = set_condition(now, existing, target_c, "False", names.REASON_EVICTION_FAILED, "")
    else:
        failed, f_changed = set_condition(
            now, existing, failed_c, "False", names.REASON_AWAITING_EVICTION, ""
        )
        evicted, e_changed = set_condition(
            now, existing, target_c, "False", names.REASON_AWAITING_EVICTION, ""
        )
    return failed, evicted, f_changed or e_changed


def update_requesters(
    eviction: Obj, target_requests: Sequence[Obj], limit: int = names.MAX_REQUESTERS
) -> tuple[list[dict[str, str]], bool]:
    """`status.requesters`: every requester the Eviction has known, with its current intent.

    A requester whose EvictionRequest is gone or being deleted is kept as Withdrawn; live,
    evicting, oldest ones come first, and at most `limit` entries are kept.
    """
    original = {
        str(r.get("name") or ""): str(r.get("intent") or "") for r in requests.requesters_of(eviction)
    }
    remembered = [
        {"spec": {"requester": r.get("name"), "intent": r.get("intent")}}
        for r in requests.requesters_of(eviction)
    ]
    ordered = sort_eviction_requests_by_relevance([*target_requests, *remembered])
    result: list[dict[str, str]] = []
    seen: set[str] = set()
    changed = False
    for i, request in enumerate(ordered):
        if i >= limit:
            break
        name = requests.requester_of(request)
        if name in seen:
            continue
        exists = bool((request.get("metadata") or {}).get("creationTimestamp"))
        intent = requests.intent_of(request) if exists and not is_deleted(request) else names.INTENT_WITHDRAWN
        result.append({"name": name, "intent": intent})
        seen.add(name)
        if original.get(name) != intent:
            changed = True
    return result, changed


@dataclass(frozen=True)
class EvictionStatusPlan:
    """What to write to an Eviction's status, whether it differs, and when to sync again."""

    status: dict[str, Any]
    changed: bool
    resync_after: float | None = None
    target_responders: list[dict[str, Any]] = field(default_factory=list)
    final: bool = False


def _merge_conditions(existing: Sequence[Obj], ours: Sequence[Condition]) -> list[dict[str, Any]]:
    """`ours` replace the conditions of their types; others' conditions stay where they were."""
    types = {c["type"] for c in ours}
    return [dict(c) for c in existing if c.get("type") not in types] + [dict(c) for c in ours]


def invalid_eviction_status(eviction: Obj, failed: Condition, evicted: Condition) -> dict[str, Any]:
    generation = (eviction.get("metadata") or {}).get("generation")
    status: dict[str, Any] = {
        "conditions": _merge_conditions(requests.conditions_of(eviction), [failed, evicted])
    }
    if generation is not None:
        status["observedGeneration"] = generation
    return status


def compute_eviction_status(
    now: datetime, eviction: Obj, target: TargetInfo, target_requests: Sequence[Obj]
) -> EvictionStatusPlan:
    """The Eviction's next status: requesters, responders advanced, conditions."""
    requesters, changed = update_requesters(eviction, target_requests)
    is_gone = target.is_gone()
    is_terminal = not is_gone and target.is_terminal()
    is_canceled = not is_gone and not is_terminal and not has_eviction_intent(target_requests)

    responders, initialized = get_or_initialize_target_responders(eviction, target)
    responders = sort_target_responders(responders)
    before = [dict(r) for r in responders]
    done, progression_resync = compute_responder_progression(
        now, eviction, responders, target, is_gone, is_terminal, is_canceled
    )
    changed = changed or initialized or before != responders

    statuses = requests.responder_statuses_of(eviction)
    responder_statuses: list[dict[str, Any]] = []
    for responder in responders:
        existing = find_responder_status(statuses, str(responder["name"]))
        entry = dict(existing) if existing is not None else {"name": responder["name"]}
        if not entry.get("startTime") and responder.get("state") == names.STATE_ACTIVE:
            entry["startTime"] = format_time(now)
            changed = True
        responder_statuses.append(entry)
    listed = {r["name"] for r in responders}
    responder_statuses.extend(dict(s) for s in statuses if s.get("name") not in listed)

    active_idx = find_target_responder_idx(responders, names.STATE_ACTIVE)
    active_status = (
        find_responder_status(statuses, str(responders[active_idx]["name"])) if active_idx != -1 else None
    )
    if is_gone or is_terminal:
        resync = should_defer_completion(now, active_status, target)
        waiting = resync is not None
    else:
        resync, waiting = progression_resync, False

    failed, evicted, conditions_changed = compute_eviction_conditions(
        now, eviction, waiting, is_gone, is_terminal, is_canceled, done
    )
    changed = changed or conditions_changed
    status: dict[str, Any] = {
        "conditions": _merge_conditions(requests.conditions_of(eviction), [failed, evicted]),
        "requesters": requesters,
        "targetResponders": responders,
        "responders": responder_statuses,
    }
    generation = (eviction.get("metadata") or {}).get("generation")
    if generation is not None:
        status["observedGeneration"] = generation
    final = failed["status"] == "True" or evicted["status"] == "True"
    return EvictionStatusPlan(status, changed, resync, responders, final)
