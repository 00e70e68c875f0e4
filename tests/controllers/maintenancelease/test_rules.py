"""The proposal's rules on lease objects, without a server: expiry with the 3 s skew, kubeadm, limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller_manager.lease_cli import build_parser, status_row
from controller_manager.options import UsageError
from controllers.maintenancelease.metrics import count_leases
from kubeutil.timestamps import format_micro_time
from nodemaintenancelease import lease

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)


def obj(
    holder: str | None,
    *,
    renew: datetime | None = T0,
    duration: int | None = 10,
    acquired: datetime | None = T0,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if holder is not None:
        spec["holderIdentity"] = holder
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    if renew is not None:
        spec["renewTime"] = format_micro_time(renew)
    if acquired is not None:
        spec["acquireTime"] = format_micro_time(acquired)
    return {"metadata": {"name": "node-1", "resourceVersion": "7"}, "spec": spec}


def test_expired_only_after_duration_plus_three_seconds_of_skew() -> None:
    state = lease.LeaseState.from_obj(obj("agent", duration=10))
    assert state.held(T0 + timedelta(seconds=12.999))
    assert not state.held(T0 + timedelta(seconds=13))
    assert state.abandoned(T0 + timedelta(seconds=13))
    assert not state.abandoned(T0 + timedelta(seconds=12))


def test_kubeadm_holder_always_holds_whatever_the_times_say() -> None:
    state = lease.LeaseState.from_obj(obj("kubeadm-alice", renew=None, duration=None))
    assert state.held(T0 + timedelta(days=365))
    assert not state.abandoned(T0 + timedelta(days=365))
    assert state.held_by_other("agent", T0)


def test_free_lease_and_released_lease_are_not_held() -> None:
    assert not lease.LeaseState.from_obj(obj(None, duration=None)).held(T0)
    assert not lease.LeaseState.from_obj(obj(None, duration=None)).abandoned(T0)


def test_clients_never_take_the_kubeadm_prefix_and_durations_stop_at_one_hour() -> None:
    with pytest.raises(lease.ReservedHolderError, match="reserved for administrators"):
        lease.check_client_holder("kubeadm-bob")
    lease.check_client_holder("reboot-agent/node-1")
    lease.check_duration(3600)
    with pytest.raises(lease.InvalidDurationError, match="at most 3600s"):
        lease.check_duration(3601)
    with pytest.raises(lease.InvalidDurationError):
        lease.check_duration(0)


def test_cli_rejects_a_duration_over_an_hour() -> None:
    with pytest.raises(UsageError, match="at most 3600s"):
        build_parser().parse_args(["lease", "acquire", "node-1", "--holder", "x", "--duration", "2h"])
    args = build_parser().parse_args(["lease", "acquire", "node-1", "--holder", "x", "--duration", "10m"])
    assert args.duration == 600


def test_metrics_count_held_and_abandoned_by_holder_prefix() -> None:
    leases = [
        obj("aiokcm/nodemaintenance/m1"),
        obj("aiokcm/nodemaintenance/m2", renew=T0 - timedelta(hours=1)),
        obj("kubeadm-alice", renew=None, duration=None),
        obj(None, duration=None),
    ]
    held, abandoned = count_leases(leases, T0)
    assert held == {"aiokcm/nodemaintenance": 1, "kubeadm": 1}
    assert abandoned == {"aiokcm/nodemaintenance": 1}


def test_status_row_shows_expiry_and_abandonment() -> None:
    row = status_row(lease.LeaseState.from_obj(obj("agent", duration=600)), T0 + timedelta(seconds=60))
    assert row == ("node-1", "agent", "60s", "9m3s", "no")
    row = status_row(lease.LeaseState.from_obj(obj("agent", duration=10)), T0 + timedelta(minutes=5))
    assert row[3].startswith("-") and row[4] == "yes"
    row = status_row(lease.LeaseState.from_obj(obj("kubeadm-alice", duration=None)), T0)
    assert row[3] == "never" and row[4] == "no"
