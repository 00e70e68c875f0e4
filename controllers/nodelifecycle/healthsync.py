"""The health monitor: KCM's `monitorNodeHealth`, every `node_monitor_period` (5 s).

A node seen for the first time gets a `RegisteredNode` event and loses any NoExecute taint of
ours (`markNodeAsReachable`: it is judged afresh); a node gone from the cache gets `RemovingNode`.
Per node, `health.observe` notes new heartbeats (status or Lease); past the grace period Ready and
the pressure conditions become Unknown (status subresource, retried on a fresh read up to five
times). A node whose Ready is False/Unknown is queued in its zone's `RateLimitedTimedQueue` for the
NoExecute taint (`markNodeForTainting`: queued afresh every pass until it carries the taint; or has
the other NoExecute taint swapped at once, no rate limit: it was judged already); a Ready node
loses both. A node that just went silent gets a `NodeNotReady` event and its pods are marked not
ready. Then zone states are recomputed (`zones`) and each zone's rate set.

The tainting decision uses the Ready condition *after* this pass's update, as KCM does since 1.29
(kubernetes/kubernetes#120816; before, the taint came one monitor period later).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.lowlevel
from structlog.typing import FilteringBoundLogger

from apiclient import ApiError, KubeClient
from apiclient.resources import NODES
from controllers.context import EventRecorder
from controllers.nodelifecycle import metrics
from controllers.nodelifecycle.config import NodeLifecycleConfig
from controllers.nodelifecycle.health import lease_renew_time, observe, renewed_later, unknown_conditions
from controllers.nodelifecycle.ratelimited import RateLimitedTimedQueue
from controllers.nodelifecycle.state import NodeLifecycleState
from controllers.nodelifecycle.taints import NOT_READY_TAINT, UNREACHABLE_TAINT
from controllers.nodelifecycle.writes import NodeWrites
from controllers.nodelifecycle.zones import (
    ZoneState,
    compute_zone_state,
    excluded_from_disruption,
    zone_key,
    zone_rate,
)
from informers import NODE_NAME_INDEX, Lister
from kubeutil.conditions import get_condition
from kubeutil.meta import object_meta
from kubeutil.taints import Taint, node_taints, taint_exists

Obj = dict[str, Any]

NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_HEALTH_UPDATE_RETRY = 5  # Go's scheduler.NodeHealthUpdateRetry
RETRY_SLEEP = 0.02  # Go's retrySleepTime between those tries
MONITOR_YIELD_EVERY = 200  # nodes per slice of a health pass (~5 ms): the loop never waits for a whole pass


def _name(obj: Mapping[str, Any]) -> str:
    return str(object_meta(obj).get("name", ""))


def node_ref(name: str, uid: str) -> Obj:
    """The `ObjectReference` KCM records node events against (`RecordNodeEvent`)."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": uid}}


def _uid(node: Mapping[str, Any]) -> str:
    return str(object_meta(node).get("uid") or "")


@dataclass(slots=True)
class _Seen:
    """What the health pass worked out about one cached node object, and what it last concluded.

    At 5,000 nodes a pass every 5 s visits a thousand nodes a second, nearly all Ready,
    renewing their Lease and otherwise unchanged; recomputing each one's zone, health and
    NoExecute taints was most of an idle manager's CPU. The informer replaces a cached object
    on every change, so "the same object as last pass" is a free, exact test for "unchanged".
    """

    node: Mapping[str, Any]
    zone: str
    excluded: bool
    #: neither NoExecute taint is on the node: a Ready node needs no taint removed
    untainted: bool
    #: the Lease object last looked at while the node was quiet: Ready with nothing left to do,
    #: a conclusion that holds while the node stays this object and the grace period (counted
    #: from the last renewal) has not run out
    quiet_lease: Mapping[str, Any] | None = None
    quiet: bool = False


def _seen(node: Mapping[str, Any]) -> _Seen:
    taints = node_taints(node)
    return _Seen(
        node=node,
        zone=zone_key(node),
        excluded=excluded_from_disruption(node),
        untainted=not taint_exists(taints, UNREACHABLE_TAINT) and not taint_exists(taints, NOT_READY_TAINT),
    )


