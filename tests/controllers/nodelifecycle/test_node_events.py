"""Events about nodes, ported from KCM's `node_lifecycle_controller_test.go` (TestNodeEventGeneration)."""

from __future__ import annotations

from datetime import timedelta

from tests.controllers.nodelifecycle.kcm_fakes import FakeNodeHandler, Harness, date, new_pod, node, ready


async def test_node_event_generation() -> None:  # TestNodeEventGeneration
    fake_now = date(2016, 9, 10, 12)
    beat = date(2015, 8, 10)
    handler = FakeNodeHandler(
        [node("node0", created=beat, uid="1234567890", conditions=[ready("Unknown", beat, beat)])],
        [new_pod("pod0", "node0")],
    )
    h = Harness(handler, now=fake_now)
    h.sync_node_store()
    await h.monitor_node_health()
    assert h.reasons() == ["RegisteredNode"]
    for involved, _, _, _ in h.events:
        assert involved["metadata"]["uid"] == "1234567890"
        assert involved["kind"] == "Node"
    assert h.events[0][3] == "Node node0 event: Registered Node node0 in Controller"


async def test_a_node_gone_from_the_cache_is_removed_with_an_event() -> None:  # classifyNodes' deleted
    fake_now = date(2017, 1, 1, 12)
    handler = FakeNodeHandler(
        [
            node("node0", created=fake_now, uid="u0", conditions=[ready("True", fake_now, fake_now)]),
            node("node1", created=fake_now, uid="u1", conditions=[ready("True", fake_now, fake_now)]),
        ]
    )
    h = Harness(handler, now=fake_now)
    h.sync_node_store()
    await h.monitor_node_health()
    handler.existing = handler.existing[1:]
    h.advance(timedelta(seconds=5))
    h.sync_node_store()
    await h.monitor_node_health()
    assert h.reasons() == ["RegisteredNode", "RegisteredNode", "RemovingNode"]
    removed, type_, _, message = h.events[-1]
    assert (removed["metadata"]["name"], removed["metadata"]["uid"], type_) == ("node0", "u0", "Normal")
    assert message == "Node node0 event: Removing Node node0 from Controller"
    assert "node0" not in h.controller.health_sync.known_nodes


async def test_a_node_that_goes_silent_gets_a_node_not_ready_event() -> None:  # RecordNodeStatusChange
    fake_now = date(2017, 1, 1, 12)
    handler = FakeNodeHandler(
        [node("node0", created=date(2012, 1, 1), uid="u0", conditions=[ready("True", fake_now, fake_now)])]
    )
    h = Harness(handler, now=fake_now)
    h.sync_node_store()
    await h.monitor_node_health()
    h.advance(timedelta(minutes=1))
    await h.monitor_node_health()
    assert h.reasons() == ["RegisteredNode", "NodeNotReady"]
    involved, type_, _, message = h.events[-1]
    assert (involved["kind"], involved["metadata"]["uid"], type_) == ("Node", "u0", "Normal")
    assert message == "Node node0 status is now: NodeNotReady"
