"""The maintenance-lease controller: each node's maintenance Lease, once made, owned by its node.

`controller.py` wires the informers and the queue, `sync.py` repairs the owner reference,
`metrics.py` counts held and abandoned leases at scrape time. The holders' rules and `acquire` / `renew` / `release` are the `nodemaintenancelease`
library's, which every holder (the CLI, the NodeMaintenance controller's gate) shares with this one.
"""

from controllers.maintenancelease.controller import MaintenanceLeaseController

__all__ = ["MaintenanceLeaseController"]
