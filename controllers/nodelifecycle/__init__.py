"""The node lifecycle controller (`node-lifecycle-controller`): node health, condition taints, zones.

`controller` wires the loops; `health` keeps the heartbeat bookkeeping; `zones` judges zone
states and rates; `ratelimited` is the per-zone rate-limited tainting queue.
"""

from controllers.nodelifecycle.controller import NodeLifecycleController

__all__ = ["NodeLifecycleController"]
