"""Cordon and uncordon as one merge patch on the node, remembering the node's original state.

Several maintenances may cordon one node, and an operator may have cordoned it before any of them.
The first maintenance to cordon a node records `spec.unschedulable` as it found it in the annotation
`maintenance.aiokcm.io/original-unschedulable`; while any maintenance still wants the cordon the node
stays unschedulable (an operator's `uncordon` is reconciled back, as the KEP says); when the last one
lets go the original value is restored and the annotation removed. A node that was already cordoned
before is therefore never uncordoned by us.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controllers.nodemaintenance.api import ORIGINAL_UNSCHEDULABLE_ANNOTATION

# A node cache index: the cordoned nodes, so the cluster-wide guard counts them without
# walking every node on each sync.
UNSCHEDULABLE_INDEX = "maintenance.aiokcm.io/unschedulable"


def is_unschedulable(node: Mapping[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable", False))


def unschedulable_index(node: Mapping[str, Any]) -> list[str]:
    return ["true"] if is_unschedulable(node) else []


def plan_cordon(
    node: Mapping[str, Any], *, want_cordon: bool
) -> tuple[dict[str, Any], dict[str, str | None]]:
    """The `spec` and `metadata.annotations` parts of a node merge patch (empty when nothing to do)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    original = annotations.get(ORIGINAL_UNSCHEDULABLE_ANNOTATION)
    unschedulable = is_unschedulable(node)
    spec: dict[str, Any] = {}
    notes: dict[str, str | None] = {}
    if want_cordon:
        if original is None:
            notes[ORIGINAL_UNSCHEDULABLE_ANNOTATION] = "true" if unschedulable else "false"
        if not unschedulable:
            spec["unschedulable"] = True
    elif original is not None:
        notes[ORIGINAL_UNSCHEDULABLE_ANNOTATION] = None
        if original != "true" and unschedulable:
            # `null` removes the field, which is how `kubectl uncordon` leaves a node.
            spec["unschedulable"] = None
    return spec, notes


def cordoned_by_us(node: Mapping[str, Any]) -> bool:
    """Whether a maintenance currently holds the node's cordon."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return ORIGINAL_UNSCHEDULABLE_ANNOTATION in annotations
