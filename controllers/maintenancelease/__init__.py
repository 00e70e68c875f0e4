"""Node maintenance leases: one Lease per node, made by its first holder, and the holders' library.

`lease.py` holds the proposal's rules and `acquire` (which creates a missing lease) / `renew` /
`release` / `maintenance_lease`; `controller.py` keeps each lease owned by its node; `gate.py`
plugs the leases into the NodeMaintenance controller; `metrics.py` counts held and abandoned
leases at scrape time.
"""

from controllers.maintenancelease.controller import MaintenanceLeaseController

__all__ = ["MaintenanceLeaseController"]
