"""Toleration matching and the taint manager's choice of when to delete, against Go's tables."""

from __future__ import annotations

from typing import Any

import pytest

from kubeutil.taints import (
    find_matching_untolerated_taint,
    get_matching_tolerations,
    min_toleration_seconds,
    swap_taints,
    taint_set_diff,
    tolerates_taint,
    tolerations_tolerate_taint,
)

UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
CUSTOM = {"key": "dedicated", "value": "gpu", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute"}, CUSTOM, True),
        ({"key": "dedicated", "value": "gpu"}, CUSTOM, True),  # operator defaults to Equal, any effect
        ({"key": "dedicated", "operator": "Equal", "value": "cpu"}, CUSTOM, False),
        ({"key": "dedicated", "operator": "Exists"}, CUSTOM, True),
        ({"operator": "Exists"}, CUSTOM, True),  # empty key + Exists tolerates everything
        ({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}, CUSTOM, False),
        ({"key": "other", "operator": "Exists"}, CUSTOM, False),
        ({"key": "dedicated", "operator": "Lt", "value": "gpu"}, CUSTOM, False),  # not integers
        ({"key": "dedicated", "operator": "Bogus", "value": "gpu"}, CUSTOM, False),  # unknown operator
        ({"operator": "Equal", "value": "gpu"}, CUSTOM, True),  # empty key matches any key
    ],
)
def test_tolerates_taint(toleration: dict[str, Any], taint: dict[str, Any], expected: bool) -> None:
    assert tolerates_taint(toleration, taint) is expected


NS, NE = "NoSchedule", "NoExecute"
SLA = "node.kubernetes.io/sla"


# `TestTolerationToleratesTaint`, k8s.io/api/core/v1/toleration_test.go, case for case.
@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        pytest.param(
            {"key": "foo", "operator": "Exists", "effect": NS},
            {"key": "foo", "effect": NS},
            True,
            id="same key and effect, Exists, taint has no value",
        ),
        pytest.param(
            {"key": "foo", "operator": "Exists", "effect": NS},
            {"key": "foo", "value": "bar", "effect": NS},
            True,
            id="same key and effect, Exists, taint has some value",
        ),
        pytest.param(
            {"key": "", "operator": "Exists", "effect": NS},
            {"key": "foo", "value": "bar", "effect": NS},
            True,
            id="same effect, empty key and Exists match all taints",
        ),
        pytest.param(
            {"key": "foo", "operator": "Equal", "value": "bar", "effect": NS},
            {"key": "foo", "value": "bar", "effect": NS},
            True,
            id="same key, effect and value, Equal",
        ),
        pytest.param(
            {"key": "foo", "operator": "Equal", "value": "value1", "effect": NS},
            {"key": "foo", "value": "value2", "effect": NS},
            False,
            id="same key and effect, different values, Equal",
        ),
        pytest.param(
            {"key": "foo", "operator": "Equal", "value": "bar", "effect": NS},
            {"key": "foo", "value": "bar", "effect": NE},
            False,
            id="same key and value, different effects, Equal",
        ),
        pytest.param(
            {"key": SLA, "operator": "Gt", "value": "950", "effect": NS},
            {"key": SLA, "value": "800", "effect": NS},
            False,
            id="Gt, taint value less than toleration value",
        ),
        pytest.param(
            {"key": SLA, "operator": "Gt", "value": "750", "effect": NS},
            {"key": SLA, "value": "950", "effect": NS},
            True,
            id="Gt, taint value greater than toleration value",
        ),
        pytest.param(
            {"key": SLA, "operator": "Lt", "value": "800", "effect": NS},
            {"key": SLA, "value": "950", "effect": NS},
            False,
            id="Lt, taint value greater than toleration value",
        ),
        pytest.param(
            {"key": SLA, "operator": "Lt", "value": "950", "effect": NS},
            {"key": SLA, "value": "800", "effect": NS},
            True,
            id="Lt, taint value less than toleration value",
        ),
        pytest.param(
            {"key": SLA, "operator": "Gt", "value": "950", "effect": NS},
            {"key": SLA, "value": "950", "effect": NS},
            False,
            id="Gt, equal numeric values",
        ),
        pytest.param(
            {"key": SLA, "operator": "Gt", "value": "950", "effect": NS},
            {"key": SLA, "value": "high", "effect": NS},
            False,
            id="Gt, taint value not numeric",
        ),
        pytest.param(
            {"key": "test-key", "operator": "Gt", "value": "-100", "effect": NS},
            {"key": "test-key", "value": "-200", "effect": NS},
            False,
            id="Gt, negative values, taint value less than threshold",
        ),
        pytest.param(
            {"key": "test-key", "operator": "Gt", "value": "9223372036854775806", "effect": NS},
            {"key": "test-key", "value": "100", "effect": NS},
            False,
            id="Gt, large int64 values, taint value less than threshold",
        ),
    ],
)
def test_tolerates_taint_as_go(toleration: dict[str, Any], taint: dict[str, Any], expected: bool) -> None:
    assert tolerates_taint(toleration, taint) is expected


