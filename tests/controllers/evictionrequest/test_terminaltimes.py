"""The deletion of a target is remembered past its removal from the cache, for a minute only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controllers.evictionrequest.rules import should_defer_completion
from controllers.evictionrequest.target import TargetInfo
from controllers.evictionrequest.terminaltimes import TerminalTimes

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TARGET = {"pod": {"name": "web-0", "uid": "11111111-2222-3333-4444-555555555555"}}


def test_a_pod_gone_from_the_cache_still_gets_its_responder_the_grace() -> None:
    times = TerminalTimes()
    times.record(TARGET["pod"]["uid"], T0, T0)
    gone = TargetInfo(TARGET, None, None, times.get(TARGET["pod"]["uid"]))
    active = {"name": "imperative-eviction.k8s.io/evictor", "startTime": "2026-01-01T00:00:00Z"}
    assert should_defer_completion(T0 + timedelta(seconds=2), active, gone) == 3.0
    assert should_defer_completion(T0 + timedelta(seconds=6), active, gone) is None
    # a responder that already reported has nothing to wait for
    assert should_defer_completion(T0, {**active, "completionTime": "2026-01-01T00:00:00Z"}, gone) is None


def test_a_pod_never_seen_deleted_gets_no_grace() -> None:
    gone = TargetInfo(TARGET, None, None, TerminalTimes().get(TARGET["pod"]["uid"]))
    assert should_defer_completion(T0, {"name": "x"}, gone) is None


def test_entries_older_than_a_minute_are_dropped_as_new_ones_come() -> None:
    times = TerminalTimes()
    times.record("old", T0, T0)
    times.record("new", T0 + timedelta(minutes=2), T0 + timedelta(minutes=2))
    assert times.get("old") is None
    assert times.get("new") == T0 + timedelta(minutes=2)


def test_a_manager_clock_ahead_of_the_servers_still_gives_the_grace() -> None:
    """The pod's deletionTimestamp is the server's clock; seen 10 min later by ours (skew), the
    grace runs from our sighting, not from a moment already long past by our clock."""
    times = TerminalTimes()
    seen = T0 + timedelta(minutes=10)
    times.record(TARGET["pod"]["uid"], seen, seen)
    pod = {
        "metadata": {
            "name": "web-0",
            "uid": TARGET["pod"]["uid"],
            "deletionTimestamp": "2026-01-01T00:00:00Z",
        }
    }
    terminating = TargetInfo(TARGET, pod, None, times.get(TARGET["pod"]["uid"]))
    active = {"name": "surge.aiokcm.io/replicaset", "startTime": "2026-01-01T00:00:00Z"}
    assert should_defer_completion(seen + timedelta(seconds=1), active, terminating) == 4.0
    # without the sighting, the server's timestamp alone: long past, no grace
    assert should_defer_completion(seen, active, TargetInfo(TARGET, pod, None, None)) is None
