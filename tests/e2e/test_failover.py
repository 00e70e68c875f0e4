"""Leader failover, one try (`python -m bench.failover` makes five with KCM's timings): the leader is
SIGKILLed, the standby takes the lease once it has expired and goes to work, and the server never
receives writes from a manager that does not hold the lease."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.failover import Election, run_failover

# KCM's ratios (15 s / 10 s / 2 s), shrunk so the try takes seconds
ELECTION = Election(lease_duration=3.0, renew_deadline=2.0, retry_period=0.5)


async def test_the_standby_takes_over_after_the_leader_is_killed_and_never_two_write(tmp_path: Path) -> None:
    result = await run_failover(tries=1, election=ELECTION, workdir=tmp_path)
    [one] = result.tries
    assert (one.killed, one.took_over) == ("a", "b")
    # it waited the lease out: the killed leader never released it
    assert one.lease_s >= ELECTION.lease_duration - 2 * ELECTION.retry_period
    assert one.first_write_s >= one.lease_s
    assert result.two_writers == []
