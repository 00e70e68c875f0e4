"""The conditions' expression language: expr-lang as Argo Rollouts' examples write it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from maintenancerollout.expressions import MAX_LENGTH, ExpressionError, check, evaluate

NAN = math.nan
INF = math.inf

TRUE_CASES = [
    # Argo Rollouts' documentation and examples.
    ("result[0] >= 0.95", [0.96]),
    ("result[0] <= 0.95", [0.5]),
    ("result >= 0.95", 0.99),
    ("result[0] < 0.05 && result[1] > 2", [0.01, 3.0]),
    ("len(result) == 0", []),
    ("len(result) == 0 || result[0] >= 0.95", []),
    ("len(result) > 0 && result[0] >= 0.95", [0.97]),
    ("isNaN(result[0])", [NAN]),
    ("isNaN(result) || result >= 0.95", NAN),
    ("isInf(result)", INF),
    ("max(result) < 0.05", [0.01, 0.04]),
    ("default(result, 0) < 5", 3.0),
    ("all(result, {# <= 0.01})", [0.0, 0.01]),
    ("any(result, {# > 0.5})", [0.1, 0.9]),
    # evaluate_test.go: TestEvaluateInOperator, TestEvaluateFloat64.
    ("2 in result", [2.0, 2.0]),
    ("result > 1", 5.0),
    # The operators and their expr-lang spellings.
    ("!(result[0] > 1)", [0.5]),
    ("!isNaN(result[0])", [1.0]),
    ("not (result > 1)", 0.5),
    ("result != 1", 2.0),
    ("result > 1 || false", 2.0),
    ("true && !false", 0.0),
    ("result > 1 and result < 3 or false", 2.0),
    ("(result[0] + result[1]) / 2 == 1.5", [1.0, 2.0]),
    ("result[0] * 100 - 5 % 3 == 48", [0.5]),
    ("2 ^ 10 == 1024 && 2 ** 3 == 8", 0.0),
    ("-result < 0", 1.0),
    ("abs(-result) == result", 2.0),
    ("min(result) == 1 && max(1, 2, 3) == 3", [3.0, 1.0]),
    ("result[1:] == [2, 3]", [1.0, 2.0, 3.0]),
    ("result not in [1, 2]", 3.0),
    ("asInt('42') == 42 && asFloat('0.5') == 0.5", 0.0),
    ("all([true, true]) && !any([false])", 0.0),
    # Go's IEEE division: no ZeroDivisionError.
    ("result / 0 > 1e300", 1.0),
    ("isNaN(0 / result)", 0.0),
    # Strings are copied through untouched: no operator inside them is rewritten.
    ("'a&&b' == \"a&&b\"", 0.0),
    ("'!' != '!='", 0.0),
    ("`raw\\n` == 'raw\\\\n'", 0.0),
    ("'{#}' == '{#}'", 0.0),
    # Whitespace and line breaks from a YAML block.
    ("result[0] >= 0.9\n  && result[0] <= 1", [0.95]),
]


@pytest.mark.parametrize(("expr", "result"), TRUE_CASES)
def test_true(expr: str, result: float | list[float]) -> None:
    check(expr)
    assert evaluate(expr, result) is True


FALSE_CASES = [
    ("result[0] >= 0.95", [0.5]),
    ("isNaN(result[0])", [0.5]),
    ("result[0] > 0.5", [NAN]),  # every comparison with NaN is false, in Go as in Python
    ("result[0] < 0.5", [NAN]),
    ("all(result, {# < 1})", [0.5, 1.5]),
    ("len(result) == 0", [1.0]),
]


@pytest.mark.parametrize(("expr", "result"), FALSE_CASES)
def test_false(expr: str, result: float | list[float]) -> None:
    assert evaluate(expr, result) is False


SYNTAX_ERRORS = [
    ("", "empty"),
    ("   ", "empty"),
    ("result[0] >= ", "syntax error"),
    ("result[0] >= 0.95)", "syntax error"),
    ("invalidVariable", "unknown name invalidVariable"),  # TestErrorWithInvalidReference
    ("a == true", "unknown name a"),  # invalidRefCondition
    ("True", "expr-lang spells it true"),
    ("result.successRate >= 0.95", "member access (.successRate)"),
    ("result.__class__", "member access"),
    ("open('x')", "unknown function open()"),
    ("__import__('os')", "unknown function __import__()"),
    ("len(result, key=1)", "positional arguments only"),
    ("len(*result)", "positional arguments only"),
    ("(lambda: 1)()", "calling anything but a function"),
    ("[x for x in result]", "comprehension"),
    ("{1: 2}", "syntax error"),
    ("result if true else 0", "conditional expression"),
    ("(x := 1)", "assignment"),
    ("0 < result < 1", "chained comparisons"),
    ("result < 1 == true", "chained comparisons"),
    ("result | 1", "operator | is not supported"),
    ("result & 1", "operator & is not supported"),
    ("1 << 1000", "operator << is not supported"),
    ("result // 2", "operator // is not supported"),
    ("result is nil", "operator is is not supported"),
    ("1j == 1", "unknown name 1j"),
    ("all(result, # < 1000)", "write predicates in braces"),
    ("all(result, {# < 1)", "not closed"),
    ("result > 1 }", "unbalanced '}'"),
    ("all(result, {})", "empty predicate"),
    ("'abc", "unterminated string"),
    ("f'{result}' == '1'", "formatted string"),
    ("x" * (MAX_LENGTH + 1), f"at most {MAX_LENGTH}"),
]


@pytest.mark.parametrize(("expr", "message"), SYNTAX_ERRORS)
def test_check_refuses(expr: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=None) as caught:
        check(expr)
    assert message in str(caught.value)
    with pytest.raises(ExpressionError):
        evaluate(expr, [1.0])


def test_check_refuses_what_is_not_a_string() -> None:
    with pytest.raises(ExpressionError, match="must be a string"):
        check(["result > 1"])  # type: ignore[arg-type]


def test_the_length_bound_is_inclusive() -> None:
    expr = "result > 1" + " " * (MAX_LENGTH - len("result > 1"))
    assert len(expr) == MAX_LENGTH
    check(expr)


EVALUATION_ERRORS = [
    ("result[0] >= 0.95", [], "index out of range"),
    ("result[3] > 1", [1.0], "index out of range"),
    ("result[0] > 1", 1.0, "not subscriptable"),
    ("1", 0.0, "expected bool, but got int"),  # TestErrorWithNonBoolReturn
    ("result[0]", [0.5], "expected bool, but got float64"),
    ("result", [0.5], "expected bool, but got array"),
    ("result > 1", [2.0], "not supported between"),
    ("len(result) > 0", 1.0, "invalid argument for len"),
    ("isNaN(result)", [1.0], "isNaN needs numbers"),
    ("result[0] && true", [1.0], "&& needs bools"),
    ("!result", 1.0, "! needs a bool"),
    ("all(result, {# * 2})", [1.0], "predicate must be a bool"),
    ("all(result)", [1.0], "all() without a predicate needs bools"),
    ("max(result) > 1", [], "max() of an empty array"),
    ("2 % 0 == 1", 0.0, "divide by zero"),
    ("asInt('x') == 1", 0.0, "cannot parse"),
    ("'a' * 1000000 == 'b'", 0.0, "Sorry"),  # simpleeval's bound on built strings
]


@pytest.mark.parametrize(("expr", "result", "message"), EVALUATION_ERRORS)
def test_evaluation_errors(expr: str, result: float | list[float], message: str) -> None:
    check(expr)  # syntactically fine: only this result makes it fail
    with pytest.raises(ExpressionError) as caught:
        evaluate(expr, result)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "expr", ["!" * 996 + "true", "-" * 994 + "1 > 0", "(" * 300 + "1" + ")" * 300 + " > 0"]
)
def test_deep_nesting_is_an_error_not_a_crash(expr: str) -> None:
    with pytest.raises(ExpressionError, match="nested"):
        evaluate(expr, 1.0)


def test_powers_stay_floats() -> None:
    """No integer blow-up: `**` is Go's math.Pow, infinite rather than a number of a million digits."""
    assert evaluate("9 ** 9 ** 9 ** 9 > 1", 0.0)
    assert evaluate("isInf(10 ** 400)", 0.0)
    assert evaluate("(10 ** 400 < 0) == false", 0.0)
    assert evaluate("(-10) ** 401 < 0", 0.0)
    assert evaluate("isNaN((-8) ** 0.5)", 0.0)


@given(st.floats(allow_nan=True), st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_comparisons_are_pythons_on_floats(x: float, threshold: float) -> None:
    assert evaluate(f"result[0] >= {threshold!r}", [x]) is (x >= threshold)
    assert evaluate(f"!(result[0] >= {threshold!r})", [x]) is (not x >= threshold)
    assert evaluate(f"result < {threshold!r} || isNaN(result)", x) is (x < threshold or math.isnan(x))


@given(st.lists(st.floats(allow_nan=False), max_size=8), st.floats(allow_nan=False, allow_infinity=False))
def test_predicates_are_applied_to_each_element(values: list[float], bound: float) -> None:
    assert evaluate(f"all(result, {{# < {bound!r}}})", values) is all(v < bound for v in values)
    assert evaluate(f"any(result, {{# < {bound!r}}})", values) is any(v < bound for v in values)
    assert evaluate("len(result) == " + str(len(values)), values)


@given(st.text(max_size=60))
def test_any_text_is_checked_or_refused_with_an_expression_error(text: str) -> None:
    try:
        check(text)
    except ExpressionError:
        return
    try:
        evaluate(text, [1.0, 2.0])
    except ExpressionError:
        pass
