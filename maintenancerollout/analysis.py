"""Argo Rollouts' analysis rules: what one measurement is, and what a gate's measurements add up to.

People who gate rollouts on Prometheus already know these rules from Argo Rollouts, so they are
matched rather than reinvented (argoproj/argo-rollouts, `utils/evaluate/evaluate.go` EvaluateResult
for one measurement; `analysis/analysis.go` runMeasurements, assessMetricStatus and
assessMetricFailureInconclusiveOrError for the counts, with the default consecutiveErrorLimit of 4
from `utils/defaults/defaults.go`):

- A measurement with both conditions is Successful when `success && !failure`, Failed when
  `failure`, Inconclusive when neither holds. With only a successCondition a false one is Failed;
  with only a failureCondition a false one is Successful; with neither it is Successful. A condition
  that cannot be evaluated makes the measurement an Error.
- Successful, Failed and Inconclusive measurements count towards `count`; an Error does not (Argo
  retries it) but adds to the consecutive errors, which any other measurement resets.
- The metric is Failed once failures exceed failureLimit, Inconclusive once inconclusive
  measurements exceed inconclusiveLimit, Error once consecutive errors exceed
  consecutiveErrorLimit; when several hold the later one in that order wins, as in Argo. Otherwise
  it is Successful once `count` measurements were taken, and Running until then. A negative
  failureLimit switches the failure check off, as in Argo (where it goes with a
  consecutiveSuccessLimit, which gates do not have).

Only the counts are kept (in the NodeMaintenance's status), not Argo's list of measurements: they
are all these rules read, and they survive a restart of the manager.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from maintenancerollout import expressions

#: Longer renderings of a value are cut here: the value goes into the status and the events.
MAX_VALUE_LENGTH = 200


class Result(StrEnum):
    SUCCESSFUL = "Successful"
    FAILED = "Failed"
    INCONCLUSIVE = "Inconclusive"
    ERROR = "Error"
    RUNNING = "Running"


@dataclass(frozen=True, slots=True)
class Measurement:
    """One measurement: its result, the value it was judged on (rendered) and what explains it."""

    result: Result
    value: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class Limits:
    """A gate's limits, with Argo's defaults."""

    count: int = 1
    failure_limit: int = 0
    inconclusive_limit: int = 0
    consecutive_error_limit: int = 4


_STATUS_KEYS = {
    "successful": "successful",
    "failed": "failed",
    "inconclusive": "inconclusive",
    "error": "error",
    "consecutive_errors": "consecutiveErrors",
}


@dataclass(frozen=True, slots=True)
class Tally:
    """The counts Argo keeps per metric (MetricResult's successful, failed, ... fields)."""

    successful: int = 0
    failed: int = 0
    inconclusive: int = 0
    error: int = 0
    consecutive_errors: int = 0

    def add(self, m: Measurement) -> Tally:
        """The counts with one more measurement; a Running one (not finished) changes nothing."""
        match m.result:
            case Result.SUCCESSFUL:
                return replace(self, successful=self.successful + 1, consecutive_errors=0)
            case Result.FAILED:
                return replace(self, failed=self.failed + 1, consecutive_errors=0)
            case Result.INCONCLUSIVE:
                return replace(self, inconclusive=self.inconclusive + 1, consecutive_errors=0)
            case Result.ERROR:
                return replace(self, error=self.error + 1, consecutive_errors=self.consecutive_errors + 1)
        return self

    @property
    def measurements(self) -> int:
        """The measurements that count towards `count` (Argo's MetricResult.count): errors do not."""
        return self.successful + self.failed + self.inconclusive

    def as_status(self) -> dict[str, int]:
        return {key: getattr(self, attr) for attr, key in _STATUS_KEYS.items()}

    @classmethod
    def from_status(cls, raw: object) -> Tally:
        """The counts from a gate's status entry; a missing, negative or non-integer count (an older
        or hand-edited status) is 0 rather than a reason to stop the rollout."""
        if not isinstance(raw, Mapping):
            return cls()
        return cls(**{attr: _count(raw.get(key)) for attr, key in _STATUS_KEYS.items()})


def _count(raw: object) -> int:
    if isinstance(raw, bool):
        return 0
    if isinstance(raw, int):
        return max(raw, 0)
    if isinstance(raw, float) and raw.is_integer():
        return max(int(raw), 0)
    if isinstance(raw, str) and raw.strip().isdigit():
        return int(raw.strip())
    return 0


def judge(value: float | list[float], *, success: str | None, failure: str | None) -> Measurement:
    """One measurement of `value` against the conditions (EvaluateResult); an empty condition is
    treated as absent, as in Argo."""
    rendered = render(value)
    verdicts: dict[str, bool] = {}
    for kind, condition in (("successCondition", success), ("failureCondition", failure)):
        if not condition:
            continue
        try:
            verdicts[kind] = expressions.evaluate(condition, value)
        except expressions.ExpressionError as exc:
            hint = ": the query returned no data" if value == [] else ""
            message = f'could not evaluate {kind} "{condition}"{hint}: {exc}'
            return Measurement(Result.ERROR, rendered, message)
    succeeded = verdicts.get("successCondition")
    failed = verdicts.get("failureCondition")
    if failed is None and succeeded is None:
        return Measurement(Result.SUCCESSFUL, rendered)
    if failed is None:
        failed = not succeeded
    if succeeded is None:
        succeeded = not failed
    if failed:
        reason = (
            f'failureCondition "{failure}" is true'
            if verdicts.get("failureCondition")
            else f'successCondition "{success}" is false'
        )
        return Measurement(Result.FAILED, rendered, reason)
    if not succeeded:
        return Measurement(
            Result.INCONCLUSIVE,
            rendered,
            f'neither successCondition "{success}" nor failureCondition "{failure}" is true',
        )
    return Measurement(Result.SUCCESSFUL, rendered)


def outcome(tally: Tally, limits: Limits) -> Result:
    """The gate's result from its counts (assessMetricStatus): a finished one, or RUNNING while more
    measurements are due. A count below 1 is taken as 1: a gate always measures at least once."""
    verdict = _over_limit(tally, limits)
    if verdict is not None:
        return verdict[0]
    if tally.measurements >= max(limits.count, 1):
        return Result.SUCCESSFUL
    return Result.RUNNING


def explain(tally: Tally, limits: Limits) -> str:
    """Why `outcome` is what it is, in Argo's words ("failed (1) > failureLimit (0)")."""
    verdict = _over_limit(tally, limits)
    if verdict is not None:
        return verdict[1]
    count = max(limits.count, 1)
    if tally.measurements >= count:
        return f"count ({count}) reached"
    return f"{tally.measurements} of {count} measurements taken"


def _over_limit(tally: Tally, limits: Limits) -> tuple[Result, str] | None:
    """assessMetricFailureInconclusiveOrError: each check overrides the one before."""
    verdict: tuple[Result, str] | None = None
    if limits.failure_limit >= 0 and tally.failed > limits.failure_limit:
        verdict = Result.FAILED, f"failed ({tally.failed}) > failureLimit ({limits.failure_limit})"
    if tally.inconclusive > limits.inconclusive_limit:
        verdict = (
            Result.INCONCLUSIVE,
            f"inconclusive ({tally.inconclusive}) > inconclusiveLimit ({limits.inconclusive_limit})",
        )
    if tally.consecutive_errors > limits.consecutive_error_limit:
        verdict = (
            Result.ERROR,
            f"consecutiveErrors ({tally.consecutive_errors}) > "
            f"consecutiveErrorLimit ({limits.consecutive_error_limit})",
        )
    return verdict


def render(value: float | list[float]) -> str:
    """A value as the status shows it: "0.31", "[0.31, 0.2]", "NaN", "+Inf"; cut at 200 characters."""
    text = "[" + ", ".join(_number(v) for v in value) + "]" if isinstance(value, list) else _number(value)
    if len(text) > MAX_VALUE_LENGTH:
        text = text[: MAX_VALUE_LENGTH - 3] + "..."
    return text


def _number(v: float) -> str:
    """Prometheus's spelling of a sample value (Go's FormatFloat 'f', -1 for the usual sizes)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))
