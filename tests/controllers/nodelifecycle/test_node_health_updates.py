"""Which nodes the health pass marks Unknown, and how, ported from KCM's
`node_lifecycle_controller_test.go` (TestMonitorNodeHealthUpdateStatus,
TestMonitorNodeHealthUpdateNodeAndPodStatusWithLease, TestTryUpdateNodeHealth).

Go counts the requests to its fake (List, Update); the controller here lists from its cache, so
the ports check the status writes themselves and the pod status writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from apiclient import ApiError
from controllers.nodelifecycle.health import NodeHealth
from kubeutil.conditions import get_condition
from tests.controllers.nodelifecycle.kcm_fakes import (
    FakeNodeHandler,
    Harness,
    condition,
    date,
    lease,
    new_pod,
    node,
    ready,
    stamp,
)

Obj = dict[str, Any]

FAKE_NOW = date(2015, 1, 1, 12)
CREATED_LONG_AGO = date(2012, 1, 1)
HOUR = timedelta(hours=1)


def never_updated(kind: str, created: datetime, transition: datetime) -> Obj:
    return {
        "type": kind,
        "status": "Unknown",
        "reason": "NodeStatusNeverUpdated",
        "message": "Kubelet never posted node status.",
        "lastHeartbeatTime": stamp(created),
        "lastTransitionTime": stamp(transition),
    }


def never_updated_all(created: datetime, transition: datetime) -> list[Obj]:
    return [
        never_updated(k, created, transition)
        for k in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
    ]


def stopped_posting(heartbeat: datetime, transition: datetime) -> Obj:
    return {
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": stamp(heartbeat),
        "lastTransitionTime": stamp(transition),
    }


@dataclass
class Case:
    desc: str
    node: Obj
    lease: Obj | None = None
    time_to_pass: timedelta = timedelta(0)
    new_conditions: list[Obj] | None = None
    new_lease: Obj | None = None
    expected_conditions: list[Obj] | None = None  # the node's conditions after its one status write
    expected_pod_status_update: bool = False


async def run(case: Case) -> FakeNodeHandler:
    handler = FakeNodeHandler([case.node], [new_pod("pod0", "node0")])
    h = Harness(handler, now=FAKE_NOW)
    h.sync_node_store()
    if case.lease is not None:
        h.sync_lease_store(case.lease)
    await h.monitor_node_health()
    if case.time_to_pass:
        h.advance(case.time_to_pass)
        handler.set_status("node0", {"conditions": case.new_conditions or []})
        h.sync_node_store()
        if case.new_lease is not None:
            h.sync_lease_store(case.new_lease)
        await h.monitor_node_health()
    return handler


def check(case: Case, handler: FakeNodeHandler) -> None:
    if case.expected_conditions is None:
        assert handler.node_status_updates == []
    else:
        assert len(handler.node_status_updates) == 1
        assert handler.node_status_updates[0]["status"]["conditions"] == case.expected_conditions
    assert bool(handler.pod_status_updates) is case.expected_pod_status_update


UPDATE_STATUS_CASES = [
    Case(
        "node created long ago without status: Unknown posted by the controller",
        node("node0", created=CREATED_LONG_AGO),
        expected_conditions=never_updated_all(CREATED_LONG_AGO, FAKE_NOW),
        expected_pod_status_update=False,  # the node was never Ready
    ),
    Case(
        "node created recently without status: nothing within the startup grace period",
        node("node0", created=FAKE_NOW),
    ),
    Case(
        "node created long ago, status older than the grace period: Unknown posted",
        node("node0", created=CREATED_LONG_AGO, conditions=[ready("True", FAKE_NOW, FAKE_NOW)]),
        time_to_pass=HOUR,
        new_conditions=[ready("True", FAKE_NOW, FAKE_NOW)],
        expected_conditions=[
            stopped_posting(FAKE_NOW, FAKE_NOW + HOUR),
            never_updated("MemoryPressure", CREATED_LONG_AGO, FAKE_NOW + HOUR),
            never_updated("DiskPressure", CREATED_LONG_AGO, FAKE_NOW + HOUR),
            never_updated("PIDPressure", CREATED_LONG_AGO, FAKE_NOW + HOUR),
        ],
        expected_pod_status_update=True,
    ),
    Case(
        "node created long ago, status updated recently: nothing within the grace period",
        node("node0", created=CREATED_LONG_AGO, conditions=[ready("True", FAKE_NOW, FAKE_NOW)]),
    ),
]


@pytest.mark.parametrize("case", UPDATE_STATUS_CASES, ids=lambda c: c.desc)
async def test_monitor_node_health_update_status(case: Case) -> None:  # TestMonitorNodeHealthUpdateStatus
    check(case, await run(case))


HEALTHY_WITH_DISK = [
    ready("True", FAKE_NOW, FAKE_NOW),
    condition("DiskPressure", "False", FAKE_NOW, FAKE_NOW),
]

LEASE_CASES = [
    Case(
        "node created recently, without status, no lease",
        node("node0", created=FAKE_NOW),
    ),
    Case(
        "node created recently, without status, lease renewed recently",
        node("node0", created=FAKE_NOW),
        lease=lease("node0", FAKE_NOW),
    ),
    Case(
        "node created long ago, without status, no lease",
        node("node0", created=CREATED_LONG_AGO),
        expected_conditions=never_updated_all(CREATED_LONG_AGO, FAKE_NOW),
    ),
    Case(
        "node created long ago, without status, lease renewed recently",
        node("node0", created=CREATED_LONG_AGO),
        lease=lease("node0", FAKE_NOW),
        time_to_pass=HOUR,
        new_lease=lease("node0", FAKE_NOW + HOUR),
    ),
    Case(
        "node created long ago, without status, lease expired",
        node("node0", created=CREATED_LONG_AGO),
        lease=lease("node0", FAKE_NOW),
        time_to_pass=HOUR,
        new_lease=lease("node0", FAKE_NOW),  # not renewed for an hour
        expected_conditions=never_updated_all(CREATED_LONG_AGO, FAKE_NOW + HOUR),
    ),
    Case(
        "status older than the grace period, lease renewed",
        node("node0", created=CREATED_LONG_AGO, conditions=HEALTHY_WITH_DISK),
        lease=lease("node0", FAKE_NOW),
        time_to_pass=HOUR,
        new_conditions=HEALTHY_WITH_DISK,
        new_lease=lease("node0", FAKE_NOW + HOUR),
    ),
    Case(
        "status updated recently, lease expired",
        node("node0", created=CREATED_LONG_AGO, conditions=HEALTHY_WITH_DISK),
        lease=lease("node0", FAKE_NOW),
        time_to_pass=HOUR,
        new_conditions=[
            ready("True", FAKE_NOW + HOUR, FAKE_NOW),
            condition("DiskPressure", "False", FAKE_NOW + HOUR, FAKE_NOW),
        ],
        new_lease=lease("node0", FAKE_NOW),
    ),
    Case(
        "status older than the grace period, lease expired too",
        node("node0", created=CREATED_LONG_AGO, conditions=[ready("True", FAKE_NOW, FAKE_NOW)]),
        lease=lease("node0", FAKE_NOW),
        time_to_pass=HOUR,
        new_conditions=[ready("True", FAKE_NOW, FAKE_NOW)],
        new_lease=lease("node0", FAKE_NOW),
        expected_conditions=[
            stopped_posting(FAKE_NOW, FAKE_NOW + HOUR),
            never_updated("MemoryPressure", CREATED_LONG_AGO, FAKE_NOW + HOUR),
            never_updated("DiskPressure", CREATED_LONG_AGO, FAKE_NOW + HOUR),
            never_updated("PIDPressure", CREATED_LONG_AGO, FAKE_NOW + HOUR),
        ],
        expected_pod_status_update=True,
    ),
]


@pytest.mark.parametrize("case", LEASE_CASES, ids=lambda c: c.desc)
async def test_monitor_node_health_with_lease(case: Case) -> None:  # ...UpdateNodeAndPodStatusWithLease
    check(case, await run(case))


FAKE_NEW = date(2017, 1, 1, 12)
FAKE_OLD = date(2016, 1, 1, 12)


@pytest.mark.parametrize(
    ("created", "status"),
    [
        (created, status)
        for created in (FAKE_NEW, FAKE_OLD)  # the second half: after the grace period
        for status in ("True", "False", "Unknown", None)
    ],
)
async def test_try_update_node_health(
    created: datetime, status: str | None
) -> None:  # TestTryUpdateNodeHealth
    """The Ready condition returned as current is the one saved in the node's health."""
    conditions = [] if status is None else [ready(status, created, created)]
    subject = node("node0", created=created, conditions=conditions)
    handler = FakeNodeHandler([subject], [new_pod("pod0", "node0")])
    h = Harness(handler, now=FAKE_NEW)
    sync = h.controller.health_sync
    h.controller.state.health["node0"] = NodeHealth(
        ready=get_condition(subject["status"], "Ready"),
        probe=created.timestamp(),
        ready_transition=created.timestamp(),
    )
    with h.wall_clock():
        _, current, _ = await sync.update_node_health(subject)
    saved = h.controller.state.health["node0"].ready
    assert current == (None if saved is None else saved.get("status"))


@pytest.mark.looptime
@pytest.mark.parametrize(("failures", "written"), [(1, True), (4, True), (5, False)])
async def test_a_failed_status_write_is_retried_on_a_fresh_read(failures: int, written: bool) -> None:
    """monitorNodeHealth's `wait.PollImmediate` around tryUpdateNodeHealth: five tries in all, each
    retry on the node read again; a node still failing is skipped (not counted in its zone)."""
    handler = FakeNodeHandler([node("node0", created=CREATED_LONG_AGO)])
    handler.node_status_failures = [ApiError(500, {"message": "fake error"}) for _ in range(failures)]
    h = Harness(handler, now=FAKE_NOW)
    h.sync_node_store()
    await h.monitor_node_health()
    assert len(handler.node_status_updates) == int(written)
    assert handler.node_gets == min(failures, 4)
    assert ("" in h.controller.health_sync.zone_states) is written
