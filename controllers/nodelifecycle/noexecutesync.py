"""The NoExecute taint reconcile: KCM's `doNoExecuteTaintingPass`, every 100 ms.

Each zone's queue hands out at most its rate of nodes per second, each re-checked against the
cache before its taint is written: the rate limit is what keeps a network partition from
evicting a whole zone at once. A node that cannot be tainted now goes back to its queue: one
without a Ready condition is looked at again 50 ms later, one whose write failed at once (both
still paced by the zone's rate).
"""

from __future__ import annotations

from dataclasses import dataclass

from structlog.typing import FilteringBoundLogger

from apiclient import ApiError
from controllers.nodelifecycle import metrics
from controllers.nodelifecycle.ratelimited import TimedValue
from controllers.nodelifecycle.state import NodeLifecycleState
from controllers.nodelifecycle.taints import NOT_READY_TAINT, UNREACHABLE_TAINT
from controllers.nodelifecycle.writes import NodeWrites
from controllers.nodelifecycle.zones import zone_key
from informers import Lister
from kubeutil.conditions import get_condition

NO_EXECUTE_TAINTING_PERIOD = 0.1  # Go's nodeEvictionPeriod
NO_READY_CONDITION_RETRY = 0.05  # Go retries a node without a Ready condition 50 ms later


@dataclass(kw_only=True, eq=False)
class NoExecuteTaintSync:
    """One pass over every zone's tainter."""

    node_lister: Lister
    state: NodeLifecycleState
    writes: NodeWrites
    log: FilteringBoundLogger

    async def sync(self) -> None:
        """`doNoExecuteTaintingPass`: each zone's queue hands out nodes at its rate; taint them."""
        for tainter in list(self.state.tainters.values()):
            await tainter.try_async(self.taint)

    async def taint(self, value: TimedValue) -> tuple[bool, float]:
        """The taint matching the node's Ready condition, swapped for the other one: (done, retry in)."""
        name = value.value
        node = self.node_lister.get(name)
        if node is None:
            return True, 0.0  # gone
        ready = get_condition(node.get("status"), "Ready")
        if ready is None:
            return False, NO_READY_CONDITION_RETRY
        status = ready.get("status")
        if status == "False":
            add, remove = NOT_READY_TAINT, UNREACHABLE_TAINT
        elif status == "Unknown":
            add, remove = UNREACHABLE_TAINT, NOT_READY_TAINT
        else:
            return True, 0.0  # Ready again: nothing to taint
        try:
            tainted = await self.writes.swap_node_taints(name, [add], [remove])
        except ApiError as exc:
            self.log.warning("NoExecute tainting failed, will retry", node=name, error=str(exc))
            return False, 0.0
        if tainted:
            metrics.EVICTIONS_TOTAL.labels(zone_key(node)).inc()
            self.log.info("node tainted", node=name, taint=add["key"])
        return tainted, 0.0
