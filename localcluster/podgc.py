"""The pod garbage collector's orphan sweep, as KCM's `podgc` runs it (`gcOrphaned`).

A pod bound to a node that does not exist is deleted once the node has stayed absent for a
quarantine (40 s in KCM, so a node deleted and registered again in between keeps its pods): it
is first marked Failed with the `DisruptionTarget` condition (reason `DeletionByPodGC`), as
KCM since 1.26 does, then deleted with grace 0. Event-driven: a node's deletion, or a pod bound
to a node that is not there, starts the node's quarantine; nothing polls.
"""

from __future__ import annotations

from localcluster import errors, podstate
from localcluster.keyed import KeyedLoop
from localcluster.objects import ObjectAPI
from localcluster.registry import Obj, ResourceType
from localcluster.storage import StoredEvent

#: KCM's `quarantineTime`.
QUARANTINE_SECONDS = 40.0


class PodGC:
    def __init__(self, objects: ObjectAPI, *, quarantine: float = QUARANTINE_SECONDS) -> None:
        self.objects = objects
        self.quarantine = quarantine
        self._pod_rt: ResourceType = objects.registry.require("", "v1", "pods")
        self._waiting: set[str] = set()
        self.loop: KeyedLoop[str] = KeyedLoop(self.sync)
        self.deleted = 0
        #: Quarantines that ran out (each looked for the node once more).
        self.swept = 0

    async def run(self) -> None:
        await self.loop.watch_and_run(
            self.objects.storage, [("nodes", self._on_node), ("pods", self._on_pod)]
        )

    def _quarantine(self, node: str) -> None:
        if node not in self._waiting:
            self._waiting.add(node)
            self.loop.add_after(node, self.quarantine)

    def _on_node(self, ev: StoredEvent) -> None:
        if ev.type == "DELETED":
            self._quarantine(ev.obj["metadata"]["name"])

    def _on_pod(self, ev: StoredEvent) -> None:
        node = ev.fields.get("spec.nodeName")
        if ev.type != "DELETED" and node and self.objects.storage.get("nodes", "", node) is None:
            self._quarantine(node)

    def sync(self, node: str) -> float | None:
        self._waiting.discard(node)
        self.swept += 1
        storage = self.objects.storage
        if storage.get("nodes", "", node) is not None:
            return None
        for entry in list(storage.iter_entries("pods")):
            if entry.fields.get("spec.nodeName") != node:
                continue
            pod = entry.load()
            try:
                self._mark_failed(pod)
                meta = pod["metadata"]
                self.objects.delete(
                    self._pod_rt,
                    meta["namespace"],
                    meta["name"],
                    grace_period_seconds=0,
                    preconditions={"uid": meta["uid"]},
                )
                self.deleted += 1
            except errors.StatusError:
                continue  # gone meanwhile, or refused: the next quarantine looks again
        return None

    def _mark_failed(self, pod: Obj) -> None:
        """`markFailedAndDeletePodWithCondition`: a terminal phase and why, before the delete."""
        status = pod.setdefault("status", {})
        if status.get("phase") in ("Succeeded", "Failed"):
            return
        status["phase"] = "Failed"
        podstate.put_condition(
            status,
            "DisruptionTarget",
            "True",
            reason="DeletionByPodGC",
            message="PodGC: node no longer exists",
        )
        meta = pod["metadata"]
        self.objects.update_status(self._pod_rt, meta["namespace"], meta["name"], pod)
