"""Toleration matching and the taint manager's choice of when to delete, against Go's tables."""

from __future__ import annotations

from typing import Any

import pytest

from kubeutil.taints import (
    get_matching_tolerations,
    min_toleration_seconds,
    swap_taints,
    taint_set_diff,
    tolerates_taint,
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
        ({"key": "dedicated", "operator": "Lt", "value": "gpu"}, CUSTOM, False),  # unknown operator
    ],
)
def test_tolerates_taint(toleration: dict[str, Any], taint: dict[str, Any], expected: bool) -> None:
    assert tolerates_taint(toleration, taint) is expected


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
