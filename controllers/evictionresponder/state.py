"""What the handlers and the reconcile share: writes made but not yet seen in the caches.

A sync woken before the informer delivered its own last write would plan from the version it
replaced: our request written twice, or the same report again. Pods and Evictions we patched are
remembered until the cache shows a newer version (`WrittenVersions`), and the sync waits for the
event that will wake it again.

The ReplicaSet of each Eviction's pod is remembered too, so that when the pod is gone the
completion can still say whether its workload has its replicas available without it. It is
only for that message: after a restart a completion says "pod removed" without the first half.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controllers.common.written import WrittenVersions


@dataclass(slots=True)
class ResponderState:
    pods: WrittenVersions = field(default_factory=WrittenVersions)
    evictions: WrittenVersions = field(default_factory=WrittenVersions)
    # Eviction key -> the name of its pod's ReplicaSet (in the Eviction's namespace).
    replica_sets: dict[str, str] = field(default_factory=dict)

    def forget(self, key: str) -> None:
        self.evictions.forget(key)
        self.replica_sets.pop(key, None)
