"""`intstr.IntOrString` values ("25%" or 3) scaled against a total, as Kubernetes does.

Deployments (`maxSurge`, `maxUnavailable`) and PodDisruptionBudgets (`minAvailable`,
`maxUnavailable`) both accept either an absolute count or a percentage of some total; the
rounding direction is the caller's choice and matters (surge rounds up, unavailable down).
"""

from __future__ import annotations

from kubeutil.strconv import atoi, go_quote


class IntOrStringError(ValueError):
    """The value is neither an integer nor a percentage like "25%"."""


def scaled_value(value: int | str | None, total: int, *, round_up: bool, default: int | str = 0) -> int:
    """`intstr.GetScaledValueFromIntOrPercent`: an int as is, a percent of `total` rounded as asked.

    `None` stands for an unset field and takes `default`. A string must be a decimal integer
    (`strconv.Atoi`: no spaces, no `_`) followed by exactly one `%`: Go refuses "3" (a string,
    not an int), " 40%" and "40%%", with the messages Go gives (they end up in status conditions).
    """
    if value is None:
        value = default
    if isinstance(value, bool):
        raise IntOrStringError("invalid value for IntOrString: invalid type: neither int nor percentage")
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        raise IntOrStringError("invalid value for IntOrString: invalid type: neither int nor percentage")
    if not value.endswith("%"):
        raise IntOrStringError("invalid value for IntOrString: invalid type: string is not a percentage")
    try:
        percent = atoi(value[:-1])
    except ValueError as exc:
        raise IntOrStringError(
            f"invalid value for IntOrString: invalid value {go_quote(value)}: {exc}"
        ) from exc
    # Integer arithmetic: Go's float64 ceil/floor gives the same result without float noise.
    return -((-percent * total) // 100) if round_up else (percent * total) // 100
