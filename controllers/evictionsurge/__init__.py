"""Surge at eviction time: an admission webhook on `pods/eviction` that holds an eviction back
with 429 until the pod's Deployment has surged a replacement.

`decision.py` is the verdict (pure), `admission.py` the AdmissionReview format, `requests.py` the
`EvacuationRequest` writes, `controller.py` the caches, the queue and the wiring, `sync.py` the
reconcile of one pod's request, `state.py` what the webhook remembers for it. The manager
serves `EvictionSurgeController.review` over HTTPS (controller_manager/webhookserver.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from controllers.evictionsurge.controller import EvictionSurgeController


def __getattr__(name: str) -> Any:
    """The controller is imported on first use, so reading this package's flag configuration
    (the command line's parser does) does not load the API client."""
    if name == "EvictionSurgeController":
        return importlib.import_module("controllers.evictionsurge.controller").EvictionSurgeController
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["EvictionSurgeController"]
