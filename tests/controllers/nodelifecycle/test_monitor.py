"""The health monitor and the zone-limited tainting pass, on a virtual clock with stores filled by hand.

The controller's informer stores are filled directly and its writes go to `FakeNodes`, which
applies them to the store as the informer would. The clock is the controller's injectable
`now`, so "60 s later" costs nothing.
"""

from __future__ import annotations

import copy
from typing import Any, cast

from apiclient import KubeClient
from apiclient.resources import NODES
from controllers.context import ControllerContext
from controllers.nodelifecycle import NodeLifecycleController
from controllers.nodelifecycle.config import NodeLifecycleConfig
from controllers.nodelifecycle.zones import EXCLUDE_DISRUPTION_LABEL, ZoneState, zone_key
from informers import SharedInformerFactory
from informers.store import Store
from tests.controllers.harness import build

UNREACHABLE = "node.kubernetes.io/unreachable"
HEARTBEAT = "2026-01-01T00:00:00Z"


class FakeNodes:
    """Node patches applied to the informer store; taint writes recorded in order."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.tainted: list[tuple[float, str]] = []
        self.clock: list[float] = [0.0]

    async def patch(
        self, res: Any, name: str, body: dict[str, Any], *, subresource: str | None = None, **_: Any
    ) -> Any:
        if res != NODES:
            return {}
        node = copy.deepcopy(self.store.get(name))
        assert node is not None
        if subresource == "status":
            by_type = {c["type"]: c for c in node["status"]["conditions"]}
            by_type.update({c["type"]: c for c in body["status"]["conditions"]})
            node["status"]["conditions"] = list(by_type.values())
        else:
            node["spec"]["taints"] = body["spec"]["taints"] or []
            if any(t["key"] == UNREACHABLE and t["effect"] == "NoExecute" for t in node["spec"]["taints"]):
                self.tainted.append((self.clock[0], name))
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        self.store.update(name, node)
        return node

    async def get(self, res: Any, name: str, **_: Any) -> Any:
        return self.store.get(name)


def node(name: str, zone: str, *, excluded: bool = False) -> dict[str, Any]:
    labels = {"topology.kubernetes.io/zone": zone}
    if excluded:
        labels[EXCLUDE_DISRUPTION_LABEL] = ""
    ready = {
        "type": "Ready",
        "status": "True",
        "lastHeartbeatTime": HEARTBEAT,
        "lastTransitionTime": HEARTBEAT,
    }
    return {
        "metadata": {"name": name, "uid": name, "resourceVersion": "1", "labels": labels},
        "spec": {},
        "status": {"conditions": [ready]},
    }


class World:
    def __init__(self, nodes: list[dict[str, Any]], **extra: Any) -> None:
        self.clock = [0.0]
        factory = SharedInformerFactory(cast(KubeClient, None))
        config = NodeLifecycleConfig(**{"node_monitor_grace_period": 50.0, **extra})
        self.fake = FakeNodes(factory.informer(NODES).store)
        self.fake.clock = self.clock
        self.controller = build(
            NodeLifecycleController,
            ControllerContext(client=cast(KubeClient, self.fake), informers=factory),
            config=config,
            now=lambda: self.clock[0],
        )
        for n in nodes:
            self.fake.store.update(n["metadata"]["name"], n)
        self.renewals = 0

    def renew_lease(self, name: str) -> None:
        self.renewals += 1
        lease = {
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {
                "renewTime": f"2026-01-01T00:{self.renewals // 60:02d}:{self.renewals % 60:02d}.000000Z"
            },
        }
        self.controller.lease_informer.store.update(f"kube-node-lease/{name}", lease)

    async def advance(self, seconds: float, *, healthy: tuple[str, ...] = (), step: float = 0.1) -> None:
        """Move the clock, running the 100 ms tainting pass and a 5 s monitor pass as KCM would."""
        end = self.clock[0] + seconds
        next_monitor = self.clock[0]
        while self.clock[0] < end - 1e-9:
            if self.clock[0] >= next_monitor - 1e-9:
                for name in healthy:
                    self.renew_lease(name)
                await self.controller.health_sync.sync()
                next_monitor += 5.0
            await self.controller.no_execute_sync.sync()
            self.clock[0] = round(self.clock[0] + step, 6)


async def test_silent_nodes_go_unknown_and_are_tainted_one_per_ten_seconds_in_a_normal_zone() -> None:
    nodes = [node(f"a{i}", "a") for i in range(10)]
    world = World(nodes)
    healthy = tuple(f"a{i}" for i in range(2, 10))
    await world.advance(45, healthy=healthy)
    assert world.fake.tainted == []
    await world.advance(15, healthy=healthy)  # at 55 s a0 and a1 have been silent longer than 50 s
    a0 = world.fake.store.get("a0")
    assert a0 is not None
    assert [c["status"] for c in a0["status"]["conditions"] if c["type"] == "Ready"] == ["Unknown"]
    assert world.controller.health_sync.zone_states[zone_key(a0)] is ZoneState.NORMAL  # 2 of 10 down
    assert len(world.fake.tainted) == 1  # the bucket had one token; the next comes 10 s later
    first = world.fake.tainted[0][0]
    await world.advance(15, healthy=healthy)
    assert len(world.fake.tainted) == 2
    assert world.fake.tainted[1][0] - first >= 9.9  # --node-eviction-rate 0.1: one node per 10 s


async def test_a_small_zone_in_partial_disruption_taints_nothing() -> None:
    nodes = [node(f"a{i}", "a") for i in range(10)] + [node("b0", "b")]
    world = World(nodes)
    healthy = ("a6", "a7", "a8", "a9", "b0")
    await world.advance(120, healthy=healthy)  # 6 of 10 silent: >= 0.55, and 10 <= 50 nodes
    assert world.controller.health_sync.zone_states[zone_key(nodes[0])] is ZoneState.PARTIAL_DISRUPTION
    assert world.fake.tainted == []


async def test_every_zone_down_stops_tainting_and_excluded_nodes_do_not_count() -> None:
    # a0 is healthy but excluded from disruption checks: zone b (all down) is then the only zone
    # counted, every counted zone is fully disrupted, and nothing is tainted.
    world = World([node("a0", "a", excluded=True), node("b0", "b"), node("b1", "b")])
    await world.advance(120, healthy=("a0",))
    assert world.fake.tainted == []
    assert all(
        state is ZoneState.FULL_DISRUPTION for state in world.controller.health_sync.zone_states.values()
    )
    # Without the label the healthy node counts: zone b is down alone and gets tainted.
    world = World([node("a0", "a"), node("b0", "b"), node("b1", "b")])
    await world.advance(120, healthy=("a0",))
    assert sorted(n for _, n in world.fake.tainted) == ["b0", "b1"]


async def test_a_health_pass_over_thousands_of_nodes_lets_the_event_loop_run() -> None:
    """The pass runs in slices: informers, other controllers and health probes are served during it."""
    import anyio.lowlevel

    world = World([node(f"n{i}", "a") for i in range(2000)])
    ticks: list[int] = []
    done = anyio.Event()

    async def ticker() -> None:
        while not done.is_set():
            ticks.append(1)
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()  # the ticker has started
        before = len(ticks)
        await world.controller.health_sync.sync()
        during = len(ticks) - before
        done.set()
    assert during >= 5  # 2,000 nodes in slices of 200


async def test_a_lease_renewal_queues_nothing_and_is_noted_by_the_next_pass() -> None:
    """KCM reads Leases from the lister in its monitor pass: a renewal wakes no handler or queue."""
    world = World([node("n1", "a"), node("n2", "a")])
    await world.controller.health_sync.sync()
    probe = world.controller.state.health["n1"].probe
    world.clock[0] = 30.0
    lease = {
        "metadata": {"name": "n1", "namespace": "kube-node-lease", "resourceVersion": "7"},
        "spec": {"renewTime": "2026-01-01T00:00:30.000000Z"},
    }
    world.controller.lease_informer.apply("ADDED", lease)
    world.controller.lease_informer.apply(
        "MODIFIED", {**lease, "spec": {"renewTime": "2026-01-01T00:00:40.000000Z"}}
    )
    assert (
        world.controller.lease_informer._listeners == []
    )  # nothing woken: the cache update is the whole cost
    assert len(world.controller.queue) == 0 and len(world.controller.pod_queue) == 0
    await world.controller.health_sync.sync()
    assert world.controller.state.health["n1"].probe == 30.0 > probe
    assert world.controller.state.health["n2"].probe == probe
    assert len(world.controller.queue) == 0 and len(world.controller.pod_queue) == 0


async def test_a_change_to_a_quiet_node_is_seen_by_the_next_pass() -> None:
    """Passes skip nodes whose cached object and Lease are unchanged; any write to the node ends that.

    A Ready node that someone taints `unreachable:NoExecute` by hand loses the taint at the next
    pass, as in Go, and a node relabelled into another zone is counted there.
    """
    world = World([node("n1", "a"), node("n2", "a")])
    await world.advance(20, healthy=("n1", "n2"))
    tainted = copy.deepcopy(world.fake.store.get("n1"))
    assert tainted is not None
    tainted["spec"]["taints"] = [{"key": UNREACHABLE, "effect": "NoExecute"}]
    tainted["metadata"]["labels"]["topology.kubernetes.io/zone"] = "b"
    world.fake.store.update("n1", tainted)
    await world.advance(5, healthy=("n1", "n2"))
    n1 = world.fake.store.get("n1")
    assert n1 is not None and n1["spec"]["taints"] == []
    assert zone_key(n1) in world.controller.health_sync.zone_states
    assert world.controller.health_sync.known_nodes["n1"] == zone_key(n1)


async def test_a_quiet_node_that_stops_renewing_goes_unknown_after_the_grace_period() -> None:
    world = World([node("n1", "a"), node("n2", "a")])
    await world.advance(20, healthy=("n1", "n2"))
    await world.advance(45, healthy=("n2",))  # n1's last renewal was at 15 s: silent 50 s at 65 s
    n1 = world.fake.store.get("n1")
    assert n1 is not None
    assert [c["status"] for c in n1["status"]["conditions"] if c["type"] == "Ready"] == ["True"]
    await world.advance(10, healthy=("n2",))
    n1 = world.fake.store.get("n1")
    assert n1 is not None
    assert [c["status"] for c in n1["status"]["conditions"] if c["type"] == "Ready"] == ["Unknown"]
