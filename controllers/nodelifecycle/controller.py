"""The node lifecycle controller's wiring, as `pkg/controller/nodelifecycle/node_lifecycle_controller.go`.

Two queues served by the worker engine and two periodic loops, each reconciled by its own module:

- the node queue (the base class's, one worker): each node add/update/delete is a NoSchedule
  tainting pass and a beta-label reconcile (`noschedulesync.NoScheduleTaintSync`);
- the health monitor, every `node_monitor_period` (`healthsync.NodeHealthSync`): heartbeats,
  Unknown conditions, NoExecute taints queued per zone, zone states and rates;
- the NoExecute tainting pass, every 100 ms (`noexecutesync.NoExecuteTaintSync`): each zone's
  queue hands out nodes at its rate;
- the pod queue: a pod that appears on (is bound to) a node known not Ready is marked not ready
  too (`podsync.PodSync`).

The loops share each node's health and each zone's tainter (`state`) and write through
`writes.NodeWrites`. The taint-eviction controller does the pod deletions; this one only taints.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from anyio.abc import TaskGroup

from apiclient.resources import LEASES, NODES, PODS
from controllers.base import Controller
from controllers.context import ControllerContext
from controllers.nodelifecycle.config import NodeLifecycleConfig
from controllers.nodelifecycle.healthsync import NODE_LEASE_NAMESPACE, NodeHealthSync
from controllers.nodelifecycle.noexecutesync import NO_EXECUTE_TAINTING_PERIOD, NoExecuteTaintSync
from controllers.nodelifecycle.noschedulesync import NoScheduleTaintSync
from controllers.nodelifecycle.podsync import PodSync
from controllers.nodelifecycle.state import NodeLifecycleState
from controllers.nodelifecycle.writes import NodeWrites
from informers import ResourceEventHandler, deleted_object, meta_key
from workqueue import RateLimitingQueue

Obj = dict[str, Any]


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _node_name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


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
        self.monitor_period = config.node_monitor_period
        self.pod_queue: RateLimitingQueue[str] = RateLimitingQueue(name=POD_QUEUE_NAME)
        self.node_informer = ctx.informers.informer(NODES)
        self.pod_informer = ctx.informers.informer(PODS)
        # Leases are read only by the monitor pass, every `monitor_period`; a renewal may wait a
        # fraction of that in the socket, so 500 renewals a second (5,000 nodes) cost a read
        # and a wake-up per batch instead of per renewal.
        self.lease_informer = ctx.informers.informer(
            LEASES, namespace=NODE_LEASE_NAMESPACE, read_interval=self.monitor_period / 20
        )
        self.node_lister = self.node_informer.lister
        self.pod_lister = self.pod_informer.lister
        self.lease_lister = self.lease_informer.lister
        self.state = NodeLifecycleState()
        writes = NodeWrites(client=ctx.client, node_lister=self.node_lister, recorder=self.recorder)
        self.no_schedule_sync = NoScheduleTaintSync(node_lister=self.node_lister, writes=writes)
        self.health_sync = NodeHealthSync(
            client=ctx.client,
            node_lister=self.node_lister,
            pod_lister=self.pod_lister,
            lease_lister=self.lease_lister,
            state=self.state,
            writes=writes,
            recorder=self.recorder,
            config=config,
            now=now or anyio.current_time,
            log=self.log,
        )
        self.no_execute_sync = NoExecuteTaintSync(
            node_lister=self.node_lister, state=self.state, writes=writes, log=self.log
        )
        self.pod_sync = PodSync(pod_lister=self.pod_lister, state=self.state, writes=writes)
        self.pod_worker = self.make_worker(self.pod_sync.sync)
        self.serve_also(self.pod_queue, self.pod_worker)  # one pod worker beside the node queue's
        self.node_informer.add_event_handler(
            ResourceEventHandler(
                on_add=lambda node: self.enqueue(_name(node)),
                on_update=lambda old, new: self.enqueue(_name(new)),
                on_delete=self._node_deleted,
            )
        )
        self.pod_informer.add_event_handler(
            ResourceEventHandler(on_add=self._pod_added, on_update=self._pod_updated)
        )

    def make_queue(self) -> RateLimitingQueue[str]:
        return RateLimitingQueue(name=NODE_QUEUE_NAME)

    # -- handlers --------------------------------------------------------------------------

    def _node_deleted(self, obj: Any) -> None:
        node = deleted_object(obj)
        if node is not None:
            self.enqueue(_name(node))

    def _pod_added(self, pod: Obj) -> None:
        if _node_name(pod):
            self.pod_queue.add(meta_key(pod))

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        """`podUpdated`: only a pod newly bound to a node (or moved) needs a look."""
        node_name = _node_name(new)
        if node_name and node_name != _node_name(old):
            self.pod_queue.add(meta_key(new))

    # -- work ------------------------------------------------------------------------------

    def start_loops(self, tg: TaskGroup) -> None:
        tg.start_soon(
            functools.partial(
                self.every, self.monitor_period, self.health_sync.sync, what="monitoring node health"
            )
        )
        tg.start_soon(
            functools.partial(
                self.every,
                NO_EXECUTE_TAINTING_PERIOD,
                self.no_execute_sync.sync,
                what="NoExecute tainting pass",
            )
        )

    async def sync(self, key: str) -> None:
        await self.no_schedule_sync.sync(key)
