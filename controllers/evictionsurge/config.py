"""The eviction-surge controller's settings, in the shape of KCM's per-controller config types.

The defaults here are the only ones: `--eviction-surge-timeout` and `--eviction-surge-retry-window`
take their defaults from this class.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EvictionSurgeConfig:
    """Durations in seconds."""

    # How long an eviction is held back waiting for a replacement; then the PDB decides alone.
    surge_timeout: float = 300.0
    # An evacuation the webhook asked for is withdrawn when no eviction is retried this long.
    retry_window: float = 60.0
    # Not a flag: set by the manager when the replacement surge answers through the public API
    # (beside KCM's own controllers), so a surging Deployment's or a bare ReplicaSet's pods are
    # held back even though no ReplicaSet carries the in-controller `evacuation-ready` mark.
    public_surge: bool = False
