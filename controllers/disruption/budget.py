"""The PodDisruptionBudget arithmetic of `pkg/controller/disruption/disruption.go`, as pure functions.

The eviction API (the real API server's, and the local cluster's) trusts these numbers: an
eviction is allowed only while `status.disruptionsAllowed > 0`, and it decrements that number and
records the pod under `status.disruptedPods` itself. So every rule here is Kubernetes' rule, not
an approximation:

- `expectedPods` / `desiredHealthy`: an integer `minAvailable` is compared with the number of
  selected pods (all of them, terminating ones included); a percentage `minAvailable` or any
  `maxUnavailable` is taken against the summed scale of the selected pods' controllers, each
  controller counted once; percentages round up (`GetScaledValueFromIntOrPercent(..., true)`), and
  `desiredHealthy = expected - maxUnavailable` never goes below 0;
- `currentHealthy`: selected pods that are Ready, not terminating, and not listed in
  `disruptedPods` less than `DeletionTimeout` (2 min) ago. With the `DeclarativeNodeMaintenance`
  gate, pods answered with `EvacuationInitiated=True` are counted as disrupted too (KEP-4212's
  disruption-controller improvement): a migration's old pod is on its way out, so the surge pod
  replacing it is not spare capacity the eviction API may take;
- `disruptionsAllowed = currentHealthy - desiredHealthy`, but 0 when that is negative or when
  `expectedPods` is 0 (a budget that just started matching pods is safe until recomputed);
- `disruptedPods` entries are dropped once the pod is terminating, gone, or older than the
  timeout; the budget is rechecked at the earliest remaining expiry;
- the `DisruptionAllowed` condition follows `pdbhelper.UpdateDisruptionAllowedCondition`, set with
  `apimeta.SetStatusCondition` semantics; a failed sync instead writes `disruptionsAllowed: 0` with
  reason `SyncFailed`, keeping the other fields (`failSafe`).

Controllers of selected pods are resolved by a `Finder` (see `finders.py`), the only async step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from controllers.common.controller_ref import get_controller_of
from controllers.common.evacuation import evacuation_initiated
from controllers.common.intstr import IntOrStringError, scaled_value
from controllers.common.pods import is_pod_ready, is_terminating
from kubeutil.conditions import set_status_condition
from kubeutil.meta import object_meta
from kubeutil.strconv import go_quote
from kubeutil.timestamps import parse_time

Obj = Mapping[str, Any]

#: `DeletionTimeout`: how long a `disruptedPods` entry protects a pod the eviction API let go of.
DELETION_TIMEOUT = timedelta(minutes=2)

DISRUPTION_ALLOWED = "DisruptionAllowed"
REASON_SUFFICIENT_PODS = "SufficientPods"
REASON_INSUFFICIENT_PODS = "InsufficientPods"
REASON_SYNC_FAILED = "SyncFailed"


class BudgetError(Exception):
    """The budget cannot be computed safely (unresolvable controller, bad spec): fail safe."""


@dataclass(frozen=True, slots=True)
class ControllerScale:
    """A controller of selected pods and its desired replicas (`controllerAndScale`)."""

    uid: str
    scale: int


#: Resolves a pod's controller reference (in a namespace) to its scale, None when it is not a
#: controller this finder knows; raises for a reference that cannot be resolved at all.
Finder = Callable[[Mapping[str, Any], str], Awaitable[ControllerScale | None]]


@dataclass
class Budget:
    """One sync's numbers, before they become a status."""

    expected_pods: int = 0
    desired_healthy: int = 0
    current_healthy: int = 0
    disrupted_pods: dict[str, str] = field(default_factory=dict)
    recheck_at: datetime | None = None
    unmanaged_pods: list[str] = field(default_factory=list)
    expired_pods: list[Obj] = field(default_factory=list)
    evacuating_pods: int = 0

    @property
    def disruptions_allowed(self) -> int:
        allowed = self.current_healthy - self.desired_healthy
        return 0 if self.expected_pods <= 0 or allowed <= 0 else allowed


def _spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _percent_of(value: Any, total: int) -> int:
    """`intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)`; its error message as Go's."""
    try:
        return scaled_value(value, total, round_up=True)
    except IntOrStringError as exc:
        raise BudgetError(str(exc)) from exc


