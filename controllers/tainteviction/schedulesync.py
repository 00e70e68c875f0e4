"""The taint reconcile: keep each pod's scheduled deletion in step with its node's NoExecute taints.

Items are `(kind, node, namespace, name)`, hashed by node name onto the update shards; node items
sort before pod items inside a shard, so a node's taint change is recorded before the pods on it
are judged, and all work about one node is serialized without locks. A node item refreshes
`tainted[node]` and re-judges every pod on the node; a pod item re-judges one pod, from the
lister (the event's object is never trusted).

Judging a pod is synchronous and cheap: no matching toleration for some taint -> delete now; a
used toleration with `tolerationSeconds <= 0` -> now; none of the used tolerations carry seconds
-> never (cancel); otherwise schedule for the smallest. An existing schedule is kept as it is
(Go returns early when work exists and time has passed since it was made), so later updates
never postpone it.

One deviation, on purpose: a pod whose deletion is already due is not deleted again each time it
is judged (Go cancels and re-adds immediate work, so every node or pod update re-sends DELETE).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from controllers.common.pods import node_name as pod_node
from controllers.tainteviction.state import EvictionSchedule
from informers import NODE_NAME_INDEX, Lister
from kubeutil.meta import object_meta
from kubeutil.taints import (
    NO_EXECUTE,
    Taint,
    get_matching_tolerations,
    min_toleration_seconds,
    node_taints,
    pod_tolerations,
    taints_with_effect,
)

NODE_ITEM = 0
POD_ITEM = 1
# (kind, node name, namespace, pod name); node items carry "" for the last two.
Item = tuple[int, str, str, str]


def describe(item: Item) -> str:
    """An item as the worker's log lines name it."""
    kind, node, namespace, name = item
    return f"node/{node}" if kind == NODE_ITEM else f"{namespace}/{name}@{node}"


class ScheduleSync:
    """Judges nodes and pods against the NoExecute taints; `tainted` is each node's, as last seen."""

    def __init__(self, *, node_lister: Lister, pod_lister: Lister, schedule: EvictionSchedule) -> None:
        self.node_lister = node_lister
        self.pod_lister = pod_lister
        self.schedule = schedule
        self.tainted: dict[str, list[Taint]] = {}

    async def sync(self, item: Item) -> None:
        self.handle(item)

    def handle(self, item: Item) -> None:
        kind, node, namespace, name = item
        if kind == NODE_ITEM:
            self.handle_node_update(node)
        else:
            self.handle_pod_update(namespace, name, node)

    def handle_node_update(self, node_name: str) -> None:
        """`handleNodeUpdate`: record the node's NoExecute taints, then judge every pod on it."""
        node = self.node_lister.get(node_name)
        if node is None:
            # Deleted: forget its taints; deletions already scheduled stand, as in KCM.
            self.tainted.pop(node_name, None)
            return
        taints = taints_with_effect(node_taints(node), NO_EXECUTE)
        if taints:
            self.tainted[node_name] = taints
        else:
            self.tainted.pop(node_name, None)
        pods = self.pod_lister.by_index(NODE_NAME_INDEX, node_name)
        if not pods:
            return
        if not taints:
            for pod in pods:
                self.schedule.cancel_key(pod_key(pod))
            return
        now = anyio.current_time()
        for pod in pods:
            self.process_pod_on_node(pod, taints, now)

    def handle_pod_update(self, namespace: str, name: str, node_name: str) -> None:
        """`handlePodUpdate`: a deleted pod's deletion is cancelled; a pod on a tainted node is judged."""
        key = f"{namespace}/{name}"
        pod = self.pod_lister.get(name, namespace)
        if pod is None:
            self.schedule.cancel_key(key)
            return
        current_node = pod_node(pod)
        if current_node != node_name or not current_node:
            return  # the item for the pod's current node (another shard) decides
        taints = self.tainted.get(node_name)
        if not taints:
            return  # untainted (or deleted) node: cancelling, if needed, was the node item's job
        self.process_pod_on_node(pod, taints, anyio.current_time())

    def process_pod_on_node(self, pod: Mapping[str, Any], taints: Sequence[Taint], now: float) -> None:
        """`processPodOnNode`: schedule, keep or cancel one pod's deletion; see the module docstring."""
        key = pod_key(pod)
        uid = str(object_meta(pod).get("uid", ""))
        if self.schedule.due_uid.get(key, uid) != uid:
            self.schedule.cancel_key(key, event=False)  # the schedule belonged to an earlier pod of that name
        all_tolerated, used = get_matching_tolerations(taints, pod_tolerations(pod))
        if not all_tolerated:
            due = self.schedule.due_at.get(key)
            if due is not None and due <= now:
                return  # already due (or deleted): deleting it again would only add load
            self.schedule.cancel_key(key)  # a later deletion gives way to this one, with KCM's event
            self.schedule.add(key, now, now, uid)
            return
        seconds = min_toleration_seconds(used)
        if seconds < 0:
            self.schedule.cancel_key(key)  # tolerated forever
            return
        if key in self.schedule.due_at:
            # Scheduled (or fired) already: the original start stands, so it is never postponed.
            # Go keeps it when `createdAt + seconds` is before `now + seconds`, i.e. whenever any
            # time passed since; it would reschedule only at the very instant it scheduled.
            return
        self.schedule.add(key, now, now + seconds, uid)


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = object_meta(pod)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
