"""`min_toleration_seconds` as the taint manager's `getMinTolerationTime` (taint_eviction_test.go).

Go answers a `time.Duration`: 0 = now, -1 = forever. Its smallest time starts from a
`math.MaxInt64` sentinel, so a toleration of exactly MaxInt64 seconds is forever. Past what an
int64 of nanoseconds holds (~292 years) Go's product wraps, to forever for some values and to a
few seconds or zero for others; here every such value is forever, never an eviction now.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubeutil.taints import min_toleration_seconds

MAX_INT64 = (1 << 63) - 1


def tolerations(*seconds: int | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in seconds:
        out.append({} if s is None else {"tolerationSeconds": s})
    return out


# TestGetMinTolerationTime, case for case.
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(tolerations(), 0.0, id="no tolerations"),
        pytest.param(tolerations(None), -1.0, id="no tolerationSeconds: forever"),
        pytest.param(tolerations(1, 2), 1.0, id="the smallest"),
        pytest.param(tolerations(1, None), 1.0, id="seconds then forever"),
        pytest.param(tolerations(None, 1), 1.0, id="forever then seconds"),
    ],
)
def test_get_min_toleration_time(given: list[dict[str, Any]], expected: float) -> None:
    assert min_toleration_seconds(given) == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(tolerations(0), 0.0, id="zero: now"),
        pytest.param(tolerations(-5), 0.0, id="negative: now"),
        pytest.param(tolerations(None, 30, -1), 0.0, id="any non-positive wins"),
        pytest.param(tolerations(-1, 30), 0.0, id="non-positive first"),
        pytest.param(tolerations(MAX_INT64), -1.0, id="MaxInt64 is the sentinel: forever"),
        pytest.param(tolerations(MAX_INT64, 7), 7.0, id="MaxInt64 beside a real time"),
        pytest.param(
            tolerations(9_223_372_036), 9_223_372_036.0, id="largest whole seconds a Duration holds"
        ),
        pytest.param(tolerations(9_223_372_037), -1.0, id="past a Duration: forever"),
        pytest.param(tolerations(MAX_INT64 - 1), -1.0, id="MaxInt64-1: forever, not Go's wrap to -2 s"),
        pytest.param(tolerations(1 << 55), -1.0, id="forever, not Go's wrap to 0 (evict now)"),
        pytest.param(tolerations(1 << 55, 30), 30.0, id="a real time beside a huge one"),
    ],
)
def test_edges_of_the_arithmetic(given: list[dict[str, Any]], expected: float) -> None:
    assert min_toleration_seconds(given) == pytest.approx(expected)
