"""Node health bookkeeping: `tryUpdateNodeHealth`'s probe timestamps, on our own clock.

KCM never trusts the kubelet's clock: it notes *its own* time whenever it sees something new
from the node, either a Ready condition with a new `lastHeartbeatTime` (a status post) or a
Lease with a later `renewTime`, and declares the node unhealthy when its own clock has run
`grace` seconds past that note. `probe` here is the controller's loop time of that note.

A node that never posted a Ready condition gets the startup grace period counted from its
creation (as Go uses `creationTimestamp`), converted to loop time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeutil.conditions import get_condition
from kubeutil.timestamps import format_time, parse_time, utcnow

UNKNOWN_CONDITION_TYPES = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")  # not NetworkUnavailable


@dataclass(slots=True)
class NodeHealth:
    """What the controller last saw from one node, and when (loop time)."""

    ready: Mapping[str, Any] | None
    probe: float
    ready_transition: float
    lease_renew: str | None = None


def lease_renew_time(lease: Mapping[str, Any] | None) -> str | None:
    if lease is None:
        return None
    renew = (lease.get("spec") or {}).get("renewTime")
    return str(renew) if renew else None


def renewed_later(saved: str | None, observed: str | None) -> bool:
    """Whether `observed` is a later renewTime than `saved` (a new heartbeat)."""
    if observed is None:
        return False
    if saved is None:
        return True
    if saved == observed:
        return False  # most passes see the renewal they already noted: no parsing
    if len(saved) == len(observed) and saved[-1] == observed[-1] == "Z":
        # The same UTC layout (the API server writes every MicroTime as RFC 3339 with six
        # fraction digits and "Z"): the strings order as the times do, with no parsing.
        return saved < observed
    a, b = parse_time(saved), parse_time(observed)
    if a is None or b is None:
        return saved != observed
    return a < b


def observe(
    health: NodeHealth | None,
    node: Mapping[str, Any],
    lease: Mapping[str, Any] | None,
    now: float,
) -> NodeHealth:
    """The node's health after looking at its status and Lease now (Go's case analysis, in order)."""
    ready = get_condition(node.get("status"), "Ready")
    saved = health.ready if health is not None else None
    if health is None:
        if ready is None:
            created = parse_time((node.get("metadata") or {}).get("creationTimestamp"))
            age = (utcnow() - created).total_seconds() if created is not None else 0.0
            health = NodeHealth(None, now - max(0.0, age), now - max(0.0, age))
        else:
            health = NodeHealth(ready, now, now)
    elif saved is None and ready is not None:
        health = NodeHealth(ready, now, now, health.lease_renew)
    elif saved is not None and ready is None:
        health = NodeHealth(None, now, now, health.lease_renew)
    elif (
        saved is not None
        and ready is not None
        and saved.get("lastHeartbeatTime") != ready.get("lastHeartbeatTime")
    ):
        moved = saved.get("lastTransitionTime") != ready.get("lastTransitionTime")
        health = NodeHealth(ready, now, now if moved else health.ready_transition, health.lease_renew)
    observed_renew = lease_renew_time(lease)
    if renewed_later(health.lease_renew, observed_renew):
        health.lease_renew = observed_renew
        health.probe = now
    return health


def unknown_conditions(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The conditions to write when a node went silent: Ready and pressures to Unknown.

    Only the conditions that change are returned (ready for a strategic-merge patch by type);
    an already Unknown condition is left alone, as is NetworkUnavailable (the control plane's).
    """
    stamp = format_time(utcnow())
    created = (node.get("metadata") or {}).get("creationTimestamp")
    out: list[dict[str, Any]] = []
    for condition_type in UNKNOWN_CONDITION_TYPES:
        current = get_condition(node.get("status"), condition_type)
        if current is None:
            out.append(
                {
                    "type": condition_type,
                    "status": "Unknown",
                    "reason": "NodeStatusNeverUpdated",
                    "message": "Kubelet never posted node status.",
                    "lastHeartbeatTime": created,
                    "lastTransitionTime": stamp,
                }
            )
        elif current.get("status") != "Unknown":
            out.append(
                {
                    **current,
                    "status": "Unknown",
                    "reason": "NodeStatusUnknown",
                    "message": "Kubelet stopped posting node status.",
                    "lastTransitionTime": stamp,
                }
            )
    return out
