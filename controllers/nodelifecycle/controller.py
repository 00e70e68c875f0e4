"""The node lifecycle controller, as `pkg/controller/nodelifecycle/node_lifecycle_controller.go`.

Two queues served by the worker engine and two periodic loops:

- the node queue (the base class's, one worker): each node add/update is a NoSchedule tainting
  pass: its conditions map to taints (Ready False/Unknown -> `not-ready`/`unreachable`,
  MemoryPressure/DiskPressure/PIDPressure/NetworkUnavailable True -> their taints, all
  NoSchedule; `spec.unschedulable` -> `unschedulable`), written as one diff;
- the health monitor, every `node_monitor_period` (5 s): per node, `health.observe` notes new
  heartbeats (status or Lease); past the grace period Ready and the pressure conditions become
  Unknown (status subresource). A node whose Ready is False/Unknown is queued in its zone's
  `RateLimitedTimedQueue` for the NoExecute taint (or has the other NoExecute taint swapped at
  once, no rate limit: it was judged already); a Ready node loses both. A node that just went
  silent gets a `NodeNotReady` event and its pods are marked not ready. Then zone states are
  recomputed (`zones`) and each zone's rate set;
- the NoExecute tainting pass, every 100 ms: each zone's queue hands out at most its rate of
  nodes per second, each re-checked against the cache before its taint is written;
- the pod queue: a pod that appears on a node known not Ready is marked not ready too.

One deliberate difference from Go: the tainting decision uses the Ready condition *after* this
pass's update (Go uses the one observed before it, so the taint comes one monitor period later).
The taint-eviction controller does the pod deletions; this one only taints.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from apiclient import ApiError
from apiclient.resources import LEASES, NODES, PODS
from controllers.base import Controller
from controllers.common.pods import get_pod_condition
from controllers.context import ControllerContext
from controllers.nodelifecycle import metrics
from controllers.nodelifecycle.config import NodeLifecycleConfig
from controllers.nodelifecycle.health import (
    NodeHealth,
    lease_renew_time,
    observe,
    renewed_later,
    unknown_conditions,
)
from controllers.nodelifecycle.ratelimited import RateLimitedTimedQueue, TimedValue
from controllers.nodelifecycle.zones import (
    ZoneState,
    compute_zone_state,
    excluded_from_disruption,
    zone_key,
    zone_rate,
)
from informers import NODE_NAME_INDEX, DeletedFinalStateUnknown, ResourceEventHandler, meta_key, split_key
from kubeutil.conditions import get_condition, pod_condition_patch
from kubeutil.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    TAINT_NODE_DISK_PRESSURE,
    TAINT_NODE_MEMORY_PRESSURE,
    TAINT_NODE_NETWORK_UNAVAILABLE,
    TAINT_NODE_NOT_READY,
    TAINT_NODE_PID_PRESSURE,
    TAINT_NODE_UNREACHABLE,
    TAINT_NODE_UNSCHEDULABLE,
    Taint,
    node_taints,
    swap_taints,
    taint_exists,
    taint_set_diff,
)
from kubeutil.timestamps import format_time, utcnow
from workqueue import RateLimitingQueue

Obj = dict[str, Any]

NODE_LEASE_NAMESPACE = "kube-node-lease"
NOT_READY_TAINT: Taint = {"key": TAINT_NODE_NOT_READY, "effect": NO_EXECUTE}
UNREACHABLE_TAINT: Taint = {"key": TAINT_NODE_UNREACHABLE, "effect": NO_EXECUTE}
NO_EXECUTE_TAINTING_PERIOD = 0.1  # Go's nodeEvictionPeriod
SWAP_RETRIES = 5
MONITOR_YIELD_EVERY = 200  # nodes per slice of a health pass (~5 ms): the loop never waits for a whole pass

# Condition type -> status -> NoSchedule taint key (`nodeConditionToTaintKeyStatusMap`).
CONDITION_TAINTS: dict[str, dict[str, str]] = {
    "Ready": {"False": TAINT_NODE_NOT_READY, "Unknown": TAINT_NODE_UNREACHABLE},
    "MemoryPressure": {"True": TAINT_NODE_MEMORY_PRESSURE},
    "DiskPressure": {"True": TAINT_NODE_DISK_PRESSURE},
    "NetworkUnavailable": {"True": TAINT_NODE_NETWORK_UNAVAILABLE},
    "PIDPressure": {"True": TAINT_NODE_PID_PRESSURE},
}
CONDITION_TAINT_KEYS = frozenset(key for by_status in CONDITION_TAINTS.values() for key in by_status.values())


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name", ""))


def _ready_status(node: Mapping[str, Any]) -> str | None:
    cond = get_condition(node.get("status"), "Ready")
    return str(cond.get("status")) if cond is not None else None


def no_schedule_taints(node: Mapping[str, Any]) -> list[Taint]:
    """The NoSchedule taints a node's conditions and `spec.unschedulable` call for."""
    out: list[Taint] = []
    for cond in (node.get("status") or {}).get("conditions") or ():
        key = CONDITION_TAINTS.get(str(cond.get("type")), {}).get(str(cond.get("status")))
        if key is not None:
            out.append({"key": key, "effect": NO_SCHEDULE})
    if (node.get("spec") or {}).get("unschedulable"):
        out.append({"key": TAINT_NODE_UNSCHEDULABLE, "effect": NO_SCHEDULE})
    return out


