"""What the node lifecycle controller's loops share: each node's health and each zone's tainter.

The health monitor writes both; the pod queue reads the health to mark a new pod on a failed node
not ready, and the NoExecute tainting pass drains the tainters at their zone's rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controllers.nodelifecycle.health import NodeHealth
from controllers.nodelifecycle.ratelimited import RateLimitedTimedQueue


@dataclass(slots=True)
class NodeLifecycleState:
    """Per node name its health; per zone its rate-limited queue of nodes to taint NoExecute."""

    health: dict[str, NodeHealth] = field(default_factory=dict)
    tainters: dict[str, RateLimitedTimedQueue] = field(default_factory=dict)
