"""Which taints a node's state calls for, and which of its taints this controller owns (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeutil.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    TAINT_NODE_DISK_PRESSURE,
    TAINT_NODE_MEMORY_PRESSURE,
    TAINT_NODE_NETWORK_UNAVAILABLE,
    TAINT_NODE_NOT_READY,
    TAINT_NODE_PID_PRESSURE,
    TAINT_NODE_UNREACHABLE,
    TAINT_NODE_UNSCHEDULABLE,
    Taint,
    node_taints,
)

NOT_READY_TAINT: Taint = {"key": TAINT_NODE_NOT_READY, "effect": NO_EXECUTE}
UNREACHABLE_TAINT: Taint = {"key": TAINT_NODE_UNREACHABLE, "effect": NO_EXECUTE}

# Condition type -> status -> NoSchedule taint key (`nodeConditionToTaintKeyStatusMap`).
CONDITION_TAINTS: dict[str, dict[str, str]] = {
    "Ready": {"False": TAINT_NODE_NOT_READY, "Unknown": TAINT_NODE_UNREACHABLE},
    "MemoryPressure": {"True": TAINT_NODE_MEMORY_PRESSURE},
    "DiskPressure": {"True": TAINT_NODE_DISK_PRESSURE},
    "NetworkUnavailable": {"True": TAINT_NODE_NETWORK_UNAVAILABLE},
    "PIDPressure": {"True": TAINT_NODE_PID_PRESSURE},
}
CONDITION_TAINT_KEYS = frozenset(key for by_status in CONDITION_TAINTS.values() for key in by_status.values())


def no_schedule_taints(node: Mapping[str, Any]) -> list[Taint]:
    """The NoSchedule taints a node's conditions and `spec.unschedulable` call for."""
    out: list[Taint] = []
    for cond in (node.get("status") or {}).get("conditions") or ():
        key = CONDITION_TAINTS.get(str(cond.get("type")), {}).get(str(cond.get("status")))
        if key is not None:
            out.append({"key": key, "effect": NO_SCHEDULE})
    if (node.get("spec") or {}).get("unschedulable"):
        out.append({"key": TAINT_NODE_UNSCHEDULABLE, "effect": NO_SCHEDULE})
    return out


def controller_no_schedule_taints(node: Mapping[str, Any]) -> list[Taint]:
    """The node's NoSchedule taints this controller owns (condition and unschedulable taints)."""
    return [
        t
        for t in node_taints(node)
        if t.get("effect") == NO_SCHEDULE
        and (t.get("key") == TAINT_NODE_UNSCHEDULABLE or t.get("key") in CONDITION_TAINT_KEYS)
    ]
