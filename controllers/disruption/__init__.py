"""The disruption controller: KCM's `disruption` controller, computing PodDisruptionBudget status.

`controller` wires informers, handlers and the two queues; `budgetsync` reconciles a budget's
status and `stalepodsync` a pod's stale `DisruptionTarget`. `budget` is the arithmetic (pure),
`finders` resolves the pods' controllers to their scale, `selectors` caches the budgets' selectors.
"""

from controllers.disruption.controller import DisruptionController

__all__ = ["DisruptionController"]
