"""The disruption controller: KCM's `disruption` controller, computing PodDisruptionBudget status.

`budget` is the arithmetic (pure), `finders` resolves the pods' controllers to their scale, and
`controller` wires informers, handlers, the status writes and the stale `DisruptionTarget` worker.
"""

from controllers.disruption.controller import DisruptionController

__all__ = ["DisruptionController"]
