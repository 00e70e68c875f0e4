"""The namespace controller: empties a terminating namespace, then lets it go.

A DELETE of a namespace only marks it (`deletionTimestamp`, `status.phase: Terminating`, see
`ObjectAPI._delete_namespace`); as KCM's namespace controller
(`pkg/controller/namespace/deletion/namespaced_resources_deleter.go`) this actor then deletes
every namespaced object in it (background propagation, each kind's own graceful deletion: pods
on a node wait for their kubelet) and, once nothing is left, removes the `kubernetes` finalizer
through `namespaces/<name>/finalize`, which deletes the namespace. While content remains it
re-checks on every change and at a short interval (graceful pod deletion finishes without a
namespace event), as the real controller requeues with its estimate.

It runs in the cluster's task group and writes through `ObjectAPI`, as the other actors do.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel

from localcluster import errors
from localcluster.objects import ObjectAPI
from localcluster.registry import Obj, ResourceType
from localcluster.storage import StoredEvent

FINALIZER = "kubernetes"
#: Seconds between re-checks of a namespace whose content is still going away.
RECHECK_INTERVAL = 0.1


def _terminating(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp")) and FINALIZER in (
        (obj.get("spec") or {}).get("finalizers") or []
    )


class NamespaceController:
    def __init__(self, objects: ObjectAPI) -> None:
        self.objects = objects
        self.registry = objects.registry
        self._pending: set[str] = set()
        self._wake = anyio.Event()

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch)
            await self._work()

    async def _watch(self) -> None:
        storage = self.objects.storage
        while True:
            with storage.subscribe("namespaces") as sub:
                for entry in list(storage.iter_entries("namespaces")):
                    self._observe(entry.load())
                while not sub.closed:
                    await sub.wait()
                    for ev in sub.drain():
                        self._on_event(ev)
            await anyio.lowlevel.checkpoint()  # a dropped-watches fault: subscribe again

    def _on_event(self, ev: StoredEvent) -> None:
        if ev.type != "DELETED":
            self._observe(ev.obj)

    def _observe(self, obj: Obj) -> None:
        if _terminating(obj):
            self._pending.add(obj["metadata"]["name"])
            self._wake.set()

    async def _work(self) -> None:
        while True:
            if not self._pending:
                await self._wake.wait()
                self._wake = anyio.Event()
            for name in sorted(self._pending):
                if self._sync(name):
                    self._pending.discard(name)
                await anyio.lowlevel.checkpoint()
            if self._pending:
                with anyio.move_on_after(RECHECK_INTERVAL):
                    await self._wake.wait()
                self._wake = anyio.Event()

    def _namespaced_types(self) -> list[ResourceType]:
        """One served version per stored resource (objects are shared across versions)."""
        seen: dict[str, ResourceType] = {}
        for rt in self.registry.all():
            if rt.namespaced and rt.storage_key not in seen:
                seen[rt.storage_key] = rt
        return list(seen.values())

    def _sync(self, name: str) -> bool:
        """Delete what the namespace holds; finalize it once empty. True when nothing is left to do."""
        storage = self.objects.storage
        entry = storage.get("namespaces", "", name)
        if entry is None:
            return True
        ns = entry.load()
        if not _terminating(ns):
            return True
        remaining = 0
        for rt in self._namespaced_types():
            for item in list(storage.iter_entries(rt.storage_key, name)):
                if b'"deletionTimestamp"' not in item.raw:
                    try:
                        self.objects.delete(rt, name, item.name, propagation_policy="Background")
                    except errors.StatusError as exc:
                        if exc.code not in (404, 409):
                            raise
                if storage.get(rt.storage_key, name, item.name) is not None:
                    remaining += 1
        if remaining:
            return False
        ns_type = self.registry.require("", "v1", "namespaces")
        spec = ns.setdefault("spec", {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != FINALIZER]
        try:
            self.objects.update(ns_type, None, name, ns, subresource="finalize")
        except errors.StatusError as exc:
            if exc.code == 409:
                return False  # changed meanwhile: try again
            if exc.code != 404:
                raise
        return True
