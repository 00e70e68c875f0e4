"""Which responder works on an eviction now: the responders' states, advanced one sync at a time.

Responders are sorted highest priority first and activated in that order: one is Active at a
time; it becomes Completed when it reports `completionTime`, Interrupted when it does not
heartbeat within the timeout (the next one becomes Active), Canceled when no requester wants the
eviction any more. When the pod is gone or terminal the Active one is Completed if it reported,
else Interrupted once the graceful completion delay has passed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, MutableSequence, Sequence
from datetime import datetime
from typing import Any

from controllers.evictionrequest.rules import (
    find_responder_status,
    find_target_responder_idx,
    is_deleted,
    should_defer_completion,
)
from controllers.evictionrequest.target import TargetInfo
from evictionapi import names, requests
from kubeutil.timestamps import parse_time

Obj = Mapping[str, Any]

HEARTBEAT_TIMEOUT = names.HEARTBEAT_TIMEOUT_SECONDS

_FINAL_STATES = (names.STATE_INTERRUPTED, names.STATE_CANCELED, names.STATE_COMPLETED)


def get_or_initialize_target_responders(
    eviction: Obj, target: TargetInfo
) -> tuple[list[dict[str, Any]], bool]:
    """The Eviction's target responders, or (first sync) the target's own, all Inactive; and
    whether they were just initialized. Entries are never added or removed once set."""
    existing = requests.target_responders_of(eviction)
    if existing:
        return [dict(r) for r in existing], False
    responders = target.eviction_responders(True)
    if not responders:
        return [], False
    return [
        {"name": name, "priority": priority, "state": names.STATE_INACTIVE} for name, priority in responders
    ], True


def compute_responder_state_and_next_resync(now: datetime, status: Obj | None) -> tuple[str, float | None]:
    """The state of the current responder and when to look again (its heartbeat deadline)."""
    if status is None:
        return names.STATE_ACTIVE, HEARTBEAT_TIMEOUT
    if status.get("completionTime"):
        return names.STATE_COMPLETED, None
    # Without a start time it is set in this same sync: "now" is its last sign of life.
    last = now
    started = parse_time(status.get("startTime"))
    if started is not None:
        last = started
    heartbeat = parse_time(status.get("heartbeatTime"))
    if heartbeat is not None:
        last = heartbeat
    elapsed = (now - last).total_seconds()
    if elapsed >= HEARTBEAT_TIMEOUT:
        return names.STATE_INTERRUPTED, None
    return names.STATE_ACTIVE, HEARTBEAT_TIMEOUT - elapsed


def compute_responder_progression(
    now: datetime,
    eviction: Obj,
    target_responders: MutableSequence[dict[str, Any]],
    target: TargetInfo,
    target_is_gone: bool,
    target_is_terminal: bool,
    eviction_is_canceled: bool,
) -> tuple[bool, float | None]:
    """Advance the (sorted) responders' states in place; return whether no responder is left to
    try and when to sync again."""
    if not target_responders:
        return True, None
    if target_responders[-1].get("state") in _FINAL_STATES:
        return True, None
    statuses = requests.responder_statuses_of(eviction)
    active_idx = find_target_responder_idx(target_responders, names.STATE_ACTIVE)
    if target_is_gone or target_is_terminal:
        if active_idx == -1:
            return False, None  # the work is done: start no one
        active_status = find_responder_status(statuses, str(target_responders[active_idx].get("name")))
        if active_status is not None and active_status.get("completionTime"):
            target_responders[active_idx]["state"] = names.STATE_COMPLETED
            return False, None
        deferred = should_defer_completion(now, active_status, target)
        if deferred is not None:
            return False, deferred  # it may still report
        target_responders[active_idx]["state"] = names.STATE_INTERRUPTED
        return False, None
    if eviction_is_canceled:
        if active_idx == -1:
            return False, None
        target_responders[active_idx]["state"] = names.STATE_CANCELED
        return False, None

    if active_idx == -1:
        active_idx = find_target_responder_idx(target_responders, names.STATE_INACTIVE)
    active_status = find_responder_status(statuses, str(target_responders[active_idx].get("name")))
    state, resync = compute_responder_state_and_next_resync(now, active_status)
    target_responders[active_idx]["state"] = state
    if state != names.STATE_ACTIVE and active_idx + 1 < len(target_responders):
        target_responders[active_idx + 1]["state"] = names.STATE_ACTIVE
        resync = HEARTBEAT_TIMEOUT
    return False, resync


def _created(obj: Obj) -> float:
    created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    return created.timestamp() if created is not None else float("-inf")


def _relevance(a: Obj, b: Obj) -> int:
    a_exists = bool((a.get("metadata") or {}).get("creationTimestamp"))
    b_exists = bool((b.get("metadata") or {}).get("creationTimestamp"))
    a_deleted = not a_exists or is_deleted(a)
    b_deleted = not b_exists or is_deleted(b)
    # Existing EvictionRequests before requesters only remembered in the status.
    if a_exists != b_exists:
        return -1 if a_exists else 1
    # Requests not being deleted (a deleted one counts as withdrawn) first.
    if a_deleted != b_deleted:
        return -1 if not a_deleted else 1
    a_intent, b_intent = requests.intent_of(a), requests.intent_of(b)
    if a_intent != b_intent and a_intent == names.INTENT_EVICTION and not a_deleted:
        return -1
    if a_intent != b_intent and b_intent == names.INTENT_EVICTION and not b_deleted:
        return 1
    # The oldest first: they are already in the status, so the status does not churn.
    a_created, b_created = _created(a), _created(b)
    if a_created != b_created:
        return -1 if a_created < b_created else 1
    a_name, b_name = requests.requester_of(a), requests.requester_of(b)
    return (a_name > b_name) - (a_name < b_name)


def sort_eviction_requests_by_relevance(sorted_requests: Sequence[Obj]) -> list[Obj]:
    """Existing, live, evicting, oldest requests first; a stable sort."""
    return sorted(sorted_requests, key=functools.cmp_to_key(_relevance))
