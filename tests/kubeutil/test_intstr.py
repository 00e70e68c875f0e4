"""`scaled_value` against apimachinery's intstr_test.go (`GetScaledValueFromIntOrPercent`).

Cases of `TestGetIntFromIntOrPercent` and `TestGetIntFromIntOrString` (the latter through the
scaling function: `getIntOrPercentValueSafely` is what it calls), plus the exact error texts, which
a PodDisruptionBudget's `SyncFailed` condition carries word for word.
"""

from __future__ import annotations

import pytest

from controllers.common.intstr import IntOrStringError, scaled_value


# TestGetIntFromIntOrPercent, case for case.
@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        (123, 0, False, 123),
        ("90%", 100, True, 90),
        ("90%", 95, True, 86),
        ("90%", 95, False, 85),
    ],
)
def test_get_int_from_int_or_percent(value: int | str, total: int, round_up: bool, expected: int) -> None:
    assert scaled_value(value, total, round_up=round_up) == expected


@pytest.mark.parametrize("value", ["%", "90#", "#%", "90"])
def test_get_int_from_int_or_percent_errors(value: str) -> None:
    with pytest.raises(IntOrStringError):
        scaled_value(value, 100, round_up=True)


# TestGetIntFromIntOrString: what parses (an int, or digits and one "%") and what does not.
@pytest.mark.parametrize(
    ("value", "expected"),
    [(200, 200), ("40%", 40)],
)
def test_int_or_percent_values(value: int | str, expected: int) -> None:
    assert scaled_value(value, 100, round_up=False) == expected


@pytest.mark.parametrize("value", ["200", "30%0", "%", "a%", "a", "40#", "40%%"])
def test_int_or_percent_refusals(value: str) -> None:
    with pytest.raises(IntOrStringError):
        scaled_value(value, 100, round_up=False)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("90", "invalid value for IntOrString: invalid type: string is not a percentage"),
        ("%", 'invalid value for IntOrString: invalid value "%": strconv.Atoi: parsing "": invalid syntax'),
        (
            "#%",
            'invalid value for IntOrString: invalid value "#%": strconv.Atoi: parsing "#": invalid syntax',
        ),
        (
            "40%%",
            'invalid value for IntOrString: invalid value "40%%": strconv.Atoi: parsing "40%": invalid syntax',
        ),
        (
            "99999999999999999999%",
            'invalid value for IntOrString: invalid value "99999999999999999999%": '
            'strconv.Atoi: parsing "99999999999999999999": value out of range',
        ),
    ],
)
def test_error_messages_are_go_s(value: str, message: str) -> None:
    with pytest.raises(IntOrStringError) as err:
        scaled_value(value, 100, round_up=True)
    assert str(err.value) == message


@pytest.mark.parametrize("value", [" 40%", "40 %", "4_0%", "٤٠%"])
def test_atoi_is_strict(value: str) -> None:
    """`strconv.Atoi` takes ASCII digits and a sign only: no spaces, `_` or other scripts' digits."""
    with pytest.raises(IntOrStringError):
        scaled_value(value, 100, round_up=True)


@pytest.mark.parametrize(
    ("value", "total", "up", "down"),
    [
        ("+40%", 10, 4, 4),
        ("34%", 3, 2, 1),
        ("1%", 1, 1, 0),
        ("0%", 7, 0, 0),
        ("150%", 3, 5, 4),
        ("-10%", 95, -9, -10),  # Go's math.Ceil / math.Floor of -9.5
        ("25%", 0, 0, 0),
    ],
)
def test_rounding(value: str, total: int, up: int, down: int) -> None:
    assert scaled_value(value, total, round_up=True) == up
    assert scaled_value(value, total, round_up=False) == down


def test_unset_takes_the_default() -> None:
    assert scaled_value(None, 10, round_up=True, default="25%") == 3
    assert scaled_value(None, 10, round_up=False) == 0
