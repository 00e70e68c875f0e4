"""The node lifecycle controller (`node-lifecycle-controller`): node health, condition taints, zones.

`controller` wires the queues and loops, each reconciled by its own module: `noschedulesync`
(the node queue), `healthsync` (the health monitor), `noexecutesync` (the NoExecute tainting
pass) and `podsync` (the pod queue). They share `state` and write through `writes`. `health`
keeps the heartbeat bookkeeping, `taints` says which taints a node calls for, `labels` which
beta labels it needs, `zones` judges zone states and rates, `ratelimited` is the per-zone
rate-limited tainting queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controllers.lazy import lazy_exports

if TYPE_CHECKING:
    from controllers.nodelifecycle.controller import NodeLifecycleController

__getattr__ = lazy_exports(__name__, {"NodeLifecycleController": "controllers.nodelifecycle.controller"})
__all__ = ["NodeLifecycleController"]
