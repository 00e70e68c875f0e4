"""The NoExecute taint manager's wiring, as `pkg/controller/tainteviction/taint_eviction.go`.

Node and pod informer events become small items `(kind, node, namespace, name)` hashed by node
name onto the shards of a `ShardedQueue` (8 by default, one worker each), reconciled by
`schedulesync.ScheduleSync`: it judges each pod against its node's NoExecute taints and keeps
the pod's deletion scheduled, kept or cancelled (`state.EvictionSchedule`). Work is cancelled
when the node loses its NoExecute taints (or is added again without them), the pod is deleted,
or its tolerations become infinite; a node's deletion alone cancels nothing, as in KCM.

Deletions run from a `TimedWorkerQueue` (one heap, a few worker tasks) served by the
controller's own worker, so `sync(key)` is the deletion of one pod (`evictionsync.EvictionSync`);
when the engine's retries run out the schedule is forgotten, so the next update of the pod or
its node judges it afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anyio.abc import TaskGroup

from apiclient.resources import NODES, PODS
from controllers.base import Controller
from controllers.common.pods import node_name as pod_node
from controllers.context import ControllerContext
from controllers.tainteviction.evictionsync import EvictionSync
from controllers.tainteviction.schedulesync import NODE_ITEM, POD_ITEM, Item, ScheduleSync, describe
from controllers.tainteviction.state import EvictionSchedule
from controllers.worker import Worker
from informers import ResourceEventHandler, deleted_object
from kubeutil.meta import object_meta
from kubeutil.taints import NO_EXECUTE, node_taints, pod_tolerations, taints_with_effect
from workqueue import ShardedQueue, TimedWorkerQueue

Obj = dict[str, Any]


class TaintEvictionController(Controller):
    """KCM's `taint-eviction-controller`; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, name: str, workers: int) -> None:
        super().__init__(ctx, name=name, workers=workers)
        self.node_informer = ctx.informers.informer(NODES)
        self.pod_informer = ctx.informers.informer(PODS)
        self.node_lister = self.node_informer.lister
        self.pod_lister = self.pod_informer.lister
        # A deletion that keeps failing is retried with backoff, then dropped until the pod is judged again.
        self.worker = self.make_worker(self.sync, on_drop=lambda key: self.schedule.forget(key))
        self.evictions: TimedWorkerQueue[str] = self.worker.timed_queue(name=self.name + "-evictions")
        self.schedule = EvictionSchedule(self.evictions, self.recorder)
        self.eviction_sync = EvictionSync(
            client=ctx.client, pod_lister=self.pod_lister, schedule=self.schedule, recorder=self.recorder
        )
        self.schedule_sync = ScheduleSync(
            node_lister=self.node_lister, pod_lister=self.pod_lister, schedule=self.schedule
        )
        # One update shard per worker, as Go's taint manager runs UpdateWorkerSize of them.
        self.updates: ShardedQueue[Item] = ShardedQueue(
            self.workers,
            shard_key=lambda item: item[1],
            priority=lambda item: item[0],
            name=self.name + "-updates",
        )
        self.update_worker: Worker[Item] = self.make_worker(self.schedule_sync.sync, describe=describe)
        self.node_informer.add_event_handler(
            ResourceEventHandler(
                on_add=self._node_added, on_update=self._node_updated, on_delete=self._node_deleted
            )
        )
        self.pod_informer.add_event_handler(
            ResourceEventHandler(
                on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted
            )
        )

    # -- event handlers: only enqueue ---------------------------------------------------

    def _node_added(self, node: Obj) -> None:
        # Every node, tainted or not, as KCM's `NodeUpdated(nil, node)`: a node recreated without
        # taints cancels the deletions its pods still had scheduled.
        self.updates.add((NODE_ITEM, str(object_meta(node).get("name")), "", ""))

    def _node_updated(self, old: Obj, new: Obj) -> None:
        if taints_with_effect(node_taints(old), NO_EXECUTE) == taints_with_effect(
            node_taints(new), NO_EXECUTE
        ):
            return
        self.updates.add((NODE_ITEM, str(object_meta(new).get("name")), "", ""))

    def _node_deleted(self, obj: Any) -> None:
        node = deleted_object(obj)
        if node is not None:
            self.updates.add((NODE_ITEM, str(object_meta(node).get("name")), "", ""))

    def _enqueue_pod(self, pod: Mapping[str, Any], node: str) -> None:
        meta = object_meta(pod)
        self.updates.add((POD_ITEM, node, str(meta.get("namespace", "")), str(meta.get("name", ""))))

    def _pod_added(self, pod: Obj) -> None:
        node = pod_node(pod)
        if node:
            self._enqueue_pod(pod, node)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        old_node, new_node = pod_node(old), pod_node(new)
        if old_node == new_node and pod_tolerations(old) == pod_tolerations(new):
            return
        if old_node and old_node != new_node:
            self._enqueue_pod(old, old_node)  # cancels work scheduled while it was on the old node
        if new_node:
            self._enqueue_pod(new, new_node)

    def _pod_deleted(self, obj: Any) -> None:
        pod = deleted_object(obj)
        if pod is not None:
            self._enqueue_pod(pod, pod_node(pod))

    # -- work ----------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        await self.eviction_sync.sync(key)

    def stop(self) -> None:
        super().stop()
        self.updates.shutdown()
        self.evictions.shutdown()

    def healthy(self) -> bool:
        return not self.updates.shutting_down

    def start_workers(self, tg: TaskGroup, workers: int) -> None:
        """One worker per shard, and the deletion timer (whose deletions finish on `stop()`)."""
        tg.start_soon(self.update_worker.run_shards, self.updates)
        tg.start_soon(self.evictions.run)
