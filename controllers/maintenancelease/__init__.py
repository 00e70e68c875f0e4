"""Node maintenance leases: the controller keeping one Lease per node, and the holders' library.

`lease.py` holds the proposal's rules and `acquire` / `renew` / `release` / `maintenance_lease`;
`controller.py` keeps the namespace and the leases; `gate.py` plugs the leases into the
NodeMaintenance controller; `metrics.py` counts held and abandoned leases at scrape time.
"""

from controllers.maintenancelease.controller import MaintenanceLeaseController

__all__ = ["MaintenanceLeaseController"]
