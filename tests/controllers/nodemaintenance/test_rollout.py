"""Which nodes a maintenance starts: its own limit and the cluster-wide guard, case by case."""

from __future__ import annotations

import pytest

from controllers.nodemaintenance.api import Maintenance
from controllers.nodemaintenance.rollout import (
    Candidate,
    Cluster,
    LimitError,
    Working,
    admit,
    from_status,
    scaled,
)

ROOMY = Cluster(nodes=10, unschedulable=0, max_unschedulable=10)


def c(name: str, state: str = "", unschedulable: bool = False) -> Candidate:
    """`state`: "" (not started), "started" (in progress) or "done"."""
    return Candidate(
        name,
        started=state in ("started", "done"),
        done=state == "done",
        unschedulable=unschedulable or state in ("started", "done"),
    )


@pytest.mark.parametrize(
    ("candidates", "limit", "cluster", "override", "new", "waiting"),
    [
        # the default: one node at a time, in name order whatever order they come in
        ([c("n3"), c("n1"), c("n2")], 1, ROOMY, False, ("n1",), {"n2", "n3"}),
        # one in progress: nothing new
        ([c("n1", "started"), c("n2"), c("n3")], 1, ROOMY, False, (), {"n2", "n3"}),
        # the first is done (drained, still cordoned): the next starts
        ([c("n1", "done"), c("n2"), c("n3")], 1, ROOMY, False, ("n2",), {"n3"}),
        # all done: nothing waits
        ([c("n1", "done"), c("n2", "done")], 1, ROOMY, False, (), set()),
        # a higher limit starts that many
        ([c("n1"), c("n2"), c("n3"), c("n4")], 2, ROOMY, False, ("n1", "n2"), {"n3", "n4"}),
        ([c("n1", "started"), c("n2"), c("n3")], 2, ROOMY, False, ("n2",), {"n3"}),
        # a limit lowered below what is in progress starts nothing and gives nothing back
        ([c("n1", "started"), c("n2", "started"), c("n3")], 1, ROOMY, False, (), {"n3"}),
        # the cluster guard: 2 of 4 nodes may be unschedulable, one already is (someone else's)
        ([c("n1"), c("n2")], 2, Cluster(4, 1, 2), False, ("n1",), {"n2"}),
        # a node cordoned already costs nothing under the guard
        ([c("n1", unschedulable=True), c("n2")], 2, Cluster(4, 2, 2), False, ("n1",), {"n2"}),
        # the guard at its cap: nothing new, even within the maintenance's own limit
        ([c("n1"), c("n2")], 1, Cluster(4, 2, 2), False, (), {"n1", "n2"}),
        # ... unless the maintenance overrides it; its own limit still holds
        ([c("n1"), c("n2")], 1, Cluster(4, 2, 2), True, ("n1",), {"n2"}),
        # a cap of 0: nothing may be cordoned
        ([c("n1")], 1, Cluster(4, 0, 0), False, (), {"n1"}),
    ],
)
def test_admit(
    candidates: list[Candidate],
    limit: int,
    cluster: Cluster,
    override: bool,
    new: tuple[str, ...],
    waiting: set[str],
) -> None:
    got = admit(candidates, limit=limit, cluster=cluster, override=override)
    assert got.new == new
    assert set(got.waiting) == waiting
    assert got.working == {x.name for x in candidates if x.started} | set(new)
    in_progress = sum(1 for x in candidates if x.started and not x.done)
    assert got.in_progress == in_progress + len(new)


def test_the_guard_says_why_and_only_when_it_is_what_holds_back() -> None:
    held = admit([c("n1"), c("n2")], limit=1, cluster=Cluster(6, 3, 3))
    assert "would make 4 of 6 nodes unschedulable; the cluster allows 3" in held.held_by_cluster
    assert held.waiting["n1"] == held.held_by_cluster
    assert held.held == {"n1"}  # n2 waits for its turn behind n1, not for the cluster
    # waiting for its own turn is not the cluster's doing
    turn = admit([c("n1", "started"), c("n2")], limit=1, cluster=Cluster(6, 3, 3))
    assert turn.held_by_cluster == ""
    assert "1 of at most 1 nodes in progress" in turn.waiting["n2"]


def test_a_frozen_maintenance_starts_nothing_but_keeps_what_it_started() -> None:
    got = admit([c("n1", "started"), c("n2")], limit=5, cluster=ROOMY, frozen=True)
    assert got.new == () and got.working == {"n1"} and "invalid" in got.waiting["n2"]


@pytest.mark.parametrize(
    ("value", "total", "minimum", "expected"),
    [
        (1, 6, 1, 1),
        (3, 6, 1, 3),
        ("50%", 6, 1, 3),
        ("50%", 5, 1, 2),  # rounds down, as maxUnavailable
        ("10%", 6, 1, 1),  # but never below one node
        ("100%", 7, 1, 7),
        ("50%", 1, 0, 1),
        ("0%", 6, 0, 0),
        (0, 6, 0, 0),
    ],
)
def test_scaled(value: int | str, total: int, minimum: int, expected: int) -> None:
    assert scaled(value, total, field_name="f", minimum=minimum) == expected


@pytest.mark.parametrize("value", [0, -1, "0%", "101%", "abc", "2", "1.5", 1.5, True, None, [1]])
def test_scaled_rejects(value: object) -> None:
    with pytest.raises(LimitError):
        scaled(value, 6, field_name="spec.maxConcurrentNodes")


def test_an_invalid_limit_is_reported_and_the_default_used_meanwhile() -> None:
    m = Maintenance.from_obj(
        {"metadata": {"name": "m"}, "spec": {"cordon": True, "maxConcurrentNodes": "lots"}}
    )
    assert m.invalid.startswith("spec.maxConcurrentNodes")
    assert m.concurrent_nodes(6) == 1
    ok = Maintenance.from_obj(
        {"metadata": {"name": "m"}, "spec": {"cordon": True, "maxConcurrentNodes": "50%"}}
    )
    assert ok.invalid == "" and ok.concurrent_nodes(6) == 3
    assert (
        Maintenance.from_obj({"metadata": {"name": "m"}, "spec": {"cordon": True}}).concurrent_nodes(6) == 1
    )


def test_what_a_maintenance_started_is_read_back_from_its_status() -> None:
    status = {
        "nodes": {
            "a": {"phase": "Drained"},
            "b": {"phase": "Draining"},
            "c": {"phase": "Cordoned"},
            "d": {"phase": "Waiting"},
            "e": {"phase": "Planning"},
            "f": None,
        }
    }
    assert from_status("u", status) == Working("u", frozenset("abc"), frozenset("ab"))
    assert from_status("u", None) == Working("u")
