"""Pods of a node that goes silent are marked not ready, ported from KCM's
`node_lifecycle_controller_test.go` (TestMonitorNodeHealthMarkPodsNotReady, ...WithWorkerSize,
...Retry, TestProcessPodMarkPodNotReady).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from apiclient import ApiError
from tests.controllers.nodelifecycle.kcm_fakes import FakeNodeHandler, Harness, date, new_pod, node, ready

FAKE_NOW = date(2015, 1, 1, 12)
CREATED_LONG_AGO = date(2012, 1, 1)
MINUTE = timedelta(minutes=1)


@pytest.mark.parametrize(
    ("subject", "time_to_pass", "expected_pod_status_update"),
    [
        # created recently, without status: nothing within the startup grace period
        (node("node0", created=FAKE_NOW), timedelta(0), False),
        # status updated recently: nothing within the monitor grace period
        (
            node("node0", created=CREATED_LONG_AGO, conditions=[ready("True", FAKE_NOW, FAKE_NOW)]),
            timedelta(0),
            False,
        ),
        # status older than the grace period a minute later: pods marked, node Unknown
        (
            node("node0", created=CREATED_LONG_AGO, conditions=[ready("True", FAKE_NOW, FAKE_NOW)]),
            MINUTE,
            True,
        ),
    ],
)
async def test_monitor_node_health_mark_pods_not_ready(
    subject: dict[str, object], time_to_pass: timedelta, expected_pod_status_update: bool
) -> None:  # TestMonitorNodeHealthMarkPodsNotReady
    handler = FakeNodeHandler([subject], [new_pod("pod0", "node0")])
    h = Harness(handler, now=FAKE_NOW)
    h.sync_node_store()
    await h.monitor_node_health()
    if time_to_pass:
        h.advance(time_to_pass)
        h.sync_node_store()  # the status is unchanged: no new heartbeat
        await h.monitor_node_health()
    assert bool(handler.pod_status_updates) is expected_pod_status_update


async def test_monitor_node_health_mark_pods_not_ready_many_nodes() -> None:  # ...WithWorkerSize
    nodes, per_node = 50, 100
    handler = FakeNodeHandler(
        [
            node(f"node{i}", created=CREATED_LONG_AGO, conditions=[ready("True", FAKE_NOW, FAKE_NOW)])
            for i in range(nodes)
        ],
        [new_pod(f"pod{i}", f"node{i % nodes}") for i in range(nodes * per_node)],
    )
    h = Harness(handler, now=FAKE_NOW)
    h.sync_node_store()
    await h.monitor_node_health()
    h.advance(MINUTE)
    h.sync_node_store()
    await h.monitor_node_health()
    assert len(handler.pod_status_updates) == nodes * per_node


@pytest.mark.parametrize(
    ("failures", "expected_pod_status_updates"),
    [
        ([], 1),  # marked once; no retry needed
        ([ApiError(500, {"message": "fake error"})], 2),  # one failed and one retry
    ],
    ids=["successful pod status update, no retry", "unsuccessful pod status update, retried"],
)
async def test_monitor_node_health_mark_pods_not_ready_retry(
    failures: list[Exception], expected_pod_status_updates: int
) -> None:  # TestMonitorNodeHealthMarkPodsNotReadyRetry
    time_now = FAKE_NOW
    time_plus_two_seconds = date(2015, 1, 1, 12, 0, 2)

    def nodes(status: str, heartbeat: datetime, transition: datetime) -> list[dict[str, Any]]:
        return [node("node0", created=time_now, conditions=[ready(status, heartbeat, transition)])]

    handler = FakeNodeHandler([], [new_pod("pod0", "node0")])
    handler.pod_status_failures = list(failures)
    h = Harness(handler, now=time_now)
    iterations = [
        (timedelta(0), nodes("True", time_now, time_now)),
        (MINUTE, nodes("True", time_now, time_now)),
        (MINUTE, nodes("False", time_plus_two_seconds, time_plus_two_seconds)),
    ]
    for time_to_pass, new_nodes in iterations:
        h.now = time_now + time_to_pass
        handler.existing = new_nodes
        h.sync_node_store()
        await h.monitor_node_health()
    assert len(handler.pod_status_updates) == expected_pod_status_updates


@pytest.mark.parametrize(
    ("status", "monitor_first", "expected_pod_status_update"),
    [
        ("False", False, False),  # the node's health is not gathered yet
        ("True", True, False),  # the node is Ready
        ("False", True, True),  # the node is not Ready
    ],
)
async def test_process_pod_mark_pod_not_ready(
    status: str, monitor_first: bool, expected_pod_status_update: bool
) -> None:  # TestProcessPodMarkPodNotReady
    handler = FakeNodeHandler(
        [node("node0", created=FAKE_NOW, conditions=[ready(status, FAKE_NOW, FAKE_NOW)])]
    )
    h = Harness(handler, now=FAKE_NOW)
    h.sync_node_store()
    if monitor_first:
        await h.monitor_node_health()
    pod = new_pod("pod0", "node0")
    handler.pods = [pod]
    h.sync_pod_store()
    h.controller._pod_added(pod)  # podUpdated(nil, pod)
    assert len(h.controller.pod_queue) == 1
    await h.process_pod("default/pod0")
    assert bool(handler.pod_status_updates) is expected_pod_status_update


def test_only_a_pod_newly_bound_to_a_node_is_queued() -> None:  # podUpdated
    h = Harness(FakeNodeHandler([]), now=FAKE_NOW)
    unbound = {**new_pod("pod0", "node0"), "spec": {}}
    bound = new_pod("pod0", "node0")
    h.controller._pod_added(unbound)
    h.controller._pod_updated(bound, bound)  # a status change, say: the node is the same
    assert len(h.controller.pod_queue) == 0
    h.controller._pod_updated(unbound, bound)  # scheduled
    assert len(h.controller.pod_queue) == 1
    h.controller.pod_queue.shutdown()
