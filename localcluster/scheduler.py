"""A small default-scheduler: filters as kube-scheduler's default plugins, spreads by pod count.

Filters (each named by the plugin whose message it reproduces, so "0/3 nodes are available: ..."
reads as the real one):
- NodeUnschedulable: `spec.unschedulable` -> "node(s) were unschedulable".
- Not Ready: a real cluster marks such a node with the `node.kubernetes.io/not-ready` taint (node
  lifecycle controller) and the scheduler filters on the taint; here the Ready condition is read
  directly and reported as that taint, unless the pod tolerates it.
- TaintToleration: NoSchedule / NoExecute taints the pod does not tolerate ->
  "node(s) had untolerated taint {key: value}".
- NodeAffinity: `nodeSelector` and required node affinity (`nodeSelectorTerms`, matchExpressions
  In/NotIn/Exists/DoesNotExist/Gt/Lt and matchFields on metadata.name) ->
  "node(s) didn't match Pod's node affinity/selector".
- NodeResourcesFit, pods only: `status.allocatable.pods` -> "Too many pods".

Scoring is "fewest pods first". Nodes sit in a heap keyed by pod count with lazy invalidation, so
a pod that fits the emptiest node costs O(log n) and 150,000 pods over 5,000 nodes need no scan
per pod; only a pod that fits nowhere walks every node (to explain why).

Pods with `spec.schedulingGates` are not tried (PodScheduled=False, reason SchedulingGated) until
their gates are removed. Event-driven from the storage watch hub: a pending pod is tried when it appears; pods that fit
nowhere wait in an unschedulable set and are retried when a node's scheduling-relevant state
changes (labels, taints, unschedulable, Ready, allocatable) or a bound pod goes away, as the
scheduling queue's move requests do. Binding goes through `ObjectAPI.bind`, the code behind the
`pods/binding` subresource.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel

from kubeutil.nodeaffinity import pod_matches_node
from kubeutil.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    TAINT_NODE_NOT_READY,
    TAINT_NODE_UNSCHEDULABLE,
    find_matching_untolerated_taint,
    tolerations_tolerate_taint,
)
from localcluster import errors, podstate
from localcluster.keyed import Worker
from localcluster.objects import ObjectAPI
from localcluster.recorder import NewEventRecorder
from localcluster.storage import StoredEvent

Obj = dict[str, Any]
SCHEDULER_NAME = "default-scheduler"
NOT_READY_TAINT = {"key": TAINT_NODE_NOT_READY, "effect": NO_SCHEDULE, "value": ""}
UNSCHEDULABLE_TAINT = {"key": TAINT_NODE_UNSCHEDULABLE, "effect": NO_SCHEDULE}
FILTERED_EFFECTS = (NO_SCHEDULE, NO_EXECUTE)


@dataclass(slots=True)
class NodeInfo:
    """What filtering reads from a node, parsed once per node change."""

    name: str
    labels: dict[str, str]
    taints: list[Obj]
    unschedulable: bool
    ready: bool
    capacity: int
    #: The node as node affinity reads it: its name and labels.
    selectable: Obj

    def signature(self) -> tuple[Any, ...]:
        return (
            tuple(sorted(self.labels.items())),
            repr(self.taints),
            self.unschedulable,
            self.ready,
            self.capacity,
        )

    @staticmethod
    def from_node(node: Obj) -> NodeInfo:
        meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        try:
            capacity = int((status.get("allocatable") or {}).get("pods", 110))
        except (TypeError, ValueError):
            capacity = 110
        labels = dict(meta.get("labels") or {})
        return NodeInfo(
            meta["name"],
            labels,
            list(spec.get("taints") or []),
            bool(spec.get("unschedulable")),
            ready,
            capacity,
            {"metadata": {"name": meta["name"], "labels": labels}},
        )


def filter_reason(spec: Obj, node: NodeInfo) -> str | None:
    """The first filter plugin's message that refuses `node` to a pod with `spec`, resources aside.

    Tolerations and node affinity are `kubeutil`'s, the same ones the taint-eviction and
    node-maintenance controllers use, so a pod placed here is judged the same way there.
    """
    tolerations = spec.get("tolerations") or []
    if node.unschedulable and not tolerations_tolerate_taint(tolerations, UNSCHEDULABLE_TAINT):
        return "node(s) were unschedulable"
    if not node.ready and not tolerations_tolerate_taint(tolerations, NOT_READY_TAINT):
        return "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    taint = find_matching_untolerated_taint(node.taints, tolerations, FILTERED_EFFECTS)
    if taint is not None:
        return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"
    if not pod_matches_node(spec, node.selectable):
        return "node(s) didn't match Pod's node affinity/selector"
    return None


class Scheduler:
    """Binds pending pods of `default-scheduler` to nodes; see the module doc."""

    def __init__(self, objects: ObjectAPI, *, events: bool = True) -> None:
        self.objects = objects
        #: `Scheduled` and `FailedScheduling` events, as kube-scheduler records them (None: not recorded).
        self.events = NewEventRecorder(objects, SCHEDULER_NAME) if events else None
        self._pod_rt = objects.registry.require("", "v1", "pods")
        self._nodes: dict[str, NodeInfo] = {}
        self._counts: Counter[str] = Counter()
        self._placed: dict[str, str] = {}  # pod uid -> node, for non-terminal bound pods
        self._heap: list[tuple[int, str]] = []
        self._active: dict[str, tuple[str, str]] = {}  # pod uid -> (namespace, name), insertion ordered
        self._unschedulable: dict[str, tuple[str, str]] = {}
        self._gated: set[str] = set()  # pods with spec.schedulingGates: not tried until the gates are gone
        self._worker = Worker(lambda: bool(self._active), self._schedule_next)
        self.bound = 0

    # -- cache ----------------------------------------------------------------------------
    def _set_node(self, node: Obj) -> None:
        info = NodeInfo.from_node(node)
        old = self._nodes.get(info.name)
        self._nodes[info.name] = info
        heapq.heappush(self._heap, (self._counts[info.name], info.name))
        if old is None or old.signature() != info.signature():
            self._retry_unschedulable()

    def _remove_node(self, name: str) -> None:
        self._nodes.pop(name, None)

    def _observe_pod(self, ev_type: str, pod: Obj) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid = meta["uid"]
        phase = (pod.get("status") or {}).get("phase")
        node = spec.get("nodeName")
        if ev_type == "DELETED" or (node and phase in ("Succeeded", "Failed")):
            self._active.pop(uid, None)
            self._unschedulable.pop(uid, None)
            self._gated.discard(uid)
            if self._forget(uid):
                self._retry_unschedulable()
            return
        if node:
            self._active.pop(uid, None)
            self._unschedulable.pop(uid, None)
            if uid not in self._placed:
                self._assume(uid, node)
            return
        if spec.get("schedulerName", SCHEDULER_NAME) != SCHEDULER_NAME or meta.get("deletionTimestamp"):
            return
        if spec.get("schedulingGates"):
            if uid not in self._gated:
                self._gated.add(uid)
                self._active.pop(uid, None)
                self._unschedulable.pop(uid, None)
                self._mark_gated(pod)
            return
        self._gated.discard(uid)
        if uid not in self._unschedulable and uid not in self._active:
            self._active[uid] = (meta["namespace"], meta["name"])
            self._worker.wake()

    def _assume(self, uid: str, node: str) -> None:
        self._placed[uid] = node
        self._counts[node] += 1
        heapq.heappush(self._heap, (self._counts[node], node))

    def _forget(self, uid: str) -> bool:
        node = self._placed.pop(uid, None)
        if node is None:
            return False
        self._counts[node] -= 1
        heapq.heappush(self._heap, (self._counts[node], node))
        return True

    def _retry_unschedulable(self) -> None:
        if self._unschedulable:
            self._active.update(self._unschedulable)
            self._unschedulable.clear()
            self._worker.wake()

    # -- scheduling ---------------------------------------------------------------------
    def _reasons(self, spec: Obj, node: NodeInfo) -> str | None:
        """Why `node` cannot take the pod (the real plugin's message), or None if it fits."""
        why = filter_reason(spec, node)
        if why is None and self._counts[node.name] >= node.capacity:
            return "Too many pods"
        return why

    def pick(self, spec: Obj) -> tuple[str | None, Counter[str]]:
        """The feasible node with the fewest pods (ties by name), or None with the reasons per node."""
        popped: list[tuple[int, str]] = []
        reasons: Counter[str] = Counter()
        seen: set[str] = set()
        chosen: str | None = None
        heap = self._heap
        while heap:
            count, name = heapq.heappop(heap)
            node = self._nodes.get(name)
            if node is None or count != self._counts[name] or name in seen:
                continue  # stale entry
            seen.add(name)
            popped.append((count, name))
            why = self._reasons(spec, node)
            if why is None:
                chosen = name
                break
            reasons[why] += 1
        for item in popped:
            heapq.heappush(heap, item)
        if len(heap) > 4 * max(len(self._nodes), 64):
            self._heap = [(self._counts[n], n) for n in self._nodes]
            heapq.heapify(self._heap)
        return chosen, reasons

    def schedule_one(self, uid: str, namespace: str, name: str) -> None:
        entry = self.objects.storage.get("pods", namespace, name)
        if entry is None:
            return
        pod = entry.load()
        meta, spec = pod["metadata"], pod.get("spec") or {}
        if meta["uid"] != uid or spec.get("nodeName") or meta.get("deletionTimestamp"):
            return
        node, reasons = self.pick(spec)
        if node is None:
            self._unschedulable[uid] = (namespace, name)
            self._mark_unschedulable(pod, reasons)
            return
        try:
            self.objects.bind(
                self._pod_rt, namespace, name, {"target": {"name": node}, "metadata": {"uid": uid}}
            )
        except errors.StatusError:
            return
        self.bound += 1
        self._assume(uid, node)
        if self.events is not None:
            self.events.eventf(
                pod, "Normal", "Scheduled", "Binding", f"Successfully assigned {namespace}/{name} to {node}"
            )

    def _mark_unschedulable(self, pod: Obj, reasons: Counter[str]) -> None:
        total = len(self._nodes)
        detail = ", ".join(sorted(f"{n} {why}" for why, n in reasons.items()))  # as FitError.Error sorts them
        message = f"0/{total} nodes are available: {detail}." if detail else f"0/{total} nodes are available."
        message += (
            f" preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
        )
        self._set_scheduled_false(pod, "Unschedulable", message)

    def _mark_gated(self, pod: Obj) -> None:
        """What the scheduler's PreEnqueue (SchedulingGates plugin) reports for a gated pod."""
        self._set_scheduled_false(
            pod, "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates"
        )

    def _set_scheduled_false(self, pod: Obj, reason: str, message: str) -> None:
        status = pod.setdefault("status", {})
        conditions = status.setdefault("conditions", [])
        current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if current is not None and current.get("status") == "False" and current.get("message") == message:
            return
        podstate.put_condition(status, "PodScheduled", "False", reason=reason, message=message)
        if reason == "Unschedulable" and self.events is not None:  # once per new reason, not per retry
            self.events.eventf(pod, "Warning", "FailedScheduling", "Scheduling", message)
        meta = pod["metadata"]
        try:
            self.objects.update_status(self._pod_rt, meta["namespace"], meta["name"], pod)
        except errors.StatusError:
            pass

    # -- tasks ----------------------------------------------------------------------------
    async def run(self) -> None:
        """Watch nodes and pods and schedule until cancelled (in the cluster's task group)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch, "nodes")
            tg.start_soon(self._watch, "pods")
            tg.start_soon(self._worker.run)

    async def _watch(self, key: str) -> None:
        storage = self.objects.storage
        while True:  # start over when a fault closes every subscription
            with storage.subscribe(key) as sub:
                seen: set[str] = set()
                for entry in list(storage.iter_entries(key)):
                    obj = entry.load()
                    seen.add(obj["metadata"]["name"] if key == "nodes" else obj["metadata"]["uid"])
                    self._on_event(
                        StoredEvent(
                            "ADDED", entry.rv, obj, entry.raw, entry.namespace, entry.labels, entry.fields
                        ),
                        key,
                    )
                self._forget_unseen(key, seen)  # deleted while our watch was down (a dropped-watches fault)
                while not sub.closed:
                    await sub.wait()
                    for ev in sub.drain():
                        self._on_event(ev, key)
            await anyio.lowlevel.checkpoint()

    def _forget_unseen(self, key: str, seen: set[str]) -> None:
        if key == "nodes":
            for name in [n for n in self._nodes if n not in seen]:
                self._remove_node(name)
            return
        for uid in [u for u in self._placed if u not in seen]:
            self._forget(uid)
        for pending in (self._active, self._unschedulable):
            for uid in [u for u in pending if u not in seen]:
                del pending[uid]
        self._gated &= seen

    def _on_event(self, ev: StoredEvent, key: str) -> None:
        if key == "nodes":
            if ev.type == "DELETED":
                self._remove_node(ev.obj["metadata"]["name"])
            else:
                self._set_node(ev.obj)
        else:
            self._observe_pod(ev.type, ev.obj)

    def _schedule_next(self) -> None:
        """The pod queued longest first (the active queue keeps insertion order)."""
        uid = next(iter(self._active))
        namespace, name = self._active.pop(uid)
        self.schedule_one(uid, namespace, name)
