"""Node labels the controller keeps in step: KCM's `labelReconcileInfo` (pure).

The beta OS and arch labels follow the stable ones: a beta label that differs from its stable
label is set to the stable value, and a missing one is added. A node without the stable label is
left alone, as is a node without labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LABEL_OS_STABLE = "kubernetes.io/os"
LABEL_ARCH_STABLE = "kubernetes.io/arch"
LABEL_OS_BETA = "beta.kubernetes.io/os"
LABEL_ARCH_BETA = "beta.kubernetes.io/arch"

# (primary key, secondary key, ensure the secondary exists)
LABEL_RECONCILE_INFO: tuple[tuple[str, str, bool], ...] = (
    (LABEL_OS_STABLE, LABEL_OS_BETA, True),
    (LABEL_ARCH_STABLE, LABEL_ARCH_BETA, True),
)


def labels_to_reconcile(labels: Mapping[str, Any] | None) -> dict[str, str]:
    """The labels to set on a node with these labels so that the secondaries follow the primaries."""
    if not labels:
        return {}
    update: dict[str, str] = {}
    for primary, secondary, ensure_secondary in LABEL_RECONCILE_INFO:
        if primary not in labels:
            continue
        value = str(labels[primary])
        if secondary in labels:
            if labels[secondary] != value:
                update[secondary] = value
        elif ensure_secondary:
            update[secondary] = value
    return update
