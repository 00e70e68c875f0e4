"""Declarative node maintenance (KEP-4212): cordon, EvacuationRequest drain, eviction fallback.

See `controller.py` for the wiring and queues, `nodesync.py` and `maintenancesync.py` for the two
reconciles and `state.py` for what they share, `cordon.py` and `drain.py` for the two actions
(with `kubectl drain`'s safety), `workload.py` for who answers an EvacuationRequest, `rollout.py`
for which nodes start, `status.py` for progress. The lease seam it asks before disrupting a node
(`LeaseGate`) is in `nodemaintenancelease`, shared with the lease CLI and the lease controller.
"""

from controllers.nodemaintenance.controller import NodeMaintenanceController

__all__ = ["NodeMaintenanceController"]
