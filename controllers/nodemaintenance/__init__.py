"""Declarative node maintenance (KEP-4212): cordon, EvacuationRequest drain, eviction fallback.

See `controller.py` for the wiring and queues, `nodesync.py` and `maintenancesync.py` for the two
reconciles and `state.py` for what they share, `cordon.py` and `drain.py` for the two actions
(with `kubectl drain`'s safety), `workload.py` for who answers an EvacuationRequest, `rollout.py`
for which nodes start, `status.py` for progress, `evictionrequests.py` for draining through
EvictionRequests instead of the pod condition (`spec.evictionAPI: EvictionRequest`). The lease seam it asks before disrupting a node
(`LeaseGate`) is in `nodemaintenancelease`, shared with the lease CLI and the lease controller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controllers.lazy import lazy_exports

if TYPE_CHECKING:
    from controllers.nodemaintenance.controller import NodeMaintenanceController

__getattr__ = lazy_exports(__name__, {"NodeMaintenanceController": "controllers.nodemaintenance.controller"})
__all__ = ["NodeMaintenanceController"]
