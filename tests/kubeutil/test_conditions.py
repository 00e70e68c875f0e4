"""`set_status_condition` as apimachinery's `meta.SetStatusCondition`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kubeutil.conditions import condition_index, set_status_condition
from kubeutil.timestamps import format_time

THEN = datetime(2024, 1, 1, tzinfo=UTC)
NOW = THEN + timedelta(hours=1)


def new(status: str, reason: str = "R", generation: int = 1) -> dict[str, Any]:
    return {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": "",
        "observedGeneration": generation,
    }


def cond(status: str, reason: str = "R", when: datetime = THEN, generation: int = 1) -> dict[str, Any]:
    return {**new(status, reason, generation), "lastTransitionTime": format_time(when)}


def test_a_new_condition_is_appended_with_now() -> None:
    conditions: list[dict[str, Any]] = [{"type": "Other", "status": "True"}]
    assert set_status_condition(conditions, new("True"), NOW)
    assert conditions[1] == cond("True", when=NOW)
    assert condition_index({"conditions": conditions}, "Ready") == 1


def test_same_status_keeps_the_transition_time_but_updates_the_rest() -> None:
    conditions = [cond("True")]
    assert set_status_condition(conditions, new("True", reason="Other", generation=2), NOW)
    assert conditions == [cond("True", reason="Other", generation=2, when=THEN)]
    assert not set_status_condition(conditions, new("True", reason="Other", generation=2), NOW)


def test_a_status_flip_moves_the_transition_time() -> None:
    conditions = [cond("True")]
    assert set_status_condition(conditions, new("False"), NOW)
    assert conditions == [cond("False", when=NOW)]
