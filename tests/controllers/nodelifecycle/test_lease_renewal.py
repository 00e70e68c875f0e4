"""Whether a Lease's renewTime is a new heartbeat: later in time, whatever its spelling."""

from __future__ import annotations

import pytest

from controllers.nodelifecycle.health import renewed_later


@pytest.mark.parametrize(
    ("saved", "observed", "later"),
    [
        (None, None, False),
        (None, "2026-11-28T04:01:41.000000Z", True),  # the first heartbeat seen
        ("2026-11-28T04:01:41.000000Z", None, False),  # the Lease went away: no heartbeat
        ("2026-11-28T04:01:41.000000Z", "2026-11-28T04:01:41.000000Z", False),
        ("2026-11-28T04:01:41.000000Z", "2026-11-28T04:01:51.000000Z", True),
        ("2026-11-28T04:01:51.000000Z", "2026-11-28T04:01:41.000000Z", False),  # an older one
        ("2026-11-28T23:59:59.999999Z", "2026-11-29T00:00:00.000000Z", True),  # across midnight
        # other spellings of the same instants: compared as times, not as text
        ("2026-11-28T04:01:41Z", "2026-11-28T04:01:40.500000Z", False),
        ("2026-11-28T04:01:41.5Z", "2026-11-28T04:01:41.400000Z", False),
        ("2026-11-28T05:01:41.000000+01:00", "2026-11-28T04:01:41.000001Z", True),
        ("2026-11-28T05:01:41.000000+01:00", "2026-11-28T04:01:40.999999Z", False),
        ("2026-11-28T04:01:41.000000Z", "2026-11-28T04:01:40.000000-01:00", True),
    ],
)
def test_a_renewal_counts_when_it_is_later(saved: str | None, observed: str | None, later: bool) -> None:
    assert renewed_later(saved, observed) is later
