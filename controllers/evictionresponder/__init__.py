"""aiokcm's surge-first responder to Evictions (the EvictionRequest API) of ReplicaSets' pods.

When its turn comes on an Eviction (its target responder is Active), the responder asks for the
pod's evacuation with the same pod condition a NodeMaintenance drain writes, `EvacuationRequest`,
under its own reason (`EvictionRequest`), so whoever surges in this cluster (aiokcm's own
ReplicaSet and Deployment controllers, or `replacement-surge` beside KCM's) starts a replacement
within the Deployment's `maxSurge` and removes the pod once the replacement is available. The
responder follows that on the pod and reports on the Eviction (heartbeats, progress, completion);
what it cannot serve, or what the surge gives up on, it completes at once with the reason, so the
next responder (in the end the imperative evictor) takes over. Canceled, it withdraws its request
and the surge machinery undoes the surge.

`registration.py` names the responder and says which pods it serves, `plan.py` decides (pure),
`marks.py` and `status.py` shape the writes, `sync.py` performs them, `controller.py` wires the
caches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controllers.lazy import lazy_exports

if TYPE_CHECKING:
    from controllers.evictionresponder.controller import EvictionResponderController

__getattr__ = lazy_exports(
    __name__, {"EvictionResponderController": "controllers.evictionresponder.controller"}
)
__all__ = ["EvictionResponderController"]
