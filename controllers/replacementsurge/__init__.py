"""Surge through the public API, beside the stock kube-controller-manager.

Where aiokcm's own ReplicaSet and Deployment controllers are not the ones running (every managed
cluster), a pod asked to evacuate is replaced by a ready copy that KCM's ReplicaSet controller
adopts, after which it deletes the departing pod, marked with the lowest deletion cost. `copies.py`
shapes the objects, `plan.py` decides (pure), `sync.py` writes, `controller.py` wires the caches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controllers.lazy import lazy_exports

if TYPE_CHECKING:
    from controllers.replacementsurge.controller import ReplacementSurgeController

__getattr__ = lazy_exports(
    __name__, {"ReplacementSurgeController": "controllers.replacementsurge.controller"}
)
__all__ = ["ReplacementSurgeController"]
