"""The node queue's pass: NoSchedule taints by condition and the beta OS/arch labels, ported from
KCM's `node_lifecycle_controller_test.go` (TestTaintsNodeByCondition, TestReconcileNodeLabels).
"""

from __future__ import annotations

from typing import Any

import pytest

from controllers.nodelifecycle.labels import labels_to_reconcile
from tests.controllers.nodelifecycle.kcm_fakes import (
    FakeNodeHandler,
    Harness,
    condition,
    date,
    node,
    ready,
    taints,
    zone_labels,
)

FAKE_NOW = date(2017, 1, 1, 12)
CREATED = date(2012, 1, 1)
BEAT = date(2015, 1, 1, 12)


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        (
            [ready("True", BEAT, BEAT), condition("NetworkUnavailable", "True", BEAT, BEAT)],
            [("node.kubernetes.io/network-unavailable", "NoSchedule")],
        ),
        ([ready("False", BEAT, BEAT)], [("node.kubernetes.io/not-ready", "NoSchedule")]),
        ([ready("Unknown", BEAT, BEAT)], [("node.kubernetes.io/unreachable", "NoSchedule")]),
    ],
    ids=["NetworkUnavailable is true", "Ready is false", "Ready is unknown"],
)
async def test_taints_node_by_condition(
    conditions: list[dict[str, Any]], expected: list[tuple[str, str]]
) -> None:  # TestTaintsNodeByCondition
    labels = zone_labels("region1", "zone1")
    handler = FakeNodeHandler(
        [node("node0", created=CREATED, labels=labels, conditions=[ready("True", BEAT, BEAT)])]
    )
    h = Harness(handler, now=FAKE_NOW)
    handler.update(node("node0", created=CREATED, labels=labels, conditions=conditions))
    h.sync_node_store()
    await h.node_queue_pass("node0")
    h.sync_node_store()
    cached = h.controller.node_lister.get("node0")
    assert cached is not None
    assert sorted(taints(cached)) == sorted(expected)


OS, ARCH = "kubernetes.io/os", "kubernetes.io/arch"
BETA_OS, BETA_ARCH = "beta.kubernetes.io/os", "beta.kubernetes.io/arch"


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (None, None),
        ({"topology.kubernetes.io/region": "region1"}, {"topology.kubernetes.io/region": "region1"}),
        (
            {OS: "linux", ARCH: "amd64"},
            {BETA_OS: "linux", BETA_ARCH: "amd64", OS: "linux", ARCH: "amd64"},
        ),
        (
            {BETA_OS: "windows", BETA_ARCH: "arm", OS: "linux", ARCH: "amd64"},
            {BETA_OS: "linux", BETA_ARCH: "amd64", OS: "linux", ARCH: "amd64"},
        ),
    ],
    ids=[
        "no-op if node has no labels",
        "no-op if no target labels present",
        "create OS/arch beta labels when they don't exist",
        "reconcile OS/arch beta labels to match stable labels",
    ],
)
async def test_reconcile_node_labels(
    labels: dict[str, str] | None, expected: dict[str, str] | None
) -> None:  # TestReconcileNodeLabels
    handler = FakeNodeHandler([node("node0", created=CREATED, labels=zone_labels("region1", "zone1"))])
    h = Harness(handler, now=FAKE_NOW)
    handler.update(node("node0", created=CREATED, labels=labels))
    h.sync_node_store()
    await h.controller.no_schedule_sync.reconcile_node_labels("node0")
    h.sync_node_store()
    cached = h.controller.node_lister.get("node0")
    assert cached is not None
    assert cached["metadata"].get("labels") == expected


def test_labels_to_reconcile_leaves_a_beta_label_without_its_stable_one() -> None:
    assert labels_to_reconcile({BETA_OS: "windows"}) == {}
    assert labels_to_reconcile({}) == {}
    assert labels_to_reconcile({OS: "linux", BETA_OS: "linux"}) == {}
