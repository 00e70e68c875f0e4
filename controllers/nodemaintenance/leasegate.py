"""The seam for node maintenance leases: ask before disrupting a node, release after.

The node sync asks the gate for each maintenance that cordons or drains a node before doing either,
with the holder identity `aiokcm/nodemaintenance/<name>`; a refused node is reported as
`WaitingForLease` and retried. It releases once the maintenance is no longer applied to the node
(spec turned off, selector changed, object deleted). The default gate grants everything, which is
the behaviour without the lease controller; the lease work plugs its own in through the
controller's `lease_gate` argument or the option `nodemaintenance.lease_gate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class LeaseDecision:
    granted: bool
    holder: str | None = None  # who holds it instead, when not granted (for the status and events)


@runtime_checkable
class LeaseGate(Protocol):
    async def acquire(self, *, node: str, holder: str) -> LeaseDecision:
        """Take or renew the node's lease for `holder`; never blocks waiting for another holder."""
        ...

    async def release(self, *, node: str, holder: str) -> None:
        """Give the node's lease back if `holder` has it; a no-op otherwise."""
        ...


class NoLeaseGate:
    """No coordination: every maintenance may disrupt every node it selects."""

    async def acquire(self, *, node: str, holder: str) -> LeaseDecision:
        return LeaseDecision(True, holder)

    async def release(self, *, node: str, holder: str) -> None:
        return None
