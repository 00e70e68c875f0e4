"""The NoExecute taint reconcile: KCM's `doNoExecuteTaintingPass`, every 100 ms.

Each zone's queue hands out at most its rate of nodes per second, each re-checked against the
cache before its taint is written: the rate limit is what keeps a network partition from
evicting a whole zone at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from structlog.typing import FilteringBoundLogger

from apiclient import ApiError
from controllers.nodelifecycle import metrics
from controllers.nodelifecycle.ratelimited import TimedValue
from controllers.nodelifecycle.state import NodeLifecycleState
from controllers.nodelifecycle.taints import NOT_READY_TAINT, UNREACHABLE_TAINT
from controllers.nodelifecycle.writes import NodeWrites
from informers import Lister
from kubeutil.conditions import get_condition
from kubeutil.taints import Taint

NO_EXECUTE_TAINTING_PERIOD = 0.1  # Go's nodeEvictionPeriod


def _ready_status(node: Mapping[str, Any]) -> str | None:
    cond = get_condition(node.get("status"), "Ready")
    return str(cond.get("status")) if cond is not None else None


@dataclass(kw_only=True, eq=False)
class NoExecuteTaintSync:
    """One pass over every zone's tainter."""

    node_lister: Lister
    state: NodeLifecycleState
    writes: NodeWrites
    log: FilteringBoundLogger

    async def sync(self) -> None:
        """`doNoExecuteTaintingPass`: each zone's queue hands out nodes at its rate; taint them."""
        for zone, tainter in list(self.state.tainters.items()):
            pending: list[tuple[str, Taint, Taint]] = []

            def decide(
                value: TimedValue, pending: list[tuple[str, Taint, Taint]] = pending
            ) -> tuple[bool, float]:
                node = self.node_lister.get(value.value)
                if node is None:
                    return True, 0.0
                status = _ready_status(node)
                if status == "False":
                    pending.append((value.value, NOT_READY_TAINT, UNREACHABLE_TAINT))
                elif status == "Unknown":
                    pending.append((value.value, UNREACHABLE_TAINT, NOT_READY_TAINT))
                return True, 0.0  # Ready again (or no condition): nothing to taint

            tainter.try_(decide)
            for name, add, remove in pending:
                try:
                    if await self.writes.swap_node_taints(name, [add], [remove]):
                        metrics.EVICTIONS_TOTAL.labels(zone).inc()
                        self.log.info("node tainted", node=name, taint=add["key"])
                except ApiError as exc:
                    self.log.warning("NoExecute tainting failed, will retry", node=name, error=str(exc))
                    tainter.add(name)
