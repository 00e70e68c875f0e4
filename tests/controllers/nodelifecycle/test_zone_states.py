"""Zone states from two health passes, ported from KCM's `node_lifecycle_controller_test.go`
(TestMonitorNodeHealth, Test_isNodeExcludedFromDisruptionChecks), with `ComputeZoneState` and
`handleDisruption` details.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY

from controllers.nodelifecycle.zones import (
    EXCLUDE_DISRUPTION_LABEL,
    ZoneState,
    compute_zone_state,
    excluded_from_disruption,
    zone_rate,
)
from tests.controllers.nodelifecycle.kcm_fakes import (
    FakeNodeHandler,
    Harness,
    date,
    node,
    ready,
    zone_id,
    zone_labels,
)

Obj = dict[str, Any]

FAKE_NOW = date(2015, 1, 1, 12)
TIME_TO_PASS = timedelta(minutes=60)
HEALTHY_NEW = {"conditions": [ready("True", FAKE_NOW + TIME_TO_PASS, FAKE_NOW)]}
UNHEALTHY_NEW = {"conditions": [ready("Unknown", FAKE_NOW, FAKE_NOW)]}  # posted by the controller long ago

NORMAL, FULL, PARTIAL = ZoneState.NORMAL, ZoneState.FULL_DISRUPTION, ZoneState.PARTIAL_DISRUPTION
Z1, Z2, R2Z2 = zone_id("region1", "zone1"), zone_id("region1", "zone2"), zone_id("region2", "zone2")


def zoned(name: str, region: str, zone: str, status: str | None, *, excluded: bool = False) -> Obj:
    conditions = [] if status is None else [ready(status, FAKE_NOW, FAKE_NOW)]
    return node(
        name, created=FAKE_NOW, labels=zone_labels(region, zone), conditions=conditions, excluded=excluded
    )


@dataclass
class Case:
    desc: str
    nodes: list[Obj]
    updated: list[Obj]
    initial: dict[str, ZoneState]
    following: dict[str, ZoneState]


CASES = [
    Case(
        "No Disruption: node created recently without failure domain labels",
        [node("node0", created=FAKE_NOW, conditions=[ready("True", FAKE_NOW, FAKE_NOW)])],
        [HEALTHY_NEW],
        {"": NORMAL},
        {"": NORMAL},
    ),
    Case(
        "No Disruption: initially both zones down, one comes back",
        [zoned("node0", "region1", "zone1", "Unknown"), zoned("node1", "region1", "zone2", "Unknown")],
        [UNHEALTHY_NEW, HEALTHY_NEW],
        {Z1: FULL, Z2: FULL},
        {Z1: FULL, Z2: NORMAL},
    ),
    Case(
        "Partial Disruption: nodes created recently without status conditions",
        [zoned(f"node{i}", "region1", "zone1", None) for i in range(4)],
        [UNHEALTHY_NEW, UNHEALTHY_NEW, UNHEALTHY_NEW, HEALTHY_NEW],
        {Z1: FULL},  # no status received yet: the zone counts as fully disrupted
        {Z1: PARTIAL},
    ),
    Case(
        "Partial Disruption: one node failed, pushing the unhealthy share past the threshold",
        [
            zoned("node0", "region1", "zone1", "Unknown"),
            zoned("node1", "region1", "zone1", "Unknown"),
            zoned("node2", "region1", "zone1", "True"),
            zoned("node3", "region1", "zone1", "True"),
            zoned("node4", "region1", "zone1", "True"),
        ],
        [UNHEALTHY_NEW, UNHEALTHY_NEW, UNHEALTHY_NEW, HEALTHY_NEW, HEALTHY_NEW],
        {Z1: NORMAL},
        {Z1: PARTIAL},
    ),
    Case(
        "Full Disruption: at most 2 nodes down (normal), then the last healthy node failed",
        [
            zoned("node0", "region1", "zone1", "Unknown"),
            zoned("node1", "region1", "zone1", "Unknown"),
            zoned("node2", "region1", "zone1", "True"),
        ],
        [UNHEALTHY_NEW, UNHEALTHY_NEW, UNHEALTHY_NEW],
        {Z1: NORMAL},
        {Z1: FULL},
    ),
    Case(
        "Full Disruption: all the nodes in one zone are down",
        [zoned("node0", "region1", "zone1", "Unknown"), zoned("node1", "region1", "zone2", "True")],
        [UNHEALTHY_NEW, HEALTHY_NEW],
        {Z1: FULL, Z2: NORMAL},
        {Z1: FULL, Z2: NORMAL},
    ),
    Case(
        "Full Disruption: all the nodes in both zones are down",
        [zoned("node0", "region1", "zone1", "Unknown"), zoned("node1", "region2", "zone2", "Unknown")],
        [UNHEALTHY_NEW, UNHEALTHY_NEW],
        {Z1: FULL, R2Z2: FULL},
        {Z1: FULL, R2Z2: FULL},
    ),
    Case(
        "Full Disruption: Ready condition removed from the node",
        [zoned("node0", "region1", "zone1", "True")],
        [{"conditions": []}],
        {Z1: NORMAL},
        {Z1: FULL},
    ),
    Case(
        "Full Disruption: the only available node has the exclude-disruption label",
        [
            zoned("node0", "region1", "zone1", "Unknown"),
            zoned("node-master", "region1", "zone1", "True", excluded=True),
        ],
        [UNHEALTHY_NEW, HEALTHY_NEW],
        {Z1: FULL},
        {Z1: FULL},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.desc)
async def test_monitor_node_health_zone_states(case: Case) -> None:  # TestMonitorNodeHealth
    handler = FakeNodeHandler(case.nodes)
    h = Harness(handler, now=FAKE_NOW)
    h.sync_node_store()
    await h.monitor_node_health()
    assert h.controller.health_sync.zone_states == case.initial

    h.advance(TIME_TO_PASS)
    for n, status in zip(handler.existing, case.updated, strict=False):
        handler.set_status(n["metadata"]["name"], status)
    h.sync_node_store()
    await h.monitor_node_health()
    assert h.controller.health_sync.zone_states == case.following


@pytest.mark.parametrize(
    ("statuses", "unhealthy", "state"),
    [
        ([], 0, NORMAL),
        (["True", "True"], 0, NORMAL),
        ([None], 1, FULL),  # no Ready condition counts as not ready
        (["False", "Unknown"], 2, FULL),
        (["True", "False", "False"], 2, NORMAL),  # at most 2 down: normal whatever the share
        (["True", "False", "Unknown", None], 3, PARTIAL),  # 0.75 >= 0.55
        (["True"] * 9 + ["False"] * 11, 11, PARTIAL),  # exactly 0.55
        (["True"] * 10 + ["False"] * 10, 10, NORMAL),  # 0.5
    ],
)
def test_compute_zone_state(statuses: list[str | None], unhealthy: int, state: ZoneState) -> None:
    assert compute_zone_state(statuses, 0.55) == (unhealthy, state)


def test_the_threshold_is_compared_in_float32() -> None:
    """Go holds the threshold and the ratio as float32: 4 of 7 (0.5714285...) meets a threshold
    of 0.57142858 only once both are rounded to float32."""
    statuses = ["True"] * 3 + ["False"] * 4
    assert compute_zone_state(statuses, 0.57142858)[1] is PARTIAL
    assert compute_zone_state(statuses, 0.5714287)[1] is NORMAL


@pytest.mark.parametrize(
    ("labels", "excluded"),
    [({}, False), (None, False), ({EXCLUDE_DISRUPTION_LABEL: ""}, True)],
)
def test_is_node_excluded_from_disruption_checks(labels: dict[str, str] | None, excluded: bool) -> None:
    meta: Obj = {"name": "master-abc"}
    if labels is not None:
        meta["labels"] = labels
    assert (
        excluded_from_disruption({"metadata": meta, "status": {"conditions": [{"type": "Test"}]}}) is excluded
    )


@pytest.mark.parametrize(
    ("state", "size", "rate"),
    [
        (NORMAL, 5, 0.1),  # the normal rate
        (FULL, 5, 0.1),  # HealthyQPSFunc: the normal rate again
        (PARTIAL, 21, 0.01),  # ReducedQPSFunc in a zone larger than the threshold
        (PARTIAL, 20, 0.0),  # and in one that is not: stop
    ],
)
def test_zone_rate(state: ZoneState, size: int, rate: float) -> None:  # setLimiterInZone
    assert zone_rate(state, size, eviction_rate=0.1, secondary_rate=0.01, large_cluster_threshold=20) == rate


def _gauge(metric: str, zone: str) -> float | None:
    return REGISTRY.get_sample_value(metric, {"zone": zone})


async def test_a_zone_that_empties_keeps_empty_metrics_and_starts_over_when_it_fills() -> None:
    """`handleDisruption`: a zone without counted nodes loses its state (its series read as an
    empty zone), and starts Initial again when a node is counted there."""
    region, zone = "region-metrics", "zone-metrics"
    zid = zone_id(region, zone)
    beat = date(2017, 1, 1, 12)
    handler = FakeNodeHandler(
        [
            node("a", created=beat, labels=zone_labels(region, zone), conditions=[ready("True", beat, beat)]),
            node("b", created=beat, conditions=[ready("True", beat, beat)]),
        ]
    )
    h = Harness(handler, now=beat)
    h.sync_node_store()
    await h.monitor_node_health()
    assert h.controller.health_sync.zone_states[zid] is NORMAL
    assert _gauge("node_collector_zone_size", zid) == 1

    excluded = node(
        "a",
        created=beat,
        labels=zone_labels(region, zone),
        conditions=[ready("True", beat, beat)],
        excluded=True,
    )
    handler.update(excluded)
    h.sync_node_store()
    await h.monitor_node_health()
    assert zid not in h.controller.health_sync.zone_states
    assert _gauge("node_collector_zone_size", zid) == 0
    assert _gauge("node_collector_zone_health", zid) == 100
    assert _gauge("node_collector_unhealthy_nodes_in_zone", zid) == 0

    handler.update(
        node("a", created=beat, labels=zone_labels(region, zone), conditions=[ready("True", beat, beat)])
    )
    h.sync_node_store()
    await h.monitor_node_health()
    assert h.controller.health_sync.zone_states[zid] is NORMAL
    assert h.controller.state.tainters[zid].limiter.qps == h.controller.health_sync.eviction_rate
