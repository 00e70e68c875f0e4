"""Argo Rollouts' measurement and metric rules, ported with Argo's test names where there is one
(argoproj/argo-rollouts: utils/evaluate/evaluate_test.go, analysis/analysis_test.go)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from maintenancerollout.analysis import (
    MAX_VALUE_LENGTH,
    Limits,
    Measurement,
    Result,
    Tally,
    explain,
    judge,
    outcome,
    render,
)

S, F, N, E, R = Result.SUCCESSFUL, Result.FAILED, Result.INCONCLUSIVE, Result.ERROR, Result.RUNNING
INVALID_REF = "a == true"  # evaluate_test.go's invalidRefCondition

# -- one measurement (utils/evaluate/evaluate.go EvaluateResult) ------------------------------

JUDGE_CASES = [
    # (Argo's test, value, successCondition, failureCondition, result)
    ("TestEvaluateResultWithSuccess", 1.0, "true", "false", S),
    ("TestEvaluateResultWithFailure", 1.0, "true", "true", F),
    ("TestEvaluateResultInconclusive", 1.0, "false", "false", N),
    ("TestEvaluateResultNoSuccessConditionAndNotFailing", 1.0, None, "false", S),
    ("TestEvaluateResultNoFailureConditionAndNotSuccessful", 1.0, "false", None, F),
    ("TestEvaluateResultNoFailureConditionAndNoSuccessCondition", 1.0, None, None, S),
    ("TestEvaluateResultWithErrorOnSuccessCondition", 1.0, INVALID_REF, "true", E),
    ("TestEvaluateResultWithErrorOnFailureCondition", 1.0, "true", INVALID_REF, E),
    ("empty conditions are absent ones", 1.0, "", "", S),
    ("only a failure condition, which holds", 1.0, "", "true", F),
    ("only a success condition, which holds", 1.0, "true", "", S),
    ("the design's example: a low error rate", [0.01], "result[0] < 0.05", "result[0] >= 0.2", S),
    ("the design's example: between the two", [0.1], "result[0] < 0.05", "result[0] >= 0.2", N),
    ("the design's example: a high error rate", [0.31], "result[0] < 0.05", "result[0] >= 0.2", F),
    ("both true: the failure wins", [0.3], "result[0] > 0", "result[0] > 0", F),
    ("no data is an error", [], "result[0] >= 0.95", None, E),
    ("no data asked for", [], "len(result) == 0", None, S),
]


@pytest.mark.parametrize(
    ("value", "success", "failure", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in JUDGE_CASES],
)
def test_judge(
    value: float | list[float], success: str | None, failure: str | None, expected: Result
) -> None:
    assert judge(value, success=success, failure=failure).result is expected


def test_an_error_says_which_condition_and_why() -> None:
    """TestEvaluateResultErrorMessageWithInvalidExpression and ...OnFailureCondition."""
    m = judge(1.0, success=INVALID_REF, failure=None)
    assert m.result is E
    assert 'could not evaluate successCondition "a == true"' in m.message
    assert "unknown name a" in m.message
    m = judge(1.0, success="true", failure="invalidVar == true")
    assert 'could not evaluate failureCondition "invalidVar == true"' in m.message


def test_an_error_on_no_data_says_so() -> None:
    """TestEvaluateResultErrorMessageWithEmptySlice: the empty vector is named as the cause."""
    m = judge([], success="result[0] >= 0.95", failure=None)
    assert m.result is E
    assert "successCondition" in m.message
    assert "no data" in m.message
    assert "index out of range" in m.message


def test_failed_and_inconclusive_say_which_condition() -> None:
    assert judge([0.31], success="result[0] < 0.05", failure="result[0] >= 0.2") == Measurement(
        F, "[0.31]", 'failureCondition "result[0] >= 0.2" is true'
    )
    assert (
        judge(0.5, success="result < 0.05", failure=None).message
        == 'successCondition "result < 0.05" is false'
    )
    assert "neither" in judge(0.1, success="result < 0.05", failure="result >= 0.2").message
    assert judge(0.01, success="result < 0.05", failure=None) == Measurement(S, "0.01")


def _argo(success: bool | None, failure: bool | None) -> Result:
    """EvaluateResult's switch, transcribed: None is an absent condition."""
    if success is None and failure is None:
        return S
    if failure is None:
        failure = not success
    if success is None:
        success = not failure
    if failure:
        return F
    if not success:
        return N
    return S


