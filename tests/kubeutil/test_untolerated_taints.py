"""Which taints a pod's tolerations leave untolerated, against pkg/apis/core/v1/helper's tables.

`TolerationsTolerateTaintsWithFilter(tolerations, taints, filter)` is true when every taint the
filter keeps is tolerated; here the filter is a set of effects, as the scheduler and the taint
manager use it (`find_matching_untolerated_taint` answers None exactly when Go answers true).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubeutil.taints import find_matching_untolerated_taint, get_matching_tolerations

NS, NE = "NoSchedule", "NoExecute"
ALL = ("NoSchedule", "PreferNoSchedule", "NoExecute")
FOO_NS = {"key": "foo", "operator": "Exists", "effect": NS}


# TestTolerationsTolerateTaintsWithFilter, case for case.
@pytest.mark.parametrize(
    ("tolerations", "taints", "effects", "tolerated"),
    [
        pytest.param([], [], ALL, True, id="empty tolerations tolerate empty taints"),
        pytest.param([FOO_NS], [], ALL, True, id="non-empty tolerations tolerate empty taints"),
        pytest.param([FOO_NS], [{"key": "foo", "effect": NS}], ALL, True, id="tolerations match all taints"),
        pytest.param(
            [FOO_NS],
            [{"key": "bar", "effect": NS}],
            (),
            True,
            id="no taints apply to the filter",
        ),
        pytest.param(
            [FOO_NS],
            [{"key": "bar", "effect": NS}],
            ALL,
            False,
            id="no filter: all taints apply, untolerated",
        ),
        pytest.param(
            [{"key": "foo", "operator": "Exists", "effect": NE}],
            [{"key": "foo", "effect": NE}, {"key": "bar", "effect": NS}],
            (NE,),
            True,
            id="filter keeps NoExecute, tolerated",
        ),
    ],
)
def test_tolerations_tolerate_taints_with_filter(
    tolerations: list[dict[str, Any]], taints: list[dict[str, Any]], effects: tuple[str, ...], tolerated: bool
) -> None:
    assert (find_matching_untolerated_taint(taints, tolerations, effects) is None) is tolerated


def test_matching_tolerations_take_the_first_that_tolerates_each_taint() -> None:
    """`GetMatchingTolerations`: one toleration per taint, in taint order; the first match wins."""
    t1, t2 = {"key": "a", "effect": NE}, {"key": "b", "effect": NE}
    any_ne = {"operator": "Exists", "effect": NE, "tolerationSeconds": 5}
    only_a = {"key": "a", "operator": "Exists", "tolerationSeconds": 50}
    assert get_matching_tolerations([t1, t2], [only_a, any_ne]) == (True, [only_a, any_ne])
    assert get_matching_tolerations([t1, t2], [any_ne, only_a]) == (True, [any_ne, any_ne])
    assert get_matching_tolerations([t1, t2], [only_a]) == (False, [])
