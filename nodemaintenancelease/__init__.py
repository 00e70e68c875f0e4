"""Node maintenance leases: one Lease per node that every disruptive actor takes before acting.

One library for every holder, so they all agree on what "held" means: the `aiokcm lease` CLI, the
NodeMaintenance controller (through its lease gate) and the maintenance-lease controller that makes
every node's lease (paced) and keeps it owned by its node. It sits below `controllers/` so that
those controllers share it without importing each other.

`lease.py` holds the proposal's rules, the namespace, `create_lease` (the one create, the
controller's and a first holder's) and `acquire` (which creates a lease still missing) / `renew` /
`release` / `maintenance_lease`; `gate.py` holds the NodeMaintenance controller's seam
(`LeaseGate`, `LeaseDecision`, `NoLeaseGate`) and `MaintenanceLeaseGate`, which backs it with leases.
"""
