"""Declarative node maintenance (KEP-4212): cordon, EvacuationRequest drain, eviction fallback.

See `controller.py` for the wiring and queues, `nodesync.py` and `maintenancesync.py` for the two
reconciles and `state.py` for what they share, `cordon.py` and `drain.py` for the two actions
(with `kubectl drain`'s safety), `workload.py` for who answers an EvacuationRequest, `rollout.py`
for which nodes start, `status.py` for progress. The lease seam it asks before disrupting a node
(`LeaseGate`) is in `nodemaintenancelease`, shared with the lease CLI and the lease controller.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from controllers.nodemaintenance.controller import NodeMaintenanceController


def __getattr__(name: str) -> Any:
    """The controller is imported on first use, so reading this package's flag configuration
    (the command line's parser does) does not load the API client."""
    if name == "NodeMaintenanceController":
        return importlib.import_module("controllers.nodemaintenance.controller").NodeMaintenanceController
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["NodeMaintenanceController"]
