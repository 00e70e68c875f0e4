"""Zone rate limits on a virtual clock: the per-zone tainting queue and the zone state machine."""

from __future__ import annotations

from typing import Any, cast

import pytest

from apiclient import KubeClient
from controllers.context import ControllerContext
from controllers.nodelifecycle import NodeLifecycleController
from controllers.nodelifecycle.config import NodeLifecycleConfig
from controllers.nodelifecycle.ratelimited import RateLimitedTimedQueue, TimedValue
from controllers.nodelifecycle.zones import ZoneState, compute_zone_state, zone_key, zone_rate
from informers import SharedInformerFactory
from tests.controllers.harness import build


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def drain(
    q: RateLimitedTimedQueue, clock: Clock, *, seconds: float, step: float = 0.1
) -> list[tuple[float, str]]:
    """Run the 100 ms tainting pass for `seconds` of virtual time; (time, node) of each node handed out."""
    out: list[tuple[float, str]] = []

    def take(v: TimedValue) -> tuple[bool, float]:
        out.append((round(clock.t - 1000.0, 3), v.value))
        return True, 0.0

    for _ in range(int(seconds / step) + 1):
        q.try_(take)
        clock.t += step
    return out


def test_a_zone_hands_out_nodes_at_its_rate_with_burst_one() -> None:
    clock = Clock()
    q = RateLimitedTimedQueue(0.1, now=clock)
    for i in range(5):
        assert q.add(f"node-{i}")
    assert not q.add("node-0")  # unique by name
    handed = drain(q, clock, seconds=35)
    # one at once (the bucket starts full), then one per 10 s
    assert [n for _, n in handed] == ["node-0", "node-1", "node-2", "node-3"]
    assert [t for t, _ in handed] == pytest.approx([0.0, 10.0, 20.0, 30.0], abs=0.11)


def test_rate_zero_stops_and_a_drained_bucket_stays_drained_across_swaps() -> None:
    clock = Clock()
    q = RateLimitedTimedQueue(0.1, now=clock)
    q.add("a")
    q.add("b")
    assert [n for _, n in drain(q, clock, seconds=1)] == ["a"]
    q.swap_limiter(0.0)  # partial disruption of a small zone: stop
    assert drain(q, clock, seconds=60) == []
    resumed = clock.t - 1000.0
    q.swap_limiter(1.0)  # back: a stopped zone never accepts, so the new bucket starts empty (Go)
    handed = drain(q, clock, seconds=1.5)
    assert [n for _, n in handed] == ["b"]
    assert handed[0][0] >= resumed + 0.99
    q.add("c")
    swapped = clock.t - 1000.0
    q.swap_limiter(2.0)  # the 1 qps bucket was just emptied, so the 2 qps one starts empty too
    handed = drain(q, clock, seconds=1)
    assert [n for _, n in handed] == ["c"]
    assert handed[0][0] >= swapped + 0.45


def test_not_done_values_come_back_after_their_wait_and_removed_ones_never() -> None:
    clock = Clock()
    q = RateLimitedTimedQueue(100.0, now=clock)
    q.add("retry")
    q.add("gone")
    q.remove("gone")
    seen: list[float] = []

    def fail_once(v: TimedValue) -> tuple[bool, float]:
        seen.append(clock.t - 1000.0)
        return len(seen) > 1, 2.0

    for _ in range(40):
        q.try_(fail_once)
        clock.t += 0.1
    assert len(seen) == 2 and seen[1] - seen[0] == pytest.approx(2.0, abs=0.11)
    assert len(q) == 0


@pytest.mark.parametrize(
    ("statuses", "state"),
    [
        (["True", "True", "False"], ZoneState.NORMAL),
        (["Unknown", "Unknown", None], ZoneState.FULL_DISRUPTION),
        (["True", "False", "False", "Unknown"], ZoneState.PARTIAL_DISRUPTION),  # 3 of 4 >= 0.55
        (["True", "True", "False", "False"], ZoneState.NORMAL),  # only 2 not ready
        (["True"] * 3 + ["False"] * 3, ZoneState.NORMAL),  # 0.5 < 0.55
    ],
)
def test_zone_state(statuses: list[str | None], state: ZoneState) -> None:
    assert compute_zone_state(statuses, 0.55)[1] is state


