"""Which pods to delete first: `ActivePodsWithRanks` from `pkg/controller/controller_utils.go`.

A scale-down removes the pods whose loss hurts least, in this order of questions (the first that
tells two pods apart decides):

1. unassigned before assigned (no `spec.nodeName`);
2. phase Pending before Unknown before Running;
3. not ready before ready;
4. lower `controller.kubernetes.io/pod-deletion-cost` first (`PodDeletionCost`, on by default);
5. higher rank first — the rank being how many related active pods share the pod's node
   ("doubled up" pods go first);
6. both ready: ready more recently first, compared in logarithmic buckets of time-since-ready
   (`LogarithmicScaleDown`, on by default), equal buckets broken by UID;
7. more container restarts first;
8. created more recently first, with the same logarithmic buckets and UID tie-break.

Both gates default to on, as in KCM; turning one off restores the older rule (no cost; plain
"more recent first" timestamps). `sort_active_pods` is Go's `ActivePods` order: the same
questions without cost, rank or buckets.

Facts are extracted once per pod, then a comparator mirrors Go's `Less` (the bucket comparisons
are not a sort key: equal timestamps fall through to the next rule, equal *buckets* do not).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from controllers.common.pods import (
    deletion_cost,
    get_pod_ready_condition,
    is_pod_active,
    is_pod_ready,
    max_container_restarts,
    node_name,
    pod_phase,
)
from kubeutil.timestamps import parse_time

_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


@dataclass(frozen=True, slots=True)
class _Facts:
    node: str
    phase: int
    ready: bool
    cost: int
    rank: int
    ready_time: datetime | None
    restarts: int
    created: datetime | None
    uid: str


def _facts(pod: Mapping[str, Any], rank: int) -> _Facts:
    meta = pod.get("metadata") or {}
    ready = is_pod_ready(pod)
    ready_time = parse_time((get_pod_ready_condition(pod) or {}).get("lastTransitionTime")) if ready else None
    return _Facts(
        node=node_name(pod),
        phase=_PHASE_ORDINAL.get(pod_phase(pod), 0),
        ready=ready,
        cost=deletion_cost(pod),
        rank=rank,
        ready_time=ready_time,
        restarts=max_container_restarts(pod),
        created=parse_time(meta.get("creationTimestamp")),
        uid=str(meta.get("uid") or ""),
    )


def _after_or_zero(t1: datetime | None, t2: datetime | None) -> bool:
    """Go's `afterOrZero`: a zero time sorts first, else the later time first."""
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


_MICROSECOND = timedelta(microseconds=1)


def _log_bucket(t: datetime, now: datetime) -> int:
    nanos = ((now - t) // _MICROSECOND) * 1000  # datetimes carry microseconds; Go counts nanoseconds
    return int(math.log2(nanos)) if nanos > 0 else -1


def _time_less(
    t1: datetime | None,
    t2: datetime | None,
    uid1: str,
    uid2: str,
    now: datetime | None,
    logarithmic: bool,
) -> bool:
    if not logarithmic or now is None or t1 is None or t2 is None:
        return _after_or_zero(t1, t2)
    diff = _log_bucket(t1, now) - _log_bucket(t2, now)
    if diff == 0:
        return uid1 < uid2
    return diff < 0


def less(
    a: _Facts,
    b: _Facts,
    now: datetime | None,
    *,
    pod_deletion_cost: bool = True,
    logarithmic_scale_down: bool = True,
) -> bool:
    """Go's `ActivePodsWithRanks.Less`: whether `a` should be deleted before `b`.

    `pod_deletion_cost` and `logarithmic_scale_down` are KCM's `PodDeletionCost` and
    `LogarithmicScaleDown` gates."""
    if a.node != b.node and (not a.node or not b.node):
        return not a.node
    if a.phase != b.phase:
        return a.phase < b.phase
    if a.ready != b.ready:
        return not a.ready
    if pod_deletion_cost and a.cost != b.cost:
        return a.cost < b.cost
    if a.rank != b.rank:
        return a.rank > b.rank
    if a.ready and b.ready and a.ready_time != b.ready_time:
        return _time_less(a.ready_time, b.ready_time, a.uid, b.uid, now, logarithmic_scale_down)
    if a.restarts != b.restarts:
        return a.restarts > b.restarts
    if a.created != b.created:
        return _time_less(a.created, b.created, a.uid, b.uid, now, logarithmic_scale_down)
    return False


def ranks_by_related_pods_on_same_node(
    pods: Sequence[Mapping[str, Any]], related_pods: Iterable[Mapping[str, Any]]
) -> list[int]:
    """`getPodsRankedByRelatedPodsOnSameNode`: per pod, the active related pods on its node."""
    on_node: dict[str, int] = {}
    for pod in related_pods:
        if is_pod_active(pod):
            node = node_name(pod)
            on_node[node] = on_node.get(node, 0) + 1
    return [on_node.get(node_name(p), 0) for p in pods]


def sort_active_pods_with_ranks(
    pods: Sequence[dict[str, Any]],
    ranks: Sequence[int],
    now: datetime | None,
    *,
    pod_deletion_cost: bool = True,
    logarithmic_scale_down: bool = True,
) -> list[dict[str, Any]]:
    """Pods ordered most-deletable first (`sort.Sort(ActivePodsWithRanks{...})`)."""
    facts = [_facts(p, r) for p, r in zip(pods, ranks, strict=True)]
    gates = {"pod_deletion_cost": pod_deletion_cost, "logarithmic_scale_down": logarithmic_scale_down}

    def cmp(i: int, j: int) -> int:
        if less(facts[i], facts[j], now, **gates):
            return -1
        if less(facts[j], facts[i], now, **gates):
            return 1
        return 0

    order = sorted(range(len(pods)), key=functools.cmp_to_key(cmp))
    return [pods[i] for i in order]


def sort_active_pods(pods: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`sort.Sort(ActivePods(pods))`: unassigned, then by phase, readiness, time ready, restarts and
    age, as `ActivePodsWithRanks` without deletion cost, ranks or logarithmic buckets."""
    return sort_active_pods_with_ranks(pods, [0] * len(pods), None, pod_deletion_cost=False)


def pods_to_delete(
    pods: Sequence[dict[str, Any]],
    related_pods: Iterable[Mapping[str, Any]],
    count: int,
    now: datetime | None,
    *,
    pod_deletion_cost: bool = True,
    logarithmic_scale_down: bool = True,
) -> list[dict[str, Any]]:
    """`getPodsToDelete`: the first `count` pods by rank (no sort needed when all go)."""
    if count < len(pods):
        ranks = ranks_by_related_pods_on_same_node(pods, related_pods)
        return sort_active_pods_with_ranks(
            pods,
            ranks,
            now,
            pod_deletion_cost=pod_deletion_cost,
            logarithmic_scale_down=logarithmic_scale_down,
        )[:count]
    return list(pods[:count])
