"""The ReplicaSet controller: KCM's `replicaset` controller, answering KEP-4212 evacuation requests.

`controller` wires informers and handlers; `sync` is the reconcile.
"""

from controllers.replicaset.controller import ReplicaSetController

__all__ = ["ReplicaSetController"]
