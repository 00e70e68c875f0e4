"""The maintenance-lease controller: every node's maintenance Lease made, at a pace, and owned by its node.

`controller.py` wires the informers and the two queues, `createsync.py` makes a missing lease (each
create paced by the controller's own token bucket, then its own client), `ownersync.py` repairs the
owner reference of a lease made without it, `state.py` is the backlog both sides share, `metrics.py`
counts held, abandoned and missing leases at scrape time and the creates as they happen. The holders'
rules and `acquire` / `renew` / `release` are the `nodemaintenancelease` library's, which every
holder (the CLI, the NodeMaintenance controller's gate) shares with this one.
"""

from controllers.maintenancelease.controller import MaintenanceLeaseController

__all__ = ["MaintenanceLeaseController"]