async def expected_scale(pods: Sequence[Obj], finder: Finder) -> tuple[int, list[str]]:
    """`getExpectedScale`: the summed scale of the pods' controllers, and the unmanaged pods' names.

    Each controller counts once however many of its pods are selected. A pod with no controller
    reference is unmanaged (reported, not an error); a reference no finder resolves is an error.
    """
    scales: dict[str, int] = {}
    unmanaged: list[str] = []
    for pod in pods:
        ref = get_controller_of(pod)
        if ref is None:
            unmanaged.append(str(object_meta(pod).get("name", "")))
            continue
        if str(ref.get("uid", "")) in scales:
            continue
        found = await finder(ref, str(object_meta(pod).get("namespace", "")))
        if found is None:
            raise BudgetError(
                f"found no controllers for pod {go_quote(str(object_meta(pod).get('name', '')))}"
            )
        scales[found.uid] = found.scale
    return sum(scales.values()), unmanaged


async def expected_pod_count(pdb: Obj, pods: Sequence[Obj], finder: Finder) -> tuple[int, int, list[str]]:
    """`getExpectedPodCount`: `(expectedPods, desiredHealthy, unmanaged pod names)`.

    `maxUnavailable` wins when both are set (the API server forbids that anyway).
    """
    spec = _spec(pdb)
    max_unavailable = spec.get("maxUnavailable")
    min_available = spec.get("minAvailable")
    if max_unavailable is not None:
        expected, unmanaged = await expected_scale(pods, finder)
        unavailable = _percent_of(max_unavailable, expected)
        return expected, max(0, expected - unavailable), unmanaged
    if min_available is not None:
        if isinstance(min_available, int) and not isinstance(min_available, bool):
            return len(pods), min_available, []
        expected, unmanaged = await expected_scale(pods, finder)
        return expected, _percent_of(min_available, expected), unmanaged
    return 0, 0, []


def build_disrupted_pod_map(
    pods: Sequence[Obj], pdb: Obj, now: datetime
) -> tuple[dict[str, str], datetime | None, list[Obj]]:
    """`buildDisruptedPodMap`: the entries still in force, the earliest expiry, and expired pods.

    An entry survives only for a selected pod that is not yet terminating and was disrupted less
    than `DELETION_TIMEOUT` ago; the eviction API's timestamp string is kept byte for byte. An
    entry without a readable time is Go's zero time: long expired. Expired pods are returned so
    the caller can raise `NotDeleted` on them, as KCM does.
    """
    recorded: Mapping[str, Any] = (pdb.get("status") or {}).get("disruptedPods") or {}
    kept: dict[str, str] = {}
    recheck: datetime | None = None
    expired: list[Obj] = []
    if not recorded:
        return kept, recheck, expired
    for pod in pods:
        if is_terminating(pod):
            continue
        name = str(object_meta(pod).get("name", ""))
        if name not in recorded:
            continue
        stamp = recorded[name]
        when = parse_time(stamp)
        expected_deletion = when + DELETION_TIMEOUT if when is not None else None
        if expected_deletion is None or expected_deletion < now:
            expired.append(pod)
            continue
        if recheck is None or expected_deletion < recheck:
            recheck = expected_deletion
        kept[name] = str(stamp)
    return kept, recheck, expired


def is_evacuating(pod: Obj) -> bool:
    """A pod answered with `EvacuationInitiated=True` and not yet terminating."""
    return not is_terminating(pod) and evacuation_initiated(pod)


def count_healthy_pods(
    pods: Sequence[Obj], disrupted: Mapping[str, str], now: datetime, *, evacuation: bool = False
) -> int:
    """`countHealthyPods`: Ready, not terminating, not recently disrupted (nor evacuating, with the gate)."""
    healthy = 0
    for pod in pods:
        if is_terminating(pod):
            continue
        name = str(object_meta(pod).get("name", ""))
        if name in disrupted:
            when = parse_time(disrupted[name])
            if when is not None and when + DELETION_TIMEOUT > now:
                continue
        if evacuation and evacuation_initiated(pod):
            continue
        if is_pod_ready(pod):
            healthy += 1
    return healthy