@given(st.sampled_from([None, True, False]), st.sampled_from([None, True, False]))
def test_judge_is_argos_switch(success: bool | None, failure: bool | None) -> None:
    def spelled(b: bool | None) -> str | None:
        return None if b is None else str(b).lower()

    assert judge(0.0, success=spelled(success), failure=spelled(failure)).result is _argo(success, failure)


RENDER_CASES = [
    (0.31, "0.31"),
    ([0.31, 0.2], "[0.31, 0.2]"),
    ([], "[]"),
    (1.0, "1"),
    ([math.nan, math.inf, -math.inf], "[NaN, +Inf, -Inf]"),
    (1e-05, "1e-05"),
    (1e21, "1e+21"),
]


@pytest.mark.parametrize(("value", "text"), RENDER_CASES)
def test_render(value: float | list[float], text: str) -> None:
    assert render(value) == text


def test_render_cuts_long_values() -> None:
    text = render([0.123456789] * 100)
    assert len(text) == MAX_VALUE_LENGTH
    assert text.endswith("...")


# -- the counts (analysis/analysis.go runMeasurements) ----------------------------------------


def test_run_measurements_reset_consecutive_error_counter() -> None:
    """TestRunMeasurementsResetConsecutiveErrorCounter: an error adds to error and
    consecutiveErrors but not to the count; anything else resets consecutiveErrors."""
    t = Tally(error=4, consecutive_errors=4)
    after_error = t.add(Measurement(E))
    assert (after_error.error, after_error.consecutive_errors, after_error.measurements) == (5, 5, 0)
    for r in (S, F, N):
        after = t.add(Measurement(r))
        assert (after.error, after.consecutive_errors, after.measurements) == (4, 0, 1)


def test_a_running_measurement_changes_nothing() -> None:
    assert Tally(successful=1).add(Measurement(R)) == Tally(successful=1)


@given(st.lists(st.sampled_from([S, F, N, E])))
def test_tally_counts(results: list[Result]) -> None:
    t = Tally()
    for r in results:
        t = t.add(Measurement(r))
    assert (t.successful, t.failed, t.inconclusive, t.error) == tuple(results.count(r) for r in (S, F, N, E))
    assert t.measurements == len(results) - results.count(E)
    trailing = len(results) - len("".join("e" if r is E else "x" for r in results).rstrip("e"))
    assert t.consecutive_errors == trailing
    assert Tally.from_status(t.as_status()) == t


def test_status_keys() -> None:
    assert Tally(1, 2, 3, 4, 5).as_status() == {
        "successful": 1,
        "failed": 2,
        "inconclusive": 3,
        "error": 4,
        "consecutiveErrors": 5,
    }


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, Tally()),
        ("garbage", Tally()),
        ([1, 2], Tally()),
        ({}, Tally()),
        ({"successful": 2, "consecutiveErrors": 1}, Tally(successful=2, consecutive_errors=1)),
        (
            {"successful": -3, "failed": "2", "inconclusive": 1.0, "error": True},
            Tally(failed=2, inconclusive=1),
        ),
        ({"successful": 1.5, "failed": "x", "error": None, "consecutiveErrors": [1]}, Tally()),
    ],
)
def test_from_status_is_tolerant(raw: object, expected: Tally) -> None:
    assert Tally.from_status(raw) == expected


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=20), inner, max_size=6),
    max_leaves=10,
)
_status_like = st.dictionaries(
    st.sampled_from(["successful", "failed", "inconclusive", "error", "consecutiveErrors", "other"]), _json
)


@given(_json | _status_like)
def test_from_status_never_raises_and_counts_are_never_negative(raw: Any) -> None:
    t = Tally.from_status(raw)
    assert min(t.as_status().values()) >= 0


# -- the metric's phase (analysis/analysis.go assessMetricStatus) ------------------------------