class NodeHealthSync:
    """One health pass over every cached node, then the zones' states and rates."""

    def __init__(
        self,
        *,
        client: KubeClient,
        node_lister: Lister,
        pod_lister: Lister,
        lease_lister: Lister,
        state: NodeLifecycleState,
        writes: NodeWrites,
        recorder: EventRecorder,
        config: NodeLifecycleConfig,
        now: Callable[[], float],
        log: FilteringBoundLogger,
    ) -> None:
        self.client = client
        self.node_lister = node_lister
        self.pod_lister = pod_lister
        self.lease_lister = lease_lister
        self.state = state
        self.writes = writes
        self.recorder = recorder
        self.log = log
        self.monitor_grace = config.node_monitor_grace_period
        self.startup_grace = config.node_startup_grace_period
        self.eviction_rate = config.node_eviction_rate
        self.secondary_rate = config.secondary_node_eviction_rate
        self.large_cluster_threshold = config.large_cluster_size_threshold
        self.unhealthy_threshold = config.unhealthy_zone_threshold
        self._now = now
        self.known_nodes: dict[str, str] = {}  # name -> zone
        self._seen: dict[str, _Seen] = {}
        self.zone_states: dict[str, ZoneState] = {}
        self.nodes_to_retry: set[str] = set()

    async def sync(self) -> None:
        """One pass of `monitorNodeHealth` over every node in the cache."""
        nodes = self.node_lister.list()
        present: set[str] = set()
        zone_ready: dict[str, list[str | None]] = {}
        # The clock is read once per slice, not per node: asking anyio for the time looks the
        # running async library up each call, which was most of a pass over 5,000 quiet nodes.
        now = self._now()
        for i, cached in enumerate(nodes):
            if i % MONITOR_YIELD_EVERY == MONITOR_YIELD_EVERY - 1:
                await anyio.lowlevel.checkpoint()  # thousands of nodes: let the loop run between slices
                now = self._now()
            name = _name(cached)
            present.add(name)
            seen = self._seen_for(name, cached)
            known = self.known_nodes.get(name)
            if known is None:
                await self._register(name, cached, seen.zone)
            elif known != seen.zone or seen.zone not in self.zone_states:
                self._track_zone(name, seen.zone)
            lease = self.lease_lister.get(name, NODE_LEASE_NAMESPACE)
            if seen.quiet:
                # The same node object as at its last quiet pass: only its Lease can have news,
                # which is `observe`'s last step for an unchanged status.
                health = self.state.health[name]
                if seen.quiet_lease is not lease:
                    renew = lease_renew_time(lease)
                    if renewed_later(health.lease_renew, renew):
                        health.lease_renew, health.probe = renew, now
                    seen.quiet_lease = lease
                if now <= health.probe + self.monitor_grace:
                    if not seen.excluded:
                        zone_ready.setdefault(seen.zone, []).append("True")
                    continue
            seen.quiet = False
            try:
                observed, current, node = await self._update_node_health_with_retries(cached, now)
            except ApiError as exc:
                self.log.warning("updating node health failed", node=name, error=str(exc))
                continue
            if node is None:
                self.log.warning("node gone while its health was updated", node=name)
                continue
            if node is not cached:
                seen = self._seen_for(name, node)
            if not seen.excluded:
                zone_ready.setdefault(seen.zone, []).append(current)
            if current is None:
                self.nodes_to_retry.discard(name)
                continue
            if current == "True" and seen.untainted:
                # process_taint_based_eviction's Ready case with no taint to remove
                tainter = self.state.tainters.get(seen.zone)
                if tainter is not None:
                    tainter.remove(name)
            else:
                try:
                    await self.process_taint_based_eviction(node, current)
                except ApiError as exc:
                    self.log.warning("tainting node failed", node=name, error=str(exc))
            just_failed = current != "True" and observed == "True"
            if just_failed:
                self.recorder.event(
                    node_ref(name, _uid(node)),
                    "Normal",
                    "NodeNotReady",
                    f"Node {name} status is now: NodeNotReady",
                )
            if just_failed or (name in self.nodes_to_retry and observed != "True"):
                try:
                    await self.writes.mark_pods_not_ready(
                        self.pod_lister.by_index(NODE_NAME_INDEX, name), name
                    )
                except ApiError as exc:
                    self.log.warning("marking pods not ready failed", node=name, error=str(exc))
                    self.nodes_to_retry.add(name)
                    continue
            self.nodes_to_retry.discard(name)
            if observed == "True" and current == "True" and node is cached and seen.untainted:
                seen.quiet, seen.quiet_lease = True, lease
        if len(self.known_nodes) > len(present):
            self._forget_deleted(present)
        await self.handle_disruption(zone_ready, nodes)

    def _seen_for(self, name: str, node: Mapping[str, Any]) -> _Seen:
        seen = self._seen.get(name)
        if seen is None or seen.node is not node:
            seen = self._seen[name] = _seen(node)
        return seen

    async def _register(self, name: str, node: Mapping[str, Any], zone: str) -> None:
        """A node seen for the first time (`classifyNodes`' added): an event, its zone, and none of
        our NoExecute taints until this pass judges it (`markNodeAsReachable`)."""
        self.recorder.event(
            node_ref(name, _uid(node)),
            "Normal",
            "RegisteredNode",
            f"Node {name} event: Registered Node {name} in Controller",
        )
        self.known_nodes[name] = zone
        self._ensure_zone(zone)
        try:
            await self.mark_node_reachable(node)
        except ApiError as exc:
            self.log.warning("removing NoExecute taints failed", node=name, error=str(exc))

    def _track_zone(self, name: str, zone: str) -> None:
        """A known node relabelled into another zone, or in a zone whose state was dropped."""
        old = self.known_nodes.get(name)
        if old is not None and old != zone and old in self.state.tainters:
            self.state.tainters[old].remove(name)
        self.known_nodes[name] = zone
        self._ensure_zone(zone)

    def _forget_deleted(self, present: set[str]) -> None:
        """Nodes gone from the cache since the last pass: an event; their health and queued taints go too."""
        for name, zone in list(self.known_nodes.items()):
            if name not in present:
                seen = self._seen.pop(name, None)
                uid = _uid(seen.node) if seen is not None else ""
                self.recorder.event(
                    node_ref(name, uid),
                    "Normal",
                    "RemovingNode",
                    f"Node {name} event: Removing Node {name} from Controller",
                )
                del self.known_nodes[name]
                self.state.health.pop(name, None)
                self.nodes_to_retry.discard(name)
                if zone in self.state.tainters:
                    self.state.tainters[zone].remove(name)

    def _ensure_zone(self, zone: str) -> RateLimitedTimedQueue:
        """`addPodEvictorForNewZone`: a zone without a state starts Initial with a fresh tainter."""
        if zone not in self.zone_states:
            self.zone_states[zone] = ZoneState.INITIAL
            self.state.tainters[zone] = RateLimitedTimedQueue(self.eviction_rate, now=self._now)
            metrics.EVICTIONS_TOTAL.labels(zone)  # the zone's series starts at 0
        return self.state.tainters[zone]

    def _tainter(self, zone: str) -> RateLimitedTimedQueue:
        tainter = self.state.tainters.get(zone)
        return tainter if tainter is not None else self._ensure_zone(zone)

    async def _update_node_health_with_retries(
        self, node: Mapping[str, Any], now: float
    ) -> tuple[str, str | None, Mapping[str, Any] | None]:
        """`update_node_health`, tried again on a fresh read of the node when its write fails
        (Go polls every 20 ms, five tries in all); the last failure is raised.

        The node returned is None when it was gone from the API server at a retry.
        """
        name = _name(node)
        for _ in range(NODE_HEALTH_UPDATE_RETRY - 1):
            try:
                return await self.update_node_health(node, now=now)
            except ApiError as exc:
                self.log.info("updating node health failed, retrying", node=name, error=str(exc))
            await anyio.sleep(RETRY_SLEEP)
            fresh = await self.client.get_or_none(NODES, name)
            if fresh is None:
                return "Unknown", None, None
            node = fresh
        return await self.update_node_health(node, now=now)

    async def update_node_health(
        self, node: Mapping[str, Any], *, now: float | None = None
    ) -> tuple[str, str | None, Mapping[str, Any]]:
        """`tryUpdateNodeHealth`: (Ready status observed, Ready status now, the node as now written)."""
        name = _name(node)
        if now is None:
            now = self._now()
        ready = get_condition(node.get("status"), "Ready")
        observed = str(ready.get("status")) if ready is not None else "Unknown"
        grace = self.monitor_grace if ready is not None else self.startup_grace
        lease = self.lease_lister.get(name, NODE_LEASE_NAMESPACE)
        health = self.state.health[name] = observe(self.state.health.get(name), node, lease, now)
        current = str(ready.get("status")) if ready is not None else None
        if now <= health.probe + grace:
            return observed, current, node
        changes = unknown_conditions(node)
        if not any(c["type"] == "Ready" for c in changes):
            return observed, current if current is not None else "Unknown", node
        self.log.info("node stopped posting status", node=name, silent_for=round(now - health.probe, 1))
        written = await self.client.patch(
            NODES, name, {"status": {"conditions": changes}}, subresource="status", patch_type="strategic"
        )
        health.ready = get_condition(written.get("status"), "Ready")
        health.ready_transition = now
        return observed, "Unknown", written

    async def process_taint_based_eviction(self, node: Mapping[str, Any], ready: str) -> None:
        """Queue (or swap) the NoExecute taint matching a not-Ready node; clear it off a Ready one."""
        name = _name(node)
        taints = node_taints(node)
        if ready in ("False", "Unknown"):
            wanted, other = (
                (NOT_READY_TAINT, UNREACHABLE_TAINT)
                if ready == "False"
                else (UNREACHABLE_TAINT, NOT_READY_TAINT)
            )
            if taint_exists(taints, other):
                # Already judged and tainted once: swap at once, no rate limit (Go does the same).
                await self.writes.swap_node_taints(name, [wanted], [other])
            else:
                self.mark_node_for_tainting(node, wanted)
        elif ready == "True":
            await self.mark_node_reachable(node)

    def mark_node_for_tainting(self, node: Mapping[str, Any], wanted: Taint) -> bool:
        """`markNodeForTainting`: queue the node in its zone; True if it was added.

        A node without the taint is removed first, so it is queued afresh even when it was
        processed before (its taint since taken off by hand, say); a node that has it is queued
        only if it is no member yet (as after a restart), and the pass finds nothing to write.
        """
        name = _name(node)
        tainter = self._tainter(zone_key(node))
        fresh = not tainter.queued(name)
        if not taint_exists(node_taints(node), wanted):
            tainter.remove(name)
        added = tainter.add(name, _uid(node))
        if added and fresh:
            self.log.info("node queued for NoExecute taint", node=name, taint=wanted["key"])
        return added

    async def mark_node_reachable(self, node: Mapping[str, Any]) -> None:
        name = _name(node)
        taints = node_taints(node)
        remove = [t for t in (UNREACHABLE_TAINT, NOT_READY_TAINT) if taint_exists(taints, t)]
        if remove:
            await self.writes.swap_node_taints(name, [], remove)
        zone = zone_key(node)
        if zone in self.state.tainters:
            self.state.tainters[zone].remove(name)

    # -- zones -----------------------------------------------------------------------------

    async def handle_disruption(
        self, zone_ready: Mapping[str, Sequence[str | None]], nodes: Sequence[Mapping[str, Any]]
    ) -> None:
        """`handleDisruption`: new zone states, each zone's rate, and the all-zones-down stop."""
        new_states: dict[str, ZoneState] = {}
        all_fully_disrupted = True
        for zone, statuses in zone_ready.items():
            unhealthy, state = compute_zone_state(statuses, self.unhealthy_threshold)
            metrics.ZONE_SIZE.labels(zone).set(len(statuses))
            metrics.ZONE_HEALTH.labels(zone).set(100.0 * (len(statuses) - unhealthy) / len(statuses))
            metrics.UNHEALTHY_NODES.labels(zone).set(unhealthy)
            if state is not ZoneState.FULL_DISRUPTION:
                all_fully_disrupted = False
            new_states[zone] = state
            if zone not in self.zone_states:
                self.log.warning("setting initial state for unseen zone", zone=zone)
                self._ensure_zone(zone)
        all_were_fully_disrupted = True
        for zone in list(self.zone_states):
            if zone not in zone_ready:
                # No node counted in the zone: its state goes (KCM keeps the series at "empty").
                metrics.ZONE_SIZE.labels(zone).set(0)
                metrics.ZONE_HEALTH.labels(zone).set(100)
                metrics.UNHEALTHY_NODES.labels(zone).set(0)
                del self.zone_states[zone]
                continue
            if self.zone_states[zone] is not ZoneState.FULL_DISRUPTION:
                all_were_fully_disrupted = False
        if all_fully_disrupted and all_were_fully_disrupted:
            return
        if all_fully_disrupted:
            self.log.warning("every node is not Ready: entering master disruption mode, tainting stops")
            for node in nodes:
                try:
                    await self.mark_node_reachable(node)
                except ApiError as exc:
                    self.log.warning("removing NoExecute taints failed", node=_name(node), error=str(exc))
            for zone in self.zone_states:
                self.state.tainters[zone].swap_limiter(0.0)
                self.zone_states[zone] = ZoneState.FULL_DISRUPTION
            return
        if all_were_fully_disrupted:
            self.log.info("some nodes are Ready: exiting master disruption mode")
            now = self._now()
            for health in self.state.health.values():
                health.probe = now  # give every node a fresh grace period
                health.ready_transition = now
            for zone in self.zone_states:
                self._set_zone_rate(zone, len(zone_ready.get(zone, ())), new_states[zone])
            return
        for zone, state in list(self.zone_states.items()):
            new = new_states[zone]
            if state is not new:
                self.log.info("zone changed state", zone=zone, state=new.value)
                self._set_zone_rate(zone, len(zone_ready.get(zone, ())), new)

    def _set_zone_rate(self, zone: str, size: int, state: ZoneState) -> None:
        rate = zone_rate(
            state,
            size,
            eviction_rate=self.eviction_rate,
            secondary_rate=self.secondary_rate,
            large_cluster_threshold=self.large_cluster_threshold,
        )
        self._ensure_zone(zone).swap_limiter(rate)
        self.zone_states[zone] = state
