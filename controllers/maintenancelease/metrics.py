"""Lease metrics: leases held and abandoned by holder prefix, leases still to make, creates made.

Computed when Prometheus scrapes:

- `aiokcm_maintenance_leases_held{holder_prefix}`: leases someone holds right now (unexpired, or an
  administrator's `kubeadm...` claim);
- `aiokcm_maintenance_leases_abandoned{holder_prefix}`: leases whose holder is still set but whose
  claim expired (renewTime + duration + 3 s passed): a holder that crashed or forgot to release;
- `aiokcm_maintenance_leases_missing`: nodes whose lease the controller has still to create (the
  paced backlog: 5,000 on a first start over 5,000 nodes, going down by `CREATES_PER_SECOND`).

Counted as they happen:

- `aiokcm_maintenance_lease_creates_total{result}`: the controller's creates of missing leases,
  `created`, or `already_exists` (a holder's `acquire` made it first: a success too).

Why at scrape time and not on each sync: a lease becomes abandoned by time passing, with no event
to trigger a sync. Counting the lister's cached leases is cheap (one Lease per node). The collector
is registered once per process and reads the most recently started lease controller, held weakly
so a finished controller (in tests, a stopped manager) is not kept alive by the registry.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kubeutil.timestamps import utcnow
from nodemaintenancelease.lease import LeaseState, holder_prefix

HELD = "aiokcm_maintenance_leases_held"
ABANDONED = "aiokcm_maintenance_leases_abandoned"
MISSING = "aiokcm_maintenance_leases_missing"
CREATES_TOTAL = "aiokcm_maintenance_lease_creates_total"

CREATES = Counter(
    CREATES_TOTAL,
    "Creates of missing node maintenance leases, by result (already_exists: a holder made it first)",
    ["result"],
)


def count_leases(leases: Iterable[Mapping[str, Any]], now: datetime) -> tuple[dict[str, int], dict[str, int]]:
    """(held, abandoned) counts by holder prefix."""
    held: dict[str, int] = {}
    abandoned: dict[str, int] = {}
    for obj in leases:
        # Most leases are free (one per node, held only during maintenance): a scrape at 20,000
        # nodes skips them without parsing their times.
        if not (obj.get("spec") or {}).get("holderIdentity"):
            continue
        state = LeaseState.from_obj(obj)
        if state.holder is None:
            continue
        prefix = holder_prefix(state.holder)
        if state.held(now):
            held[prefix] = held.get(prefix, 0) + 1
        elif state.abandoned(now):
            abandoned[prefix] = abandoned.get(prefix, 0) + 1
    return held, abandoned


class LeaseCollector(Collector):
    def __init__(self) -> None:
        self._source: weakref.ref[Any] | None = None
        self._list: Callable[[Any], list[dict[str, Any]]] | None = None
        self._missing: Callable[[Any], int] | None = None
        self.clock: Callable[[], datetime] = utcnow

    def watch(
        self,
        owner: Any,
        list_leases: Callable[[Any], list[dict[str, Any]]],
        missing: Callable[[Any], int] | None = None,
    ) -> None:
        """Count the leases `list_leases(owner)` returns, and the `missing(owner)` still to make,
        from now on (owner held weakly)."""
        self._source = weakref.ref(owner)
        self._list = list_leases
        self._missing = missing

    def collect(self) -> Iterator[Metric]:
        held_family = GaugeMetricFamily(HELD, "Node maintenance leases held now", labels=["holder_prefix"])
        abandoned_family = GaugeMetricFamily(
            ABANDONED, "Node maintenance leases expired but still naming a holder", labels=["holder_prefix"]
        )
        missing_family = GaugeMetricFamily(
            MISSING, "Nodes whose maintenance lease the controller has still to create"
        )
        owner = self._source() if self._source is not None else None
        if owner is not None and self._list is not None:
            held, abandoned = count_leases(self._list(owner), self.clock())
            for prefix, count in sorted(held.items()):
                held_family.add_metric([prefix], count)
            for prefix, count in sorted(abandoned.items()):
                abandoned_family.add_metric([prefix], count)
        if owner is not None and self._missing is not None:
            missing_family.add_metric([], self._missing(owner))
        yield held_family
        yield abandoned_family
        yield missing_family


COLLECTOR = LeaseCollector()
REGISTRY.register(COLLECTOR)
