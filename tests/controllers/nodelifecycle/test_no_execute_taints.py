"""NoExecute taints queued by the health pass and written by the tainting pass, ported from KCM's
`node_lifecycle_controller_test.go` (TestApplyNoExecuteTaints, ...ToUnreachableNode,
...ToNodesEnqueueTwice, TestSwapUnreachableNotReadyTaints).
"""

from __future__ import annotations

import copy
from datetime import timedelta

from tests.controllers.nodelifecycle.kcm_fakes import (
    NOT_READY_NO_EXECUTE,
    UNREACHABLE_NO_EXECUTE,
    FakeNodeHandler,
    Harness,
    condition,
    date,
    has_taint,
    new_pod,
    node,
    ready,
    zone_labels,
)

CREATED = date(2012, 1, 1)
ZONE1 = zone_labels("region1", "zone1")


def zone1_node(name: str, status: str, heartbeat_year: int) -> dict[str, object]:
    beat = date(heartbeat_year, 1, 1, 12)
    return node(name, created=CREATED, labels=ZONE1, conditions=[ready(status, beat, beat)])


async def test_apply_no_execute_taints() -> None:  # TestApplyNoExecuteTaints
    fake_now = date(2017, 1, 1, 12)
    handler = FakeNodeHandler(
        [
            zone1_node("node0", "Unknown", 2015),  # gets the unreachable taint
            zone1_node("node1", "True", 2017),  # a healthy node, so that not every node is down
            zone1_node("node2", "False", 2015),  # gets the not-ready taint
            zone1_node("node3", "True", 2016),  # its Ready condition goes away before the pass
        ],
        [new_pod("pod0", "node0")],
    )
    h = Harness(handler, now=fake_now)
    h.sync_node_store()
    await h.monitor_node_health()
    await h.no_execute_tainting_pass()
    assert has_taint(handler.node("node0"), UNREACHABLE_NO_EXECUTE)
    assert has_taint(handler.node("node2"), NOT_READY_NO_EXECUTE)

    # node2 healthy again: its taint goes
    handler.set_status(
        "node2", {"conditions": [ready("True", date(2017, 1, 1, 12, 10), date(2017, 1, 1, 12))]}
    )
    h.sync_node_store()
    await h.monitor_node_health()
    await h.no_execute_tainting_pass()
    assert handler.node("node2")["spec"]["taints"] == []

    # node3 not ready and queued, but its Ready condition is gone before the tainting pass
    handler.set_status(
        "node3", {"conditions": [ready("False", date(2017, 1, 1, 12, 10), date(2017, 1, 1, 12))]}
    )
    h.sync_node_store()
    await h.monitor_node_health()
    handler.set_status(
        "node3",
        {
            "conditions": [
                condition("MemoryPressure", "Unknown", date(2017, 1, 1, 12, 10), date(2017, 1, 1, 12))
            ]
        },
    )
    h.sync_node_store()
    await h.no_execute_tainting_pass()
    assert not handler.node("node3")["spec"].get("taints")


async def test_apply_no_execute_taints_to_unreachable_node() -> None:  # ...ToUnreachableNode
    time1 = date(2017, 1, 1, 12)
    time2 = time1 + timedelta(seconds=50 + 1)  # the grace period plus a second
    handler = FakeNodeHandler(
        [
            node("node0", created=CREATED, labels=ZONE1, conditions=[ready("True", time1, time1)]),
            node("node1", created=CREATED, labels=ZONE1, conditions=[ready("True", time1, time1)]),
        ],
        [new_pod("pod0", "node0")],
    )
    h = Harness(handler, now=time1)
    h.sync_node_store()
    await h.monitor_node_health()
    await h.no_execute_tainting_pass()
    assert not handler.node("node0")["spec"].get("taints")
    assert not handler.node("node1")["spec"].get("taints")

    # only node1 posts a heartbeat by time2: node0 goes Unknown and is tainted in the same pass
    h.now = time2
    handler.set_status("node1", {"conditions": [ready("True", time2, time1)]})
    h.sync_node_store()
    await h.monitor_node_health()
    h.sync_node_store()
    await h.no_execute_tainting_pass()
    assert has_taint(handler.node("node0"), UNREACHABLE_NO_EXECUTE)
    assert not handler.node("node1")["spec"].get("taints")

    # node0 posts a heartbeat: the taint goes
    handler.set_status("node0", {"conditions": [ready("True", time2, time2)]})
    h.sync_node_store()
    await h.monitor_node_health()
    await h.no_execute_tainting_pass()
    assert handler.node("node0")["spec"]["taints"] == []


