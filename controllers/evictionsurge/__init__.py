"""Surge at eviction time: an admission webhook on `pods/eviction` that holds an eviction back
with 429 until the pod's Deployment has surged a replacement.

`decision.py` is the verdict (pure), `admission.py` the AdmissionReview format, `requests.py` the
`EvacuationRequest` writes, `evictionrequests.py` the EvictionRequest the webhook makes instead
with `--eviction-surge-requests=EvictionRequest`, `controller.py` the caches, the queue and the
wiring, `sync.py` the reconcile of one pod's request, `state.py` what the webhook remembers for it. The manager
serves `EvictionSurgeController.review` over HTTPS (controller_manager/webhookserver.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controllers.lazy import lazy_exports

if TYPE_CHECKING:
    from controllers.evictionsurge.controller import EvictionSurgeController

__getattr__ = lazy_exports(__name__, {"EvictionSurgeController": "controllers.evictionsurge.controller"})
__all__ = ["EvictionSurgeController"]
