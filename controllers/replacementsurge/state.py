"""What the handlers and the reconcile share: writes made but not yet seen in the caches.

A sync woken before the informer delivered its own last write would plan from the version it
replaced: a second copy for the same pod (the budget counted from the cache), or the same patch
again. So, as KCM's ReplicaSet controller, creations and deletions of copies are expectations
per account (observed by the pod handlers, or expired after KCM's five minutes), and patched pods
are remembered until the cache shows a newer version (`WrittenVersions`). Either unsatisfied,
the sync waits for the event that will wake it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controllers.common.expectations import ControllerExpectations
from controllers.common.written import WrittenVersions


@dataclass(slots=True)
class SurgeState:
    expectations: ControllerExpectations = field(default_factory=ControllerExpectations)
    written: WrittenVersions = field(default_factory=WrittenVersions)
