"""Taints and tolerations on plain-dict objects, as `pkg/util/taints` and component-helpers say.

Three parties meet here: the node-lifecycle controller writes the node-condition taints
(`node.kubernetes.io/not-ready`, `unreachable`, the pressure taints), the taint-eviction
controller reads NoExecute taints and matches them against pod tolerations, and the local
cluster's scheduler filters nodes by them. Matching follows `v1.Toleration.ToleratesTaint`,
`TolerationsTolerateTaint`, `FindMatchingUntoleratedTaint` and `GetMatchingTolerations` exactly,
so a pod that the scheduler places on a tainted node is judged the same way when the taint turns
into an eviction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubeutil.strconv import parse_int

Taint = Mapping[str, Any]
Toleration = Mapping[str, Any]

NO_EXECUTE = "NoExecute"
NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"

TAINT_NODE_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_NODE_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
TAINT_NODE_DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
TAINT_NODE_NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"
TAINT_NODE_PID_PRESSURE = "node.kubernetes.io/pid-pressure"

_MAX_INT64 = (1 << 63) - 1


def node_taints(node: Mapping[str, Any]) -> list[Taint]:
    """`spec.taints` of a node (an empty list when unset)."""
    return list((node.get("spec") or {}).get("taints") or ())


def pod_tolerations(pod: Mapping[str, Any]) -> list[Toleration]:
    """`spec.tolerations` of a pod (an empty list when unset)."""
    return list((pod.get("spec") or {}).get("tolerations") or ())


def taints_with_effect(taints: Iterable[Taint], effect: str) -> list[Taint]:
    """The taints of one effect (the taint manager keeps only NoExecute ones)."""
    return [t for t in taints if t.get("effect") == effect]


def taint_match(a: Taint, b: Taint) -> bool:
    """Same key and effect: Go's `Taint.MatchTaint` (value and timeAdded do not count)."""
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def taint_key_effect(taint: Taint) -> tuple[str, str]:
    return str(taint.get("key", "")), str(taint.get("effect", ""))


def taint_exists(taints: Iterable[Taint], taint: Taint) -> bool:
    return any(taint_match(t, taint) for t in taints)


def tolerates_taint(toleration: Toleration, taint: Taint) -> bool:
    """`Toleration.ToleratesTaint`: effect and key must match when set; Exists ignores the value.

    An empty key with `Exists` tolerates everything; `Gt`/`Lt` compare the taint's value with the
    toleration's as int64s (either not an integer: not tolerated); an unknown operator tolerates
    nothing.
    """
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    if operator in ("Gt", "Lt"):
        threshold = parse_int(str(toleration.get("value") or ""))
        have = parse_int(str(taint.get("value") or ""))
        if threshold is None or have is None:
            return False
        return have > threshold if operator == "Gt" else have < threshold
    return operator == "Exists"


def tolerations_tolerate_taint(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """`v1helper.TolerationsTolerateTaint`: any one toleration is enough."""
    return any(tolerates_taint(toleration, taint) for toleration in tolerations)


def find_matching_untolerated_taint(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], effects: Iterable[str]
) -> Taint | None:
    """`v1helper.FindMatchingUntoleratedTaint` over the taints of `effects`: the first not tolerated.

    The scheduler's TaintToleration filter asks this with NoSchedule and NoExecute, and names the
    taint it returns in its message.
    """
    wanted = frozenset(effects)
    for taint in taints:
        if taint.get("effect") in wanted and not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None


def get_matching_tolerations(
    taints: Sequence[Taint], tolerations: Sequence[Toleration]
) -> tuple[bool, list[Toleration]]:
    """Whether every taint is tolerated, and for each taint the first toleration that does it.

    As `v1helper.GetMatchingTolerations`: no taints -> (True, []); taints but no tolerations or
    one untolerated taint -> (False, []).
    """
    if not taints:
        return True, []
    if not tolerations:
        return False, []
    used: list[Toleration] = []
    for taint in taints:
        for toleration in tolerations:
            if tolerates_taint(toleration, taint):
                used.append(toleration)
                break
        else:
            return False, []
    return True, used


def min_toleration_seconds(tolerations: Sequence[Toleration]) -> float:
    """The taint manager's `getMinTolerationTime`, in seconds: 0 = now, negative = never.

    No tolerations (nothing to wait for) and any `tolerationSeconds <= 0` both mean now; when
    none of the tolerations carries `tolerationSeconds` the pod tolerates forever (-1). As in Go
    the smallest seconds start from `math.MaxInt64`, so a toleration of exactly MaxInt64 seconds
    counts as forever. Go then multiplies into an int64 `time.Duration`, which wraps past ~292
    years: some huge values come out negative (forever), others as a few seconds or zero, which
    would evict a pod whose owner asked for "practically never". Every value past that range
    is read as forever instead, the only reading its owner can have meant.
    """
    if not tolerations:
        return 0.0
    smallest = _MAX_INT64
    for toleration in tolerations:
        seconds = toleration.get("tolerationSeconds")
        if seconds is None:
            continue
        seconds = int(seconds)
        if seconds <= 0:
            return 0.0
        smallest = min(smallest, seconds)
    if smallest == _MAX_INT64:
        return -1.0
    if smallest * 1_000_000_000 > _MAX_INT64:
        return -1.0
    return float(smallest)


def taint_set_diff(new: Sequence[Taint], old: Sequence[Taint]) -> tuple[list[Taint], list[Taint]]:
    """`taintutils.TaintSetDiff`: (in `new` but not `old`, in `old` but not `new`) by key and effect."""
    to_add = [t for t in new if not taint_exists(old, t)]
    to_remove = [t for t in old if not taint_exists(new, t)]
    return to_add, to_remove


def swap_taints(
    current: Sequence[Taint], add: Sequence[Taint], remove: Sequence[Taint]
) -> list[dict[str, Any]] | None:
    """The node's taints after removing `remove` and adding (or updating) `add`; None if unchanged.

    As `AddOrUpdateTaintOnNode` + `RemoveTaintOffNode` in one write: a taint to add that is
    already there with the same value is kept as it is (its `timeAdded` too).
    """
    out: list[dict[str, Any]] = [dict(t) for t in current if not taint_exists(remove, t)]
    changed = len(out) != len(current)
    for taint in add:
        for i, existing in enumerate(out):
            if taint_match(existing, taint):
                if (existing.get("value") or "") != (taint.get("value") or ""):
                    out[i] = dict(taint)
                    changed = True
                break
        else:
            out.append(dict(taint))
            changed = True
    return out if changed else None
