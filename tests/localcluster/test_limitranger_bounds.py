"""LimitRanger's per-container max and min, as `limitranger.go` words its refusals."""

from __future__ import annotations

from typing import Any, cast

import pytest

from localcluster import errors
from localcluster.objects import ObjectAPI
from localcluster.quota import Admission

POD = {"metadata": {"name": "p"}}
ITEMS = [{"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "64Mi"}}]


def _check(resources: dict[str, Any]) -> None:
    Admission(cast(ObjectAPI, None))._check_bounds(POD, {"resources": resources}, ITEMS)


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"requests": {"memory": "64Mi"}}, "maximum cpu usage per Container is 1.  No limit is specified"),
        (
            {"limits": {"cpu": "2"}, "requests": {"memory": "64Mi"}},
            "maximum cpu usage per Container is 1, but limit is 2",
        ),
        ({"limits": {"cpu": "1"}}, "minimum memory usage per Container is 64Mi.  No request is specified"),
        (
            {"limits": {"cpu": "1"}, "requests": {"memory": "32Mi"}},
            "minimum memory usage per Container is 64Mi, but request is 32Mi",
        ),
    ],
)
def test_out_of_bounds_is_forbidden(resources: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.StatusError) as caught:
        _check(resources)
    assert caught.value.code == 403
    assert message in str(caught.value)


def test_within_bounds_passes() -> None:
    _check({"limits": {"cpu": "1"}, "requests": {"memory": "64Mi"}})