async def test_apply_no_execute_taints_to_nodes_enqueued_twice() -> None:  # ...ToNodesEnqueueTwice
    fake_now = date(2017, 1, 1, 12)
    handler = FakeNodeHandler(
        [
            zone1_node("node0", "Unknown", 2015),
            zone1_node("node1", "True", 2017),
            zone1_node("node2", "False", 2015),
        ],
        [new_pod("pod0", "node0")],
    )
    h = Harness(handler, now=fake_now)
    h.sync_node_store()
    await h.monitor_node_health()  # 1. twice: the untainted nodes are queued once
    await h.monitor_node_health()

    # 2. node0 healthy; more nodes not ready
    handler.set_status(
        "node0", {"conditions": [ready("True", date(2017, 1, 1, 12, 10), date(2017, 1, 1, 12))]}
    )
    handler.existing += [
        zone1_node("node3", "Unknown", 2015),
        zone1_node("node4", "True", 2017),
        zone1_node("node5", "False", 2015),
    ]
    h.sync_node_store()
    await h.monitor_node_health()  # 3. the untainted nodes queued again

    # 4. node0 is Ready when its turn comes: done, and the pass goes on to the others
    await h.no_execute_tainting_pass()
    assert has_taint(handler.node("node3"), UNREACHABLE_NO_EXECUTE)
    assert has_taint(handler.node("node5"), NOT_READY_NO_EXECUTE)


async def test_swap_unreachable_not_ready_taints() -> None:  # TestSwapUnreachableNotReadyTaints
    fake_now = date(2017, 1, 1, 12)
    handler = FakeNodeHandler(
        [zone1_node("node0", "Unknown", 2015), zone1_node("node1", "True", 2017)],
        [new_pod("pod0", "node0")],
    )
    h = Harness(handler, now=fake_now)
    h.sync_node_store()
    await h.monitor_node_health()
    await h.no_execute_tainting_pass()
    assert has_taint(handler.node("node0"), UNREACHABLE_NO_EXECUTE)

    # node0 posts NotReady (for 10 minutes); node1 stays healthy
    handler.set_status(
        "node0", {"conditions": [ready("False", date(2017, 1, 1, 12, 9), date(2017, 1, 1, 12))]}
    )
    handler.set_status(
        "node1", {"conditions": [ready("True", date(2017, 1, 1, 12, 10), date(2017, 1, 1, 12))]}
    )
    h.sync_node_store()
    await h.monitor_node_health()
    await h.no_execute_tainting_pass()
    assert has_taint(handler.node("node0"), NOT_READY_NO_EXECUTE)
    assert not has_taint(handler.node("node0"), UNREACHABLE_NO_EXECUTE)


async def test_a_taint_taken_off_by_hand_comes_back() -> None:  # markNodeForTainting's Remove
    """A tainted node stays a member of its zone's queue; one found without its taint is queued again."""
    fake_now = date(2017, 1, 1, 12)
    handler = FakeNodeHandler([zone1_node("node0", "Unknown", 2015), zone1_node("node1", "True", 2017)])
    h = Harness(handler, now=fake_now)
    h.sync_node_store()
    await h.monitor_node_health()
    await h.no_execute_tainting_pass()
    assert has_taint(handler.node("node0"), UNREACHABLE_NO_EXECUTE)

    untainted = copy.deepcopy(handler.node("node0"))
    untainted["spec"]["taints"] = []
    handler.update(untainted)
    h.sync_node_store()
    await h.no_execute_tainting_pass()  # still a member: nothing queued
    assert handler.node("node0")["spec"]["taints"] == []
    await h.monitor_node_health()
    await h.no_execute_tainting_pass()
    assert has_taint(handler.node("node0"), UNREACHABLE_NO_EXECUTE)
