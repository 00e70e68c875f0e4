"""Expectations gate syncs until the informer saw the controller's own writes, or 5 minutes passed."""

from __future__ import annotations

from controllers.common.expectations import ControllerExpectations, UIDTrackingControllerExpectations


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_unknown_key_is_satisfied() -> None:
    assert ControllerExpectations().satisfied_expectations("ns/rs")


def test_creations_must_all_be_observed() -> None:
    exp = ControllerExpectations(clock=Clock())
    exp.expect_creations("ns/rs", 2)
    assert not exp.satisfied_expectations("ns/rs")
    exp.creation_observed("ns/rs")
    assert not exp.satisfied_expectations("ns/rs")
    exp.creation_observed("ns/rs")
    assert exp.satisfied_expectations("ns/rs")


def test_lowering_for_skipped_creations_satisfies() -> None:
    exp = ControllerExpectations(clock=Clock())
    exp.expect_creations("k", 7)
    exp.creation_observed("k")
    exp.lower_expectations("k", 6, 0)
    assert exp.satisfied_expectations("k")


def test_expectations_expire_after_five_minutes() -> None:
    clock = Clock()
    exp = ControllerExpectations(clock=clock)
    exp.expect_creations("k", 3)
    clock.now += 300.0
    assert not exp.satisfied_expectations("k")
    clock.now += 0.5
    assert exp.satisfied_expectations("k")


def test_uid_tracking_counts_each_expected_pod_once() -> None:
    exp = UIDTrackingControllerExpectations(clock=Clock())
    exp.expect_deletions("k", ["ns/a", "ns/b"])
    exp.deletion_observed("k", "ns/other")  # not ours: ignored
    exp.deletion_observed("k", "ns/a")
    exp.deletion_observed("k", "ns/a")  # seen twice (update with deletionTimestamp, then delete)
    assert not exp.satisfied_expectations("k")
    exp.deletion_observed("k", "ns/b")
    assert exp.satisfied_expectations("k")
    exp.delete_expectations("k")
    assert exp.get_uids("k") is None and exp.get_expectations("k") is None