def controller_no_schedule_taints(node: Mapping[str, Any]) -> list[Taint]:
    """The node's NoSchedule taints this controller owns (condition and unschedulable taints)."""
    return [
        t
        for t in node_taints(node)
        if t.get("effect") == NO_SCHEDULE
        and (t.get("key") == TAINT_NODE_UNSCHEDULABLE or t.get("key") in CONDITION_TAINT_KEYS)
    ]


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


# KCM's queue names, so the `workqueue_*{name=...}` series existing dashboards query are found.
NODE_QUEUE_NAME = "node_lifecycle_controller"
POD_QUEUE_NAME = "node_lifecycle_controller_pods"


class NodeLifecycleController(Controller):
    """KCM's `node-lifecycle-controller` (taint-based eviction); see the module docstring."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        name: str,
        workers: int,
        config: NodeLifecycleConfig,
        now: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(ctx, name=name, workers=workers)
        self.config = config
        self.monitor_grace = config.node_monitor_grace_period
        self.startup_grace = config.node_startup_grace_period
        self.monitor_period = config.node_monitor_period
        self.eviction_rate = config.node_eviction_rate
        self.secondary_rate = config.secondary_node_eviction_rate
        self.large_cluster_threshold = config.large_cluster_size_threshold
        self.unhealthy_threshold = config.unhealthy_zone_threshold
        self._now = now or anyio.current_time
        self.health: dict[str, NodeHealth] = {}
        self.known_nodes: dict[str, str] = {}  # name -> zone
        self._seen: dict[str, _Seen] = {}
        self.tainters: dict[str, RateLimitedTimedQueue] = {}
        self.zone_states: dict[str, ZoneState] = {}
        self.nodes_to_retry: set[str] = set()
        self.pod_queue: RateLimitingQueue[str] = RateLimitingQueue(name=POD_QUEUE_NAME)
        self.pod_worker = self.make_worker(self.process_pod)
        self.node_informer = ctx.informers.informer(NODES)
        self.pod_informer = ctx.informers.informer(PODS)
        self.lease_informer = ctx.informers.informer(LEASES, namespace=NODE_LEASE_NAMESPACE)
        self.node_lister = self.node_informer.lister
        self.pod_lister = self.pod_informer.lister
        self.lease_lister = self.lease_informer.lister
        self.node_informer.add_event_handler(
            ResourceEventHandler(
                on_add=lambda node: self.enqueue(_name(node)),
                on_update=lambda old, new: self.enqueue(_name(new)),
                on_delete=self._node_deleted,
            )
        )
        self.pod_informer.add_event_handler(
            ResourceEventHandler(on_add=self._pod_changed, on_update=lambda old, new: self._pod_changed(new))
        )

    def make_queue(self) -> RateLimitingQueue[str]:
        return RateLimitingQueue(name=NODE_QUEUE_NAME)

    # -- handlers --------------------------------------------------------------------------

    def _node_deleted(self, obj: Any) -> None:
        node = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if isinstance(node, Mapping):
            self.enqueue(_name(node))

    def _pod_changed(self, pod: Obj) -> None:
        if (pod.get("spec") or {}).get("nodeName"):
            self.pod_queue.add(meta_key(pod))

    # -- loops -----------------------------------------------------------------------------

    def stop(self) -> None:
        super().stop()
        self.pod_queue.shutdown()

    def start_workers(self, tg: TaskGroup, workers: int) -> None:
        """The node queue's workers (the base class's) and one pod worker."""
        super().start_workers(tg, workers)
        tg.start_soon(self.pod_worker.run, self.pod_queue)

    def start_loops(self, tg: TaskGroup) -> None:
        tg.start_soon(
            functools.partial(
                self.every, self.monitor_period, self.monitor_node_health, what="monitoring node health"
            )
        )
        tg.start_soon(
            functools.partial(
                self.every,
                NO_EXECUTE_TAINTING_PERIOD,
                self.do_no_execute_tainting_pass,
                what="NoExecute tainting pass",
            )
        )

    # -- NoSchedule tainting (the node queue) ------------------------------------------

    async def sync(self, key: str) -> None:
        """`doNoScheduleTaintingPass`: make the node's condition taints match its conditions."""
        node = self.node_lister.get(key)
        if node is None:
            return
        add, remove = taint_set_diff(no_schedule_taints(node), controller_no_schedule_taints(node))
        if add or remove:
            await self.swap_node_taints(key, add, remove)

    async def swap_node_taints(self, name: str, add: Sequence[Taint], remove: Sequence[Taint]) -> bool:
        """Add and remove taints in one write (`SwapNodeControllerTaint`); False if the node is gone.

        The patch carries the resourceVersion it was computed from; on a conflict the node is
        read again and the diff recomputed, up to five times.
        """
        stamp = format_time(utcnow())
        stamped = [{**t, "timeAdded": stamp} for t in add]
        node: Mapping[str, Any] | None = self.node_lister.get(name)
        for attempt in range(SWAP_RETRIES):
            if node is None:
                return False
            new = swap_taints(node_taints(node), stamped, remove)
            if new is None:
                return True
            patch = {
                "metadata": {"resourceVersion": _meta(node).get("resourceVersion")},
                "spec": {"taints": new or None},
            }
            try:
                await self.client.patch(NODES, name, patch)
                return True
            except ApiError as exc:
                if exc.not_found:
                    return False
                if not exc.conflict or attempt == SWAP_RETRIES - 1:
                    raise
            try:
                node = await self.client.get(NODES, name)
            except ApiError as exc:
                if exc.not_found:
                    return False
                raise
        return False

    # -- health monitoring -----------------------------------------------------------------

    async def monitor_node_health(self) -> None:
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
            if self.known_nodes.get(name) != seen.zone:
                self._track_zone(name, seen.zone)
            lease = self.lease_lister.get(name, NODE_LEASE_NAMESPACE)
            if seen.quiet:
                # The same node object as at its last quiet pass: only its Lease can have news,
                # which is `observe`'s last step for an unchanged status.
                health = self.health[name]
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
                observed, current, node = await self.update_node_health(cached, now=now)
            except ApiError as exc:
                self.log.warning("updating node health failed", node=name, error=str(exc))
                continue
            if node is not cached:
                seen = self._seen_for(name, node)
            if not seen.excluded:
                zone_ready.setdefault(seen.zone, []).append(current)
            if current is None:
                continue
            if current == "True" and seen.untainted:
                # process_taint_based_eviction's Ready case with no taint to remove
                tainter = self.tainters.get(seen.zone)
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
                    node, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady"
                )
            if just_failed or (name in self.nodes_to_retry and observed != "True"):
                try:
                    await self.mark_pods_not_ready(self.pod_lister.by_index(NODE_NAME_INDEX, name), name)
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

    def _track_zone(self, name: str, zone: str) -> None:
        """A node seen for the first time, or relabelled into another zone (`classifyNodes`)."""
        old = self.known_nodes.get(name)
        if old is not None and old in self.tainters:
            self.tainters[old].remove(name)
        self.known_nodes[name] = zone
        self._ensure_zone(zone)

    def _forget_deleted(self, present: set[str]) -> None:
        """Nodes gone from the cache since the last pass: their health and queued taints go too."""
        for name, zone in list(self.known_nodes.items()):
            if name not in present:
                del self.known_nodes[name]
                self._seen.pop(name, None)
                self.health.pop(name, None)
                self.nodes_to_retry.discard(name)
                if zone in self.tainters:
                    self.tainters[zone].remove(name)

    def _ensure_zone(self, zone: str) -> RateLimitedTimedQueue:
        tainter = self.tainters.get(zone)
        if tainter is None:
            tainter = self.tainters[zone] = RateLimitedTimedQueue(self.eviction_rate, now=self._now)
            self.zone_states[zone] = ZoneState.INITIAL
        return tainter

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
        health = self.health[name] = observe(self.health.get(name), node, lease, now)
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
        tainter = self._ensure_zone(zone_key(node))
        if ready in ("False", "Unknown"):
            wanted, other = (
                (NOT_READY_TAINT, UNREACHABLE_TAINT)
                if ready == "False"
                else (UNREACHABLE_TAINT, NOT_READY_TAINT)
            )
            if taint_exists(taints, other):
                # Already judged and tainted once: swap at once, no rate limit (Go does the same).
                await self.swap_node_taints(name, [wanted], [other])
            elif not taint_exists(taints, wanted):
                if tainter.add(name, str(_meta(node).get("uid", ""))):
                    self.log.info("node queued for NoExecute taint", node=name, ready=ready)
        elif ready == "True":
            await self.mark_node_reachable(node)

    async def mark_node_reachable(self, node: Mapping[str, Any]) -> None:
        name = _name(node)
        taints = node_taints(node)
        remove = [t for t in (UNREACHABLE_TAINT, NOT_READY_TAINT) if taint_exists(taints, t)]
        if remove:
            await self.swap_node_taints(name, [], remove)
        zone = zone_key(node)
        if zone in self.tainters:
            self.tainters[zone].remove(name)

    # -- NoExecute tainting under the zone rate limits ---------------------------------

    async def do_no_execute_tainting_pass(self) -> None:
        """`doNoExecuteTaintingPass`: each zone's queue hands out nodes at its rate; taint them."""
        for zone, tainter in list(self.tainters.items()):
            pending: list[tuple[str, Taint, Taint]] = []

            def decide(
                value: TimedValue, pending: list[tuple[str, Taint, Taint]] = pending
            ) -> tuple[bool, float]:
                node = self.node_lister.get(value.value)
                if node is None:
                    return True, 0.0
                status = _ready_status(node)
                if status == "False":
                    pending.append((value.value, NOT_READY_TAINT, UNREACHABLE_TAINT))
                elif status == "Unknown":
                    pending.append((value.value, UNREACHABLE_TAINT, NOT_READY_TAINT))
                return True, 0.0  # Ready again (or no condition): nothing to taint

            tainter.try_(decide)
            for name, add, remove in pending:
                try:
                    if await self.swap_node_taints(name, [add], [remove]):
                        metrics.EVICTIONS_TOTAL.labels(zone).inc()
                        self.log.info("node tainted", node=name, taint=add["key"])
                except ApiError as exc:
                    self.log.warning("NoExecute tainting failed, will retry", node=name, error=str(exc))
                    tainter.add(name)

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
                self._ensure_zone(zone)
        all_were_fully_disrupted = True
        for zone in list(self.zone_states):
            if zone not in zone_ready:
                del self.zone_states[zone]
                for gauge in (metrics.ZONE_SIZE, metrics.ZONE_HEALTH, metrics.UNHEALTHY_NODES):
                    try:
                        gauge.remove(zone)
                    except KeyError:
                        pass
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
                self.tainters[zone].swap_limiter(0.0)
                self.zone_states[zone] = ZoneState.FULL_DISRUPTION
            return
        if all_were_fully_disrupted:
            self.log.info("some nodes are Ready: exiting master disruption mode")
            now = self._now()
            for health in self.health.values():
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

    # -- pods ------------------------------------------------------------------------------

    async def process_pod(self, key: str) -> None:
        """`processPod`: a pod on a node known not Ready is marked not ready too."""
        namespace, name = split_key(key)
        pod = self.pod_lister.get(name, namespace)
        if pod is None:
            return
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        health = self.health.get(node_name)
        if health is None or health.ready is None:
            return
        if health.ready.get("status") != "True":
            await self.mark_pods_not_ready([pod], node_name)

    async def mark_pods_not_ready(self, pods: Sequence[Mapping[str, Any]], node_name: str) -> None:
        """`MarkPodsNotReady`: Ready=False on each pod of the node (status subresource), one event each."""
        errors: list[ApiError] = []
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") != node_name:
                continue
            ready = get_pod_condition(dict(pod), "Ready")
            if ready is None or ready.get("status") == "False":
                continue
            meta = _meta(pod)
            condition = {**ready, "status": "False", "lastTransitionTime": format_time(utcnow())}
            try:
                await self.client.patch(
                    PODS,
                    str(meta.get("name")),
                    pod_condition_patch(condition, uid=str(meta.get("uid") or "") or None),
                    namespace=str(meta.get("namespace")),
                    subresource="status",
                    patch_type="strategic",
                )
            except ApiError as exc:
                if exc.not_found or exc.conflict:
                    continue
                errors.append(exc)
                continue
            self.recorder.event(pod, "Warning", "NodeNotReady", "Node is not ready")
        if errors:
            raise errors[0]