async def compute_budget(
    pdb: Obj, pods: Sequence[Obj], finder: Finder, now: datetime, *, evacuation: bool = False
) -> Budget:
    """Everything `trySync` computes before writing: raises `BudgetError` (or the finder's error)."""
    expected, desired, unmanaged = await expected_pod_count(pdb, pods, finder)
    disrupted, recheck, expired = build_disrupted_pod_map(pods, pdb, now)
    return Budget(
        expected_pods=expected,
        desired_healthy=desired,
        current_healthy=count_healthy_pods(pods, disrupted, now, evacuation=evacuation),
        disrupted_pods=disrupted,
        recheck_at=recheck,
        unmanaged_pods=unmanaged,
        expired_pods=expired,
        evacuating_pods=sum(1 for p in pods if is_evacuating(p)) if evacuation else 0,
    )


# -- conditions and status --------------------------------------------------------------------


def _condition(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cond in status.get("conditions") or ():
        if cond.get("type") == DISRUPTION_ALLOWED:
            return cond  # type: ignore[no-any-return]
    return None


def conditions_are_up_to_date(pdb: Obj) -> bool:
    """`pdbhelper.ConditionsAreUpToDate`."""
    status = pdb.get("status") or {}
    cond = _condition(status)
    if cond is None or status.get("observedGeneration", 0) != object_meta(pdb).get("generation", 0):
        return False
    if int(status.get("disruptionsAllowed") or 0) > 0:
        return cond.get("status") == "True" and cond.get("reason") == REASON_SUFFICIENT_PODS
    return cond.get("status") == "False" and cond.get("reason") == REASON_INSUFFICIENT_PODS


def _copy_conditions(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(c) for c in status.get("conditions") or ()]


def new_status(pdb: Obj, budget: Budget, now: datetime) -> dict[str, Any] | None:
    """`updatePdbStatus`: the status to write, or None when the stored one is already right."""
    status = pdb.get("status") or {}
    generation = int(object_meta(pdb).get("generation") or 0)
    allowed = budget.disruptions_allowed
    if (
        status.get("currentHealthy", 0) == budget.current_healthy
        and status.get("desiredHealthy", 0) == budget.desired_healthy
        and status.get("expectedPods", 0) == budget.expected_pods
        and status.get("disruptionsAllowed", 0) == allowed
        and dict(status.get("disruptedPods") or {}) == budget.disrupted_pods
        and status.get("observedGeneration", 0) == generation
        and conditions_are_up_to_date(pdb)
    ):
        return None
    conditions = _copy_conditions(status)
    sufficient = allowed > 0
    set_status_condition(
        conditions,
        {
            "type": DISRUPTION_ALLOWED,
            "status": "True" if sufficient else "False",
            "reason": REASON_SUFFICIENT_PODS if sufficient else REASON_INSUFFICIENT_PODS,
            "message": "",
            "observedGeneration": generation,
        },
        now,
    )
    out: dict[str, Any] = {
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": budget.current_healthy,
        "desiredHealthy": budget.desired_healthy,
        "expectedPods": budget.expected_pods,
        "conditions": conditions,
    }
    if budget.disrupted_pods:
        out["disruptedPods"] = dict(budget.disrupted_pods)
    return out


def fail_safe_status(pdb: Obj, message: str, now: datetime) -> dict[str, Any] | None:
    """`failSafe`: the stored status with `disruptionsAllowed: 0` and `DisruptionAllowed=False/SyncFailed`.

    Every other field is kept, so a transient failure does not erase what is known; None when the
    stored status already says exactly this (no write needed).
    """
    status = dict(pdb.get("status") or {})
    conditions = _copy_conditions(status)
    changed = set_status_condition(
        conditions,
        {
            "type": DISRUPTION_ALLOWED,
            "status": "False",
            "reason": REASON_SYNC_FAILED,
            "message": message,
            "observedGeneration": int(status.get("observedGeneration") or 0),
        },
        now,
    )
    if not changed and int(status.get("disruptionsAllowed") or 0) == 0:
        return None
    status["disruptionsAllowed"] = 0
    status["conditions"] = conditions
    return status
