"""Which selected nodes a maintenance works on now: its own limit and the cluster's.

A maintenance over many nodes must not take them all at once (a selector `kubernetes.io/os=linux`
would cordon the whole cluster and leave nothing to run on). Two limits, both decided here from
plain values so the decision is a table of cases:

- **the maintenance's own** (`spec.maxConcurrentNodes`, an integer or a percentage of the selected
  nodes, default 1): nodes are started in a stable order (by name) and at most that many are in
  progress at once. A node is in progress from the moment it is admitted until its part is done
  (drained; cordoned when the maintenance does not drain). Done nodes stay cordoned until the
  maintenance ends, as the KEP keeps them: the limit paces the drain, it does not undo it.
- **the cluster's** (`--node-maintenance-max-unschedulable`, default 50% of all nodes): across all
  maintenances, a node is not made unschedulable when that would leave more than that many nodes
  unschedulable (whoever cordoned them). A node that is already unschedulable costs nothing. A
  maintenance with `spec.overrideMaxUnschedulable: true` is not held back by it.

A node, once started, is never given back by these limits: they decide what starts, never undo
what has (a limit lowered mid-maintenance only delays the next start). Like `intstr`'s scaled
values, a percentage rounds down, but never below one node, so a maintenance always progresses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

DEFAULT_MAX_CONCURRENT_NODES = 1

_PERCENT = re.compile(r"^(\d{1,3})%$")


class LimitError(ValueError):
    """A limit that is neither a positive integer nor a percentage."""


def scaled(value: object, total: int, *, field_name: str, minimum: int = 1) -> int:
    """`intstr.GetScaledValueFromIntOrPercent` rounded down, floored at `minimum`.

    An integer is taken as is (it must be at least `minimum`); "N%" is N percent of `total`.
    """
    if isinstance(value, bool):
        raise LimitError(f"{field_name}: must be an integer or a percentage, got {value!r}")
    if isinstance(value, int):
        if value < minimum:
            raise LimitError(f"{field_name}: must be at least {minimum}, got {value}")
        return value
    if isinstance(value, str):
        match = _PERCENT.match(value.strip())
        if match is None:
            raise LimitError(f'{field_name}: must be an integer or a percentage like "25%", got {value!r}')
        percent = int(match.group(1))
        if percent > 100 or percent < min(minimum, 1):
            raise LimitError(
                f"{field_name}: a percentage must be between {min(minimum, 1)}% and 100%, got {value}"
            )
        return max(math.floor(total * percent / 100), 1) if percent > 0 else 0
    raise LimitError(f"{field_name}: must be an integer or a percentage, got {value!r}")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One selected node as the limits see it.

    `started`: the maintenance already works on it; `done`: its part is done there (drained, or
    cordoned when it does not drain); `unschedulable`: cordoned already, by anyone.
    """

    name: str
    started: bool = False
    done: bool = False
    unschedulable: bool = False


@dataclass(frozen=True, slots=True)
class Cluster:
    """The cluster-wide guard: `unschedulable` counts nodes cordoned or admitted to be cordoned."""

    nodes: int
    unschedulable: int
    max_unschedulable: int


@dataclass(frozen=True, slots=True)
class Admission:
    """`working`: the nodes it may act on now (started plus `new`); `waiting`: the rest, with why."""

    working: frozenset[str]
    new: tuple[str, ...] = ()
    waiting: dict[str, str] = field(default_factory=dict)
    in_progress: int = 0
    #: why the cluster guard held back a node the maintenance's own limit would have started
    held_by_cluster: str = ""
    #: the waiting nodes the cluster guard holds back (the others wait for their turn)
    held: frozenset[str] = frozenset()


def admit(
    candidates: Iterable[Candidate],
    *,
    limit: int,
    cluster: Cluster,
    override: bool = False,
    frozen: bool = False,
    hold: str = "",
) -> Admission:
    """Start the next nodes (by name) while fewer than `limit` are in progress.

    `frozen`: start nothing new (an invalid spec): what has started goes on, the rest waits.
    `hold`: the same, for the reason given (a rolling maintenance's pause, window or soak time).
    """
    ordered = sorted(candidates, key=lambda c: c.name)
    working = {c.name for c in ordered if c.started}
    in_progress = sum(1 for c in ordered if c.started and not c.done)
    slots = max(limit - in_progress, 0)
    unschedulable = cluster.unschedulable
    new: list[str] = []
    waiting: dict[str, str] = {}
    held = ""
    held_nodes: set[str] = set()
    for c in ordered:
        if c.started:
            continue
        if frozen:
            waiting[c.name] = "not started: the spec is invalid"
            continue
        if hold:
            waiting[c.name] = f"not started: {hold}"
            continue
        if slots <= 0:
            ahead = f", {len(held_nodes)} ahead of it held back by the cluster limit" if held_nodes else ""
            waiting[c.name] = (
                f"waiting for its turn: {in_progress + len(new)} of at most {limit} "
                f"nodes in progress (spec.maxConcurrentNodes){ahead}"
            )
            continue
        if not c.unschedulable and not override and unschedulable + 1 > cluster.max_unschedulable:
            reason = (
                f"cordoning {c.name} would make {unschedulable + 1} of {cluster.nodes} nodes unschedulable; "
                f"the cluster allows {cluster.max_unschedulable} (--node-maintenance-max-unschedulable; "
                "spec.overrideMaxUnschedulable: true to go beyond)"
            )
            waiting[c.name] = reason
            held = held or reason
            held_nodes.add(c.name)
            slots -= 1  # it keeps its place in line: the next nodes wait behind it, not around it
            continue
        new.append(c.name)
        slots -= 1
        if not c.unschedulable:
            unschedulable += 1
    return Admission(
        frozenset(working | set(new)),
        tuple(new),
        waiting,
        in_progress + len(new),
        held,
        frozenset(held_nodes),
    )


@dataclass(frozen=True, slots=True)
class Working:
    """The nodes one maintenance (by uid) has started: cordons it holds, and drains it may run.

    Two sets because a maintenance that cordoned its nodes first and drains later must not drain
    every cordoned node at once: a node cordoned but not yet admitted to drain stays cordoned and
    waits for its turn.
    """

    uid: str
    cordoning: frozenset[str] = frozenset()
    draining: frozenset[str] = frozenset()


# Status phases that mean the maintenance had started on the node (for cordon, and for drain).
# A rolling maintenance's `InMaintenance` node is drained and still held; its `Gating` and
# `Completed` ones were released and are in neither set.
CORDON_STARTED = frozenset({"WaitingForLease", "Cordoned", "Draining", "Drained", "InMaintenance"})
DRAIN_STARTED = frozenset({"Draining", "Drained", "InMaintenance"})


def from_status(uid: str, status: object) -> Working:
    """What a maintenance had started, from the status it wrote last (after a restart)."""
    nodes = status.get("nodes") if isinstance(status, dict) else None
    if not isinstance(nodes, dict):
        return Working(uid)
    phases = {
        name: (entry or {}).get("phase") for name, entry in nodes.items() if isinstance(entry, dict | None)
    }
    return Working(
        uid,
        frozenset(n for n, p in phases.items() if p in CORDON_STARTED),
        frozenset(n for n, p in phases.items() if p in DRAIN_STARTED),
    )
