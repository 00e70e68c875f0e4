"""The NodeMaintenance controller's lease seam, and the gate that backs it with real node leases.

The node sync asks its `LeaseGate` before it cordons or drains a node, with the holder identity
`aiokcm/nodemaintenance/<name>`; a refused node is reported as `WaitingForLease` and retried. It
releases once the maintenance no longer applies to the node (spec turned off, selector changed,
object deleted). `NoLeaseGate` grants everything: the behaviour without the `NodeMaintenanceLease`
gate. `MaintenanceLeaseGate` grants by holding the node's Lease under the proposal's rules
(`lease.acquire`); refusing reports who holds it instead. The seam lives here, beside the leases,
and not in the controller, so that the gate and the controller depend on one library instead of
on each other.

Renewal while working: node syncs are irregular (a cordon-only maintenance may not sync again for
hours), so the gate remembers what it holds and `run()` renews each claim every third of its
duration. The node sync calls `acquire` often (every pod event on a draining node); a claim renewed
less than a third of a duration ago is granted from memory instead of writing the Lease again. The
price: an administrator's takeover with kubectl is noticed at the next renewal, not at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

import anyio
import structlog

from apiclient import ApiError, KubeClient
from kubeutil.timestamps import utcnow
from nodemaintenancelease import lease

log = structlog.get_logger()

DEFAULT_GATE_DURATION_SECONDS = 300


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


class MaintenanceLeaseGate:
    def __init__(
        self,
        client: KubeClient,
        *,
        duration_seconds: int = DEFAULT_GATE_DURATION_SECONDS,
        clock: lease.Clock = utcnow,
    ) -> None:
        lease.check_duration(duration_seconds)
        self.client = client
        self.duration_seconds = duration_seconds
        self.clock = clock
        self.held: dict[tuple[str, str], datetime] = {}  # (node, holder) -> when last written

    @property
    def renew_interval(self) -> float:
        return self.duration_seconds / 3.0

    async def acquire(self, *, node: str, holder: str) -> LeaseDecision:
        last = self.held.get((node, holder))
        if last is not None and self.clock() - last < timedelta(seconds=self.renew_interval):
            return LeaseDecision(True, holder)
        try:
            state = await lease.acquire(
                self.client, node, holder=holder, duration_seconds=self.duration_seconds, clock=self.clock
            )
        except lease.LeaseHeldError as exc:
            self.held.pop((node, holder), None)
            return LeaseDecision(False, exc.state.holder)
        self.held[(node, holder)] = state.renew_time or self.clock()
        return LeaseDecision(True, holder)

    async def release(self, *, node: str, holder: str) -> None:
        self.held.pop((node, holder), None)
        await lease.release(self.client, node, holder=holder, clock=self.clock)

    async def renew_all(self) -> None:
        """Renew every claim held; forget the ones lost (the next node sync asks again)."""
        for node, holder in list(self.held):
            try:
                state = await lease.renew(
                    self.client, node, holder=holder, duration_seconds=self.duration_seconds, clock=self.clock
                )
            except lease.LeaseLostError as exc:
                log.warning("node maintenance lease lost", node=node, holder=holder, error=str(exc))
                self.held.pop((node, holder), None)
                continue
            except (ApiError, OSError) as exc:
                log.info("node maintenance lease renewal failed, retrying", node=node, error=str(exc))
                continue
            if (node, holder) in self.held:  # not released while we were writing
                self.held[(node, holder)] = state.renew_time or self.clock()

    async def run(self) -> None:
        """Renew in the background until cancelled (started by the NodeMaintenance controller's `run`)."""
        while True:
            await anyio.sleep(self.renew_interval)
            await self.renew_all()