def test_zone_rates_and_keys() -> None:
    def rates(state: ZoneState, size: int) -> float:
        return zone_rate(state, size, eviction_rate=0.1, secondary_rate=0.01, large_cluster_threshold=50)

    assert rates(ZoneState.NORMAL, 10) == 0.1
    assert rates(ZoneState.PARTIAL_DISRUPTION, 51) == 0.01
    assert rates(ZoneState.PARTIAL_DISRUPTION, 50) == 0.0
    assert rates(ZoneState.FULL_DISRUPTION, 10) == 0.1
    labels = {"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "a"}
    assert zone_key({"metadata": {"labels": labels}}) == "r:\x00:a"
    assert zone_key({"metadata": {}}) == ""


def controller(**extra: Any) -> NodeLifecycleController:
    client = cast(KubeClient, object())
    config = NodeLifecycleConfig(**{"large_cluster_size_threshold": 3, **extra})
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client))
    return build(NodeLifecycleController, ctx, config=config, now=lambda: 0.0)


def node(name: str, zone: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}}, "spec": {}}


async def test_zone_states_set_each_zones_rate_and_all_zones_down_stops_everything() -> None:
    c = controller()
    nodes = [node(f"a{i}", "a") for i in range(4)] + [node(f"b{i}", "b") for i in range(2)]
    za, zb = zone_key(nodes[0]), zone_key(nodes[-1])
    await c.health_sync.handle_disruption({za: ["True"] * 4, zb: ["True"] * 2}, nodes)
    assert c.health_sync.zone_states == {za: ZoneState.NORMAL, zb: ZoneState.NORMAL}
    assert c.state.tainters[za].limiter.qps == 0.1
    # zone a: 3 of 4 not ready, larger than the threshold (3): the secondary rate
    await c.health_sync.handle_disruption(
        {za: ["True", "False", "Unknown", "False"], zb: ["True"] * 2}, nodes
    )
    assert c.health_sync.zone_states[za] is ZoneState.PARTIAL_DISRUPTION
    assert c.state.tainters[za].limiter.qps == 0.01
    # zone b fully down while a is not: b evicts at the normal rate
    await c.health_sync.handle_disruption(
        {za: ["True", "False", "Unknown", "False"], zb: ["Unknown"] * 2}, nodes
    )
    assert c.health_sync.zone_states[zb] is ZoneState.FULL_DISRUPTION
    assert c.state.tainters[zb].limiter.qps == 0.1
    # every zone down: the controller is probably the one cut off; tainting stops everywhere
    await c.health_sync.handle_disruption({za: ["Unknown"] * 4, zb: ["Unknown"] * 2}, nodes)
    assert c.state.tainters[za].limiter.qps == 0 and c.state.tainters[zb].limiter.qps == 0
    assert not c.state.tainters[za].limiter.try_accept()
    # one node back: rates restored for each zone's new state
    await c.health_sync.handle_disruption({za: ["True"] + ["Unknown"] * 3, zb: ["Unknown"] * 2}, nodes)
    assert c.health_sync.zone_states[za] is ZoneState.PARTIAL_DISRUPTION
    assert c.state.tainters[za].limiter.qps == 0.01
    assert c.state.tainters[zb].limiter.qps == 0.1


async def test_a_small_zone_in_partial_disruption_stops_tainting() -> None:
    c = controller(large_cluster_size_threshold=50)
    nodes = [node(f"a{i}", "a") for i in range(4)]
    za = zone_key(nodes[0])
    await c.health_sync.handle_disruption({za: ["True"] * 4, "": ["True"]}, nodes)
    await c.health_sync.handle_disruption({za: ["True", "False", "False", "False"], "": ["True"]}, nodes)
    assert c.state.tainters[za].limiter.qps == 0.0
