"""IntOrString fields that hold a count or a percentage (rolling-update surge and
unavailability, PDB budgets), validated as `apps/validation` does.

`field.Invalid` prints an IntOrString value with Go's `%#v` (the type's `String` has a pointer
receiver, so a value is not a Stringer): `intstr.IntOrString{Type:1, IntVal:0, StrVal:"abc"}`.
Clients and people read that text back, so it is reproduced as the real server writes it.
"""

from __future__ import annotations

import re
from typing import Any

from localcluster.registry import FieldError

PERCENT_MSG = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)
_PERCENT = re.compile(r"^[0-9]+%$")


def go_repr(value: Any) -> str:
    """An IntOrString as `%#v` prints it (ints as plain numbers, as `ValidateNonnegativeField` gets them)."""
    if isinstance(value, str):
        return f'intstr.IntOrString{{Type:1, IntVal:0, StrVal:"{value}"}}'
    return str(value)


def _invalid(path: str, value: Any, message: str) -> FieldError:
    return FieldError("FieldValueInvalid", path, f"Invalid value: {go_repr(value)}: {message}")


def positive_int_or_percent(value: Any, path: str) -> list[FieldError]:
    """`ValidatePositiveIntOrPercent`: a non-negative integer or an `N%` string."""
    if value is None:
        return []
    if isinstance(value, str):
        return [] if _PERCENT.match(value) else [_invalid(path, value, PERCENT_MSG)]
    if isinstance(value, int) and not isinstance(value, bool):
        return [] if value >= 0 else [FieldError.invalid(path, value, "must be greater than or equal to 0")]
    return [_invalid(path, value, "must be an integer or percentage (e.g '5%')")]


def not_more_than_100_percent(value: Any, path: str) -> list[FieldError]:
    """`IsNotMoreThan100Percent`: only percentages are bounded (an integer count is not)."""
    if isinstance(value, str) and _PERCENT.match(value) and int(value[:-1]) > 100:
        return [_invalid(path, value, "must not be greater than 100%")]
    return []


def int_or_percent_in_range(value: Any, path: str) -> list[FieldError]:
    """Both rules, as a PDB budget and a rolling update's fields are checked."""
    return positive_int_or_percent(value, path) + not_more_than_100_percent(value, path)


def int_or_percent_value(value: Any) -> int:
    """`getIntOrPercentValue`: the number before a `%`, an integer as it is, any other string 0."""
    if isinstance(value, str):
        text = value[:-1] if value.endswith("%") else value
        return int(text) if text.isdigit() else 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def rolling_update_errors(rolling: dict[str, Any], path: str) -> list[FieldError]:
    """`ValidateRollingUpdateDeployment`, in its order: each field's form, not both zero, and
    maxUnavailable at most 100%."""
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errs = positive_int_or_percent(unavailable, f"{path}.maxUnavailable")
    errs += positive_int_or_percent(surge, f"{path}.maxSurge")
    if int_or_percent_value(unavailable) == 0 and int_or_percent_value(surge) == 0:
        errs.append(
            _invalid(
                f"{path}.maxUnavailable",
                unavailable if unavailable is not None else 0,
                "may not be 0 when `maxSurge` is 0",
            )
        )
    errs += not_more_than_100_percent(unavailable, f"{path}.maxUnavailable")
    return errs