OUTCOME_CASES = [
    # (Argo's test, tally, limits, result)
    ("TestAssessMetricStatusNoMeasurements", Tally(), Limits(), R),
    ("TestAssessMetricStatusFailureLimit", Tally(failed=3), Limits(count=10, failure_limit=2), F),
    ("TestAssessMetricStatusFailureLimit (limit 3)", Tally(failed=3), Limits(count=10, failure_limit=3), R),
    (
        "TestAssessMetricStatusInconclusiveLimit",
        Tally(inconclusive=3),
        Limits(count=10, inconclusive_limit=2),
        N,
    ),
    (
        "TestAssessMetricStatusInconclusiveLimit (limit 3)",
        Tally(inconclusive=3),
        Limits(count=10, inconclusive_limit=3),
        R,
    ),
    ("TestAssessMetricStatusConsecutiveErrors", Tally(error=5, consecutive_errors=5), Limits(count=10), E),
    (
        "TestAssessMetricStatusConsecutiveErrors (4)",
        Tally(error=4, consecutive_errors=4),
        Limits(count=10),
        R,
    ),
    ("TestAssessMetricStatusCountReached", Tally(successful=10), Limits(count=10), S),
    (
        "TestAssessMetricStatusCountReached (5 inconclusive)",
        Tally(successful=5, inconclusive=5),
        Limits(count=10),
        N,
    ),
    ("TestAssessMetricFailureInconclusiveOrError (failed)", Tally(failed=1), Limits(), F),
    ("TestAssessMetricFailureInconclusiveOrError (inconclusive)", Tally(inconclusive=1), Limits(), N),
    ("TestAssessMetricFailureInconclusiveOrError (errors)", Tally(consecutive_errors=5), Limits(), E),
    (
        "failures within the limit, count reached",
        Tally(successful=2, failed=1),
        Limits(count=3, failure_limit=1),
        S,
    ),
    (
        "errors do not count towards count",
        Tally(successful=2, error=3, consecutive_errors=0),
        Limits(count=3),
        R,
    ),
    ("failed and inconclusive: the later check wins", Tally(failed=1, inconclusive=1), Limits(count=3), N),
    ("and errors win over both", Tally(failed=1, inconclusive=1, consecutive_errors=5), Limits(count=3), E),
    (
        "a negative failureLimit checks no failures",
        Tally(failed=5, successful=1),
        Limits(count=6, failure_limit=-1),
        S,
    ),
    ("count 0 is taken as 1", Tally(successful=1), Limits(count=0), S),
    ("count 0 still measures once", Tally(), Limits(count=0), R),
    (
        "consecutiveErrorLimit 0: one error is too many",
        Tally(error=1, consecutive_errors=1),
        Limits(consecutive_error_limit=0),
        E,
    ),
    (
        "errors spread out never add up",
        Tally(successful=1, error=9, consecutive_errors=1),
        Limits(count=2),
        R,
    ),
]


@pytest.mark.parametrize(
    ("tally", "limits", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in OUTCOME_CASES],
)
def test_outcome(tally: Tally, limits: Limits, expected: Result) -> None:
    assert outcome(tally, limits) is expected


def test_explain_uses_argos_words() -> None:
    """TestAssessMetricFailureInconclusiveOrError's messages."""
    assert explain(Tally(failed=1), Limits()) == "failed (1) > failureLimit (0)"
    assert explain(Tally(inconclusive=1), Limits()) == "inconclusive (1) > inconclusiveLimit (0)"
    assert (
        explain(Tally(consecutive_errors=5), Limits()) == "consecutiveErrors (5) > consecutiveErrorLimit (4)"
    )
    assert explain(Tally(successful=3), Limits(count=3)) == "count (3) reached"
    assert explain(Tally(successful=1), Limits(count=3)) == "1 of 3 measurements taken"


def test_defaults_are_argos() -> None:
    assert Limits() == Limits(count=1, failure_limit=0, inconclusive_limit=0, consecutive_error_limit=4)


_limits = st.builds(
    Limits,
    count=st.integers(1, 6),
    failure_limit=st.integers(0, 3),
    inconclusive_limit=st.integers(0, 3),
    consecutive_error_limit=st.integers(0, 5),
)


@given(st.lists(st.sampled_from([S, F, N, E]), max_size=30), _limits)
def test_a_gate_runs_until_a_limit_or_the_count(results: list[Result], limits: Limits) -> None:
    """Fed one measurement at a time, as the planner does, the gate stops exactly when Argo's
    rules say: the first time a limit is exceeded or the count is reached."""
    t = Tally()
    for r in results:
        t = t.add(Measurement(r))
        verdict = outcome(t, limits)
        over = (
            t.failed > limits.failure_limit
            or t.inconclusive > limits.inconclusive_limit
            or t.consecutive_errors > limits.consecutive_error_limit
        )
        if over:
            assert verdict in (F, N, E)
        elif t.measurements >= limits.count:
            assert verdict is S
        else:
            assert verdict is R
        if verdict is not R:
            break
