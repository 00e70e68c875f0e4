"""The node lifecycle controller (`node-lifecycle-controller`): node health, condition taints, zones.

`controller` wires the queues and loops, each reconciled by its own module: `noschedulesync`
(the node queue), `healthsync` (the health monitor), `noexecutesync` (the NoExecute tainting
pass) and `podsync` (the pod queue). They share `state` and write through `writes`. `health`
keeps the heartbeat bookkeeping, `taints` says which taints a node calls for, `labels` which
beta labels it needs, `zones` judges zone states and rates, `ratelimited` is the per-zone
rate-limited tainting queue.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from controllers.nodelifecycle.controller import NodeLifecycleController


def __getattr__(name: str) -> Any:
    """The controller is imported on first use, so reading this package's flag configuration
    (the command line's parser does) does not load the API client."""
    if name == "NodeLifecycleController":
        return importlib.import_module("controllers.nodelifecycle.controller").NodeLifecycleController
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["NodeLifecycleController"]
