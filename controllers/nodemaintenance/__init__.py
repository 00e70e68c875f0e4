"""Declarative node maintenance (KEP-4212): cordon, EvacuationRequest drain, eviction fallback.

See `controller.py` for the wiring and queues, `sync.py` for the reconciles, `cordon.py` and
`drain.py` for the two actions (with `kubectl drain`'s safety), `workload.py` for who answers an
EvacuationRequest, `status.py` for progress, `leasegate.py` for the lease seam.
"""

from controllers.nodemaintenance.controller import NodeMaintenanceController
from controllers.nodemaintenance.leasegate import LeaseDecision, LeaseGate, NoLeaseGate

__all__ = ["LeaseDecision", "LeaseGate", "NoLeaseGate", "NodeMaintenanceController"]
