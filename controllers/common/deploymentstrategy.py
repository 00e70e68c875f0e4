"""A Deployment's strategy and its surge / unavailability budget, as `deployment_util.go` computes them.

Ported from `pkg/controller/deployment/util` (`MaxSurge`, `MaxUnavailable`, `ResolveFenceposts`,
`IsRollingUpdate`) with Go's names. They live in `common` and not in the Deployment controller
because the NodeMaintenance drain asks the same question the Deployment controller answers (can
this Deployment surge, and so replace an evacuated pod before it goes?); both must get the same
answer from the same arithmetic, without one controller importing the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controllers.common.intstr import IntOrStringError, scaled_value

Obj = Mapping[str, Any]

ROLLING_UPDATE = "RollingUpdate"
RECREATE = "Recreate"


def replicas(d: Obj) -> int:
    """`spec.replicas` of a Deployment or ReplicaSet (the API server defaults it to 1)."""
    value = (d.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def strategy_type(d: Obj) -> str:
    return str(((d.get("spec") or {}).get("strategy") or {}).get("type") or ROLLING_UPDATE)


def is_rolling_update(d: Obj) -> bool:
    return strategy_type(d) == ROLLING_UPDATE


def _rolling_params(d: Obj) -> Mapping[str, Any]:
    return ((d.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}


def resolve_fenceposts(
    max_surge: int | str | None, max_unavailable: int | str | None, desired: int
) -> tuple[int, int]:
    """`ResolveFenceposts`: surge rounds up, unavailable rounds down; both 0 means unavailable 1.

    A rollout with neither surge nor unavailability could never make progress, so Kubernetes
    lets one pod be unavailable in that case. An unset value counts as 0, as Go's
    `ValueOrDefault(..., FromInt(0))`: the 25 % defaults are the API server's to apply, and a
    controller that applied them too would disagree with KCM on an object that reached it
    undefaulted.
    """
    surge = scaled_value(max_surge, desired, round_up=True)
    unavailable = scaled_value(max_unavailable, desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d: Obj) -> int:
    """`MaxSurge`: 0 unless RollingUpdate."""
    if not is_rolling_update(d):
        return 0
    params = _rolling_params(d)
    try:
        surge, _ = resolve_fenceposts(params.get("maxSurge"), params.get("maxUnavailable"), replicas(d))
    except IntOrStringError:
        return 0  # as Go: an invalid value resolves to 0 (validation rejects it anyway)
    return surge


def max_unavailable(d: Obj) -> int:
    """`MaxUnavailable`: 0 unless RollingUpdate with replicas; never more than replicas."""
    if not is_rolling_update(d) or replicas(d) == 0:
        return 0
    params = _rolling_params(d)
    try:
        _, unavailable = resolve_fenceposts(params.get("maxSurge"), params.get("maxUnavailable"), replicas(d))
    except IntOrStringError:
        return 0
    return min(unavailable, replicas(d))
