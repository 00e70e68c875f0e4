"""Small pure rules both loops share: names, relevance, conditions, owners, labels, deferral.

Each is a function of the objects as read from the caches and of "now"; nothing here writes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from controllers.evictionrequest.target import TargetInfo
from evictionapi import names, requests
from evictionapi.validation import responder_order_key
from kubeutil.timestamps import format_time, parse_time

Obj = Mapping[str, Any]
Condition = dict[str, Any]

# The delay before TargetEvicted is set when the pod is deleted (or terminal) while the Active
# responder has not reported completion: time for it to report its final status.
GRACEFUL_COMPLETION_DELAY = 5.0
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
AWAITING_MESSAGE = "waiting for an Eviction to report on progress"


def _meta(obj: Obj | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def new_eviction_name(target: TargetInfo, all_evictions: Iterable[Obj]) -> str:
    """`pod-<n>-<pod name>`, n one past the highest counter already used for that pod name.

    A name cut at the length limit counts as that pod's when the pod name starts with its tail,
    so two very long pod names may share one counter.
    """
    target_name = target.target_name()
    if not target_name:
        return ""
    pattern = re.compile(f"{re.escape(target.target_type())}-([0-9]+)-(.*)$")
    counter = 0
    for eviction in all_evictions:
        name = str(_meta(eviction).get("name") or "")
        match = pattern.search(name)
        if match is None:
            continue
        number, name_part = match.group(1), match.group(2)
        matches = name_part == target_name or (
            len(name) == DNS1123_SUBDOMAIN_MAX_LENGTH and target_name.startswith(name_part)
        )
        if matches and int(number) > counter:
            counter = int(number)
    return f"{target.target_type()}-{counter + 1}-{target_name}"[:DNS1123_SUBDOMAIN_MAX_LENGTH]


def has_eviction_succeeded(eviction: Obj | None) -> bool:
    return requests.target_evicted(eviction)


def has_eviction_failed(eviction: Obj | None) -> bool:
    return requests.failed(eviction)


def has_eviction_completed(eviction: Obj | None) -> bool:
    """TargetEvicted or Failed is True: the Eviction is final."""
    return has_eviction_succeeded(eviction) or has_eviction_failed(eviction)


def _created_at(obj: Obj) -> float:
    """The creation time in seconds; an object never stored (no timestamp) is the oldest."""
    created = parse_time(_meta(obj).get("creationTimestamp"))
    return created.timestamp() if created is not None else float("-inf")


def compare_condition_transition_time(a: Obj, b: Obj, condition_type: str) -> int:
    """-1, 0, 1 as `a`'s condition of `condition_type` changed before, with, after `b`'s; a missing
    condition is the earliest."""
    a_cond, b_cond = requests.condition(a, condition_type), requests.condition(b, condition_type)
    if a_cond is None and b_cond is None:
        return 0
    if a_cond is None:
        return -1
    if b_cond is None:
        return 1
    a_time = parse_time(a_cond.get("lastTransitionTime"))
    b_time = parse_time(b_cond.get("lastTransitionTime"))
    a_key = a_time.timestamp() if a_time else float("-inf")
    b_key = b_time.timestamp() if b_time else float("-inf")
    return (a_key > b_key) - (a_key < b_key)


def find_relevant_eviction(evictions: Sequence[Obj]) -> tuple[Obj | None, bool]:
    """The Eviction an EvictionRequest reports on, and whether a new one should be created.

    The latest succeeded one; else the oldest active one; else the latest failed one (and a new
    Eviction is due); else none (and one is due).
    """
    active: Obj | None = None
    succeeded: Obj | None = None
    failed: Obj | None = None
    for eviction in evictions:
        if has_eviction_succeeded(eviction):
            if (
                succeeded is None
                or compare_condition_transition_time(succeeded, eviction, names.CONDITION_TARGET_EVICTED) < 0
            ):
                succeeded = eviction
        elif has_eviction_failed(eviction):
            if (
                failed is None
                or compare_condition_transition_time(failed, eviction, names.CONDITION_FAILED) < 0
            ):
                failed = eviction
        else:
            if active is None or _created_at(active) > _created_at(eviction):
                active = eviction
    if succeeded is not None:
        return succeeded, False
    if active is not None:
        return active, False
    return failed, True


def set_condition(
    now: datetime,
    existing_conditions: Sequence[Obj],
    condition_type: str,
    status: str,
    reason: str,
    message: str,
) -> tuple[Condition, bool]:
    """The condition to write and whether it differs from the one present (status, reason or
    message); the transition time is kept while the status stays the same."""
    existing = next((c for c in existing_conditions if c.get("type") == condition_type), None)
    transition = format_time(now)
    if existing is not None and existing.get("status") == status and existing.get("lastTransitionTime"):
        transition = str(existing["lastTransitionTime"])
    changed = (
        existing is None
        or existing.get("status") != status
        or (existing.get("reason") or "") != reason
        or (existing.get("message") or "") != message
    )
    condition = {
        "type": condition_type,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    return condition, changed


def convert_to_request_condition(
    now: datetime, eviction_request: Obj, eviction: Obj | None, condition_type: str
) -> tuple[Condition, bool]:
    """The EvictionRequest's copy of the Eviction's condition of `condition_type` (False,
    AwaitingEviction while there is none)."""
    existing = requests.conditions_of(eviction_request)
    source = requests.condition(eviction, condition_type) if eviction is not None else None
    if source is not None:
        return set_condition(
            now,
            existing,
            condition_type,
            str(source.get("status") or ""),
            str(source.get("reason") or ""),
            str(source.get("message") or ""),
        )
    return set_condition(
        now, existing, condition_type, "False", names.REASON_AWAITING_EVICTION, AWAITING_MESSAGE
    )


def has_eviction_request_completed(eviction_request: Obj) -> bool:
    """TargetEvicted is True, or the request was found invalid: nothing more to do for it."""
    if requests.target_evicted(eviction_request):
        return True
    failed = requests.condition(eviction_request, names.CONDITION_FAILED)
    return (
        failed is not None
        and failed.get("status") == "True"
        and failed.get("reason") == names.REASON_EVICTION_INVALID
    )


def is_deleted(obj: Obj) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def has_eviction_intent(target_eviction_requests: Iterable[Obj]) -> bool:
    """Some request not being deleted still asks for the eviction."""
    return any(not is_deleted(r) and requests.wants_eviction(r) for r in target_eviction_requests)


def owner_reference(eviction_request: Obj, group: str) -> dict[str, Any]:
    """The reference that makes an Eviction garbage once every EvictionRequest of it is gone."""
    meta = _meta(eviction_request)
    return {
        "apiVersion": f"{group}/{names.VERSION}",
        "kind": names.EVICTION_REQUEST_KIND,
        "name": str(meta.get("name") or ""),
        "uid": str(meta.get("uid") or ""),
    }


def compute_eviction_labels(
    eviction: Obj, target: TargetInfo, target_requests: Iterable[Obj]
) -> dict[str, str]:
    """Every participant's name as a label key with its role: what responders select on.

    Requesters come from the requests; responders from the target, or (once the target is gone)
    from the labels already there, since a gone pod declares nothing any more.
    """
    labels: dict[str, str] = {}
    for request in target_requests:
        requester = requests.requester_of(request)
        if requester:
            labels[requester] = names.ROLE_REQUESTER

    def add_responder(name: str) -> None:
        labels[name] = names.ROLE_REQUESTER_RESPONDER if labels.get(name) else names.ROLE_RESPONDER

    if target.is_gone():
        for key, value in (_meta(eviction).get("labels") or {}).items():
            if value in (names.ROLE_REQUESTER_RESPONDER, names.ROLE_RESPONDER):
                add_responder(str(key))
    else:
        for name, _priority in target.eviction_responders(True):
            add_responder(name)
    return labels


def eviction_labels_need_update(old: Mapping[str, str] | None, new: Mapping[str, str] | None) -> bool:
    """Labels were added or changed, or a requester label must go (responders are never removed)."""
    old, new = old or {}, new or {}
    if any(old.get(k) != v for k, v in new.items()):
        return True
    return any(v == names.ROLE_REQUESTER and not new.get(k) for k, v in old.items())


def should_defer_completion(now: datetime, active_status: Obj | None, target: TargetInfo) -> float | None:
    """Seconds to wait before reporting the target evicted, so that the Active responder can
    report its completion first; None when there is nothing to wait for."""
    if active_status is None or active_status.get("completionTime"):
        return None
    deleted_at = target.deletion_timestamp()
    if deleted_at is None:
        return None
    remaining = GRACEFUL_COMPLETION_DELAY - (now - deleted_at).total_seconds()
    return remaining if remaining > 0 else None


def find_target_responder_idx(target_responders: Sequence[Obj], state: str) -> int:
    return next((i for i, r in enumerate(target_responders) if r.get("state") == state), -1)


def find_responder_status(statuses: Sequence[Obj], name: str) -> Obj | None:
    return next((s for s in statuses if s.get("name") == name), None)


def _priority(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def sort_target_responders(target_responders: Iterable[Obj]) -> list[dict[str, Any]]:
    """Highest priority first, ties by domain read from the top, then by key (the API's order)."""
    listed = [dict(r) for r in target_responders]
    return sorted(
        listed, key=lambda r: responder_order_key(str(r.get("name") or ""), _priority(r.get("priority")))
    )
