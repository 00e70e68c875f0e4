"""What controllers read from a pod's status: `podutil.IsPodReady`, `IsPodAvailable` and friends."""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubeutil.timestamps import format_time, parse_time, utcnow

Obj = dict[str, Any]


def phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def ready_condition(pod: Obj) -> Obj | None:
    return next(
        (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None
    )


def is_ready(pod: Obj) -> bool:
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def is_terminating(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def is_running_and_ready(pod: Obj) -> bool:
    return phase(pod) == "Running" and is_ready(pod)


def available_in(pod: Obj, min_ready_seconds: int, now: dt.datetime) -> float | None:
    """Seconds until a Ready pod counts as available (0 when it already does); None if not Ready."""
    cond = ready_condition(pod)
    if cond is None or cond.get("status") != "True":
        return None
    if min_ready_seconds <= 0:
        return 0.0
    since = parse_time(cond.get("lastTransitionTime"))
    if since is None:
        return None
    return max(0.0, min_ready_seconds - (now - since).total_seconds())


def is_available(pod: Obj, min_ready_seconds: int, now: dt.datetime) -> bool:
    """`podutil.IsPodAvailable`: Ready for at least minReadySeconds."""
    left = available_in(pod, min_ready_seconds, now)
    return left is not None and left <= 0


def creation_order(pod: Obj) -> tuple[str, str]:
    return (str(pod["metadata"].get("creationTimestamp") or ""), pod["metadata"]["name"])


def put_condition(
    status: Obj, type_: str, value: str, *, reason: str | None = None, message: str | None = None
) -> None:
    """Put a new pod condition of `type_` in `status`, stamped now, in place of any old one: each
    writer here (binding, the scheduler, eviction, pod GC) sets a condition only when it changes,
    so the new one is always a transition. `lastProbeTime: null` and the key order are what the
    real components write."""
    condition: Obj = {
        "type": type_,
        "status": value,
        "lastProbeTime": None,
        "lastTransitionTime": format_time(utcnow()),
    }
    if reason is not None:
        condition["reason"] = reason
    if message is not None:
        condition["message"] = message
    status["conditions"] = [*(c for c in status.get("conditions") or [] if c.get("type") != type_), condition]
