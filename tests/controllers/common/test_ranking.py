"""Deletion order as KCM's ActivePodsWithRanks: each rule decides when the ones before it tie."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controllers.common.pods import deletion_cost
from controllers.common.ranking import (
    pods_to_delete,
    ranks_by_related_pods_on_same_node,
    sort_active_pods_with_ranks,
)
from tests.controllers.common.podfactory import make_pod

NOW = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)
T0 = NOW - timedelta(days=1)


def names(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def order(*pods: dict[str, Any], ranks: list[int] | None = None) -> list[str]:
    return names(sort_active_pods_with_ranks(list(pods), ranks or [0] * len(pods), NOW))


def test_unassigned_before_assigned() -> None:
    assert order(make_pod("a", node="n1", phase="Running"), make_pod("b")) == ["b", "a"]


def test_pending_before_unknown_before_running() -> None:
    pods = [
        make_pod("r", node="n", phase="Running"),
        make_pod("u", node="n", phase="Unknown"),
        make_pod("p", node="n"),
    ]
    assert order(*pods) == ["p", "u", "r"]


def test_not_ready_before_ready() -> None:
    ready = make_pod("ready", node="n", phase="Running", ready_since=T0)
    assert order(ready, make_pod("notready", node="n", phase="Running")) == ["notready", "ready"]


def test_lower_deletion_cost_first_and_invalid_cost_is_zero() -> None:
    pods = [
        make_pod("high", node="n", phase="Running", cost="100"),
        make_pod("low", node="n", phase="Running", cost="-5"),
        make_pod("bad", node="n", phase="Running", cost="1_0"),
    ]
    assert order(*pods) == ["low", "bad", "high"]


@pytest.mark.parametrize(
    ("cost", "expected"),
    [("10", 10), ("-5", -5), ("0", 0), ("+10", 0), ("008", 0), ("2147483648", 0), ("1_0", 0)],
)
def test_deletion_cost_as_get_deletion_cost_from_pod_annotations(cost: str, expected: int) -> None:
    """A leading `+` or zero is refused before `ParseInt`, so those pods cost 0."""
    assert deletion_cost(make_pod("p", cost=cost)) == expected


def test_doubled_up_pods_first() -> None:
    a = make_pod("a", node="n1", phase="Running")
    b = make_pod("b", node="n2", phase="Running")
    related = [a, b, make_pod("x", node="n2"), make_pod("y", node="n2", deleting=True)]
    ranks = ranks_by_related_pods_on_same_node([a, b], related)
    assert ranks == [1, 2]  # the terminating pod does not count
    assert order(a, b, ranks=ranks) == ["b", "a"]


def test_ready_more_recently_first_in_log_buckets_with_uid_tiebreak() -> None:
    old = make_pod("old", uid="a", node="n", phase="Running", ready_since=NOW - timedelta(hours=10))
    new = make_pod("new", uid="z", node="n", phase="Running", ready_since=NOW - timedelta(minutes=1))
    assert order(old, new) == ["new", "old"]
    # 100 s and 110 s ago fall in the same power-of-two bucket of nanoseconds: the UID decides.
    p1 = make_pod("p1", uid="b", node="n", phase="Running", ready_since=NOW - timedelta(seconds=100))
    p2 = make_pod("p2", uid="a", node="n", phase="Running", ready_since=NOW - timedelta(seconds=110))
    assert order(p1, p2) == ["p2", "p1"]


def test_more_restarts_first_then_newer_first() -> None:
    calm = make_pod("calm", node="n", phase="Running", created=T0)
    crashy = make_pod("crashy", node="n", phase="Running", created=T0, restarts=7)
    assert order(calm, crashy) == ["crashy", "calm"]
    older = make_pod("older", uid="a", node="n", phase="Running", created=NOW - timedelta(days=30))
    newer = make_pod("newer", uid="z", node="n", phase="Running", created=NOW - timedelta(seconds=5))
    assert order(older, newer) == ["newer", "older"]


def test_missing_creation_time_sorts_first() -> None:
    dated = make_pod("dated", node="n", phase="Running", created=NOW - timedelta(seconds=5))
    assert order(dated, make_pod("undated", node="n", phase="Running")) == ["undated", "dated"]


def test_pods_to_delete_takes_the_head_of_the_ranking() -> None:
    pods = [make_pod(f"r{i}", node="n", phase="Running", ready_since=T0) for i in range(3)]
    pods.append(make_pod("pending"))
    assert names(pods_to_delete(pods, pods, 1, NOW)) == ["pending"]
    assert len(pods_to_delete(pods, pods, 4, NOW)) == 4
