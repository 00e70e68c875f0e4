"""Reading EvictionRequests and Evictions: plain dicts in, plain values out.

Every controller, the CLI and the webhook read the same few fields, and two of them have more
than one spelling or shape: the requester is `spec.requester` (upstream's merged API) or
`spec.requesterName` (the KEP's earlier draft, which aiokcm's CRD also accepts), and a target
may one day be something other than a pod. Reading them here keeps every caller tolerant of both
and of objects that are half-written (a status not yet set, a list that is null).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evictionapi import names

Obj = Mapping[str, Any]


def _spec(obj: Obj | None) -> Mapping[str, Any]:
    return (obj or {}).get("spec") or {}


def _status(obj: Obj | None) -> Mapping[str, Any]:
    return (obj or {}).get("status") or {}


def requester_of(er: Obj | None) -> str:
    """Who asked for the eviction: `spec.requester`, or `spec.requesterName`, or "" when neither."""
    spec = _spec(er)
    return str(spec.get("requester") or spec.get("requesterName") or "")


def intent_of(er: Obj | None) -> str:
    """`spec.intent` of an EvictionRequest ("" when unset; the CRD requires it)."""
    return str(_spec(er).get("intent") or "")


def wants_eviction(er: Obj | None) -> bool:
    """The request still asks for the eviction; a withdrawn (or unreadable) one does not."""
    return intent_of(er) == names.INTENT_EVICTION


def target_pod_of(obj: Obj | None) -> tuple[str, str] | None:
    """`(name, uid)` of the pod an EvictionRequest or Eviction targets; None if it targets no pod.

    Both kinds spell the target the same way (`spec.target.pod`), so one reader serves both.
    A target with a name but no uid is still returned (uid ""), so a caller can report it.
    """
    target = _spec(obj).get("target") or {}
    pod = target.get("pod") if isinstance(target, Mapping) else None
    if not isinstance(pod, Mapping) or not pod.get("name"):
        return None
    return str(pod["name"]), str(pod.get("uid") or "")


def target_key_of(obj: Obj | None) -> str | None:
    """`namespace/name` of the target pod, the key a pod-keyed queue or index uses."""
    pod = target_pod_of(obj)
    if pod is None:
        return None
    namespace = str(((obj or {}).get("metadata") or {}).get("namespace") or "")
    return f"{namespace}/{pod[0]}" if namespace else pod[0]


def conditions_of(obj: Obj | None) -> list[Mapping[str, Any]]:
    """`status.conditions`, an empty list when unset."""
    return list(_status(obj).get("conditions") or ())


def condition(obj: Obj | None, type_: str) -> Mapping[str, Any] | None:
    """The condition of `type_` in `status.conditions`, or None."""
    for cond in conditions_of(obj):
        if cond.get("type") == type_:
            return cond
    return None


def condition_is_true(obj: Obj | None, type_: str) -> bool:
    cond = condition(obj, type_)
    return cond is not None and cond.get("status") == "True"


def target_evicted(obj: Obj | None) -> bool:
    """The `TargetEvicted` condition is True: the pod was terminated or deleted."""
    return condition_is_true(obj, names.CONDITION_TARGET_EVICTED)


def failed(obj: Obj | None) -> bool:
    """The `Failed` condition is True: no responder is working on the eviction any more."""
    return condition_is_true(obj, names.CONDITION_FAILED)


def requesters_of(eviction: Obj | None) -> list[Mapping[str, Any]]:
    """`status.requesters` of an Eviction (`{name, intent}` each)."""
    return list(_status(eviction).get("requesters") or ())


def target_responders_of(eviction: Obj | None) -> list[Mapping[str, Any]]:
    """`status.targetResponders` of an Eviction (`{name, priority, state}`, highest priority first)."""
    return list(_status(eviction).get("targetResponders") or ())


def responder_statuses_of(eviction: Obj | None) -> list[Mapping[str, Any]]:
    """`status.responders` of an Eviction (each responder's own progress report)."""
    return list(_status(eviction).get("responders") or ())


def responder_status(eviction: Obj | None, name: str) -> Mapping[str, Any] | None:
    """The `status.responders` entry of responder `name`, or None."""
    for entry in responder_statuses_of(eviction):
        if entry.get("name") == name:
            return entry
    return None


def active_responder_of(eviction: Obj | None) -> str | None:
    """The name of the one target responder whose state is Active, or None."""
    for entry in target_responders_of(eviction):
        if entry.get("state") == names.STATE_ACTIVE:
            return str(entry.get("name") or "") or None
    return None
