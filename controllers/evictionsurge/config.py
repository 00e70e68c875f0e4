"""The eviction-surge controller's settings, in the shape of KCM's per-controller config types.

The defaults here are the only ones: `--eviction-surge-timeout`, `--eviction-surge-retry-window`
and `--eviction-surge-requests` take their defaults from this class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# How the webhook asks for the replacement of a pod whose eviction it holds back:
# the KEP-4212 pod condition it writes itself, answered by the surge machinery directly ...
REQUESTS_EVACUATION_REQUEST: Final = "EvacuationRequest"
# ... or an EvictionRequest (KEP-4563), answered by the pod's eviction responders (aiokcm's surge
# responder first); needs the EvictionRequestAPI feature gate.
REQUESTS_EVICTION_REQUEST: Final = "EvictionRequest"
REQUEST_MODES: Final = (REQUESTS_EVACUATION_REQUEST, REQUESTS_EVICTION_REQUEST)


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
    # One of REQUEST_MODES: what the webhook writes for a pod whose eviction it holds back.
    requests: str = REQUESTS_EVACUATION_REQUEST

    @property
    def eviction_requests(self) -> bool:
        return self.requests == REQUESTS_EVICTION_REQUEST