def test_out_of_int64_range_is_not_a_number() -> None:
    toleration = {"key": "k", "operator": "Lt", "value": "9223372036854775808"}  # MaxInt64 + 1
    assert not tolerates_taint(toleration, {"key": "k", "value": "1", "effect": NS})


def test_first_untolerated_taint_of_the_filtered_effects() -> None:
    prefer = {"key": "soft", "effect": "PreferNoSchedule"}
    hard = {"key": "hard", "value": "x", "effect": NS}
    assert find_matching_untolerated_taint([prefer, hard], [], (NS, NE)) == hard
    assert find_matching_untolerated_taint([prefer], [], (NS, NE)) is None
    assert find_matching_untolerated_taint([hard], [{"key": "hard", "operator": "Exists"}], (NS, NE)) is None
    assert tolerations_tolerate_taint([{"key": "a"}, {"operator": "Exists"}], hard)
    assert not tolerations_tolerate_taint([], hard)


def test_matching_tolerations_needs_every_taint_tolerated() -> None:
    tol_unreachable = {"key": UNREACHABLE["key"], "operator": "Exists", "tolerationSeconds": 30}
    assert get_matching_tolerations([], []) == (True, [])
    assert get_matching_tolerations([UNREACHABLE], []) == (False, [])
    assert get_matching_tolerations([UNREACHABLE, CUSTOM], [tol_unreachable]) == (False, [])
    ok, used = get_matching_tolerations([UNREACHABLE], [{"key": "x", "operator": "Exists"}, tol_unreachable])
    assert ok and used == [tol_unreachable]


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ([], 0.0),
        ([{"operator": "Exists"}], -1.0),  # no tolerationSeconds anywhere: forever
        (
            [
                {"operator": "Exists", "tolerationSeconds": 30},
                {"operator": "Exists", "tolerationSeconds": 10},
            ],
            10.0,
        ),
        ([{"operator": "Exists", "tolerationSeconds": 30}, {"operator": "Exists"}], 30.0),
        (
            [{"operator": "Exists", "tolerationSeconds": 30}, {"operator": "Exists", "tolerationSeconds": 0}],
            0.0,
        ),
        ([{"operator": "Exists", "tolerationSeconds": -5}], 0.0),
    ],
)
def test_min_toleration_seconds(tolerations: list[dict[str, Any]], expected: float) -> None:
    assert min_toleration_seconds(tolerations) == expected


def test_taint_set_diff_and_swap_keep_other_taints() -> None:
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
    add, remove = taint_set_diff([not_ready], [UNREACHABLE])
    assert add == [not_ready] and remove == [UNREACHABLE]
    swapped = swap_taints([CUSTOM, UNREACHABLE], add, remove)
    assert swapped == [CUSTOM, not_ready]
    assert swap_taints([CUSTOM], [CUSTOM], []) is None  # already there: no write
    assert swap_taints([CUSTOM], [{**CUSTOM, "value": "tpu"}], []) == [{**CUSTOM, "value": "tpu"}]
