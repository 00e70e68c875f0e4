"""The garbage collector: ownerReferences honoured as KCM's garbage collector honours them.

Follows `pkg/controller/garbagecollector/garbagecollector.go`:
- A dependent whose owners are all gone (or whose owner references name a uid that no longer
  exists) is deleted, in the background unless it carries the `orphan` / `foregroundDeletion`
  finalizer itself. References to absent owners are removed when other owners remain
  ("solid" owners keep the dependent alive).
- Foreground: an owner with a deletionTimestamp and the `foregroundDeletion` finalizer has its
  dependents deleted (a dependent with dependents of its own is deleted in the foreground too);
  the finalizer is removed once no dependent with `blockOwnerDeletion: true` remains, and then
  the owner goes.
- Orphan: an owner with a deletionTimestamp and the `orphan` finalizer has its references removed
  from every dependent, then the finalizer is removed.

Why an in-memory graph and not HTTP informers: the collector runs inside the local server, so it
subscribes to the storage watch hub of every resource type (CRDs included, as they appear) and
keeps only the edges: owner uid -> dependents, and per dependent its owner references. Work is
keyed and de-duplicated (`_dirty`), processed by one task; every write goes through `ObjectAPI`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from localcluster import errors
from localcluster.keyed import Worker
from localcluster.objects import FOREGROUND, ORPHAN, ObjectAPI
from localcluster.registry import ResourceType
from localcluster.storage import StoredEvent

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Ref:
    """An object's identity in the graph."""

    storage_key: str
    namespace: str
    name: str
    uid: str


class GarbageCollector:
    def __init__(self, objects: ObjectAPI) -> None:
        self.objects = objects
        self.registry = objects.registry
        self._owners_of: dict[str, tuple[Ref, list[Obj]]] = {}  # dependent uid -> (ref, ownerReferences)
        self._dependents: dict[str, set[str]] = {}  # owner uid -> dependent uids
        self._dirty: dict[tuple[str, str], Ref] = {}  # ("dependent"|"owner", uid) -> ref
        self._worker = Worker(lambda: bool(self._dirty), self._work_one)
        self._watched: set[str] = set()
        self._tg: TaskGroup | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self.deleted = 0

    # -- lifecycle ------------------------------------------------------------------------
    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            for rt in self.registry.all():
                self._watch_type(rt)
            self._unsubscribe = self.registry.subscribe(self._on_registry)
            try:
                await self._worker.run()
            finally:
                self._unsubscribe()

    def _on_registry(self, event: str, rt: ResourceType) -> None:
        if event == "added":
            self._watch_type(rt)

    def _watch_type(self, rt: ResourceType) -> None:
        if rt.storage_key in self._watched or self._tg is None:
            return
        self._watched.add(rt.storage_key)
        self._tg.start_soon(self._watch, rt.storage_key)

    async def _watch(self, key: str) -> None:
        storage = self.objects.storage
        relist = False
        while True:
            with storage.subscribe(key) as sub:
                for entry in list(storage.iter_entries(key)):
                    obj = entry.load()
                    self._observe(key, "ADDED", obj)
                    uid = obj["metadata"].get("uid", "")
                    if relist and uid in self._owners_of:
                        # an owner may have gone while the watch was down (a dropped-watches fault)
                        self._mark("dependent", self._owners_of[uid][0])
                while not sub.closed:
                    await sub.wait()
                    for ev in sub.drain():
                        self._on_event(key, ev)
            if key not in {rt.storage_key for rt in self.registry.all()}:
                self._watched.discard(key)
                return  # the resource went away (a deleted CRD)
            relist = True
            await anyio.lowlevel.checkpoint()

    def _on_event(self, key: str, ev: StoredEvent) -> None:
        self._observe(key, ev.type, ev.obj)

    # -- the graph ------------------------------------------------------------------------
    def _observe(self, key: str, ev_type: str, obj: Obj) -> None:
        meta = obj["metadata"]
        uid = meta.get("uid")
        if not uid:
            return
        ref = Ref(key, meta.get("namespace", "") or "", meta["name"], uid)
        if ev_type == "DELETED":
            self._drop_dependent(uid)
            for dep in self._dependents.pop(uid, set()):
                entry = self._owners_of.get(dep)
                if entry is not None:
                    self._mark("dependent", entry[0])
            return
        owners = meta.get("ownerReferences") or []
        previous = self._owners_of.get(uid)
        if owners:
            if previous is None or previous[1] != owners:
                self._drop_dependent(uid)
                self._owners_of[uid] = (ref, owners)
                for owner in owners:
                    self._dependents.setdefault(owner.get("uid", ""), set()).add(uid)
                self._mark("dependent", ref)
        elif previous is not None:
            self._drop_dependent(uid)
        finalizers = meta.get("finalizers") or ()
        if meta.get("deletionTimestamp") and (ORPHAN in finalizers or FOREGROUND in finalizers):
            self._mark("owner", ref)

    def _drop_dependent(self, uid: str) -> None:
        entry = self._owners_of.pop(uid, None)
        if entry is None:
            return
        for owner in entry[1]:
            deps = self._dependents.get(owner.get("uid", ""))
            if deps is not None:
                deps.discard(uid)
                if not deps:
                    del self._dependents[owner.get("uid", "")]
                # an owner waiting for its dependents may now be done
                owner_ref = self._owner_ref(entry[0], owner)
                if owner_ref is not None:
                    self._mark("owner", owner_ref)

    def _mark(self, kind: str, ref: Ref) -> None:
        self._dirty[(kind, ref.uid)] = ref
        self._worker.wake()

    def _owner_rt(self, owner: Obj) -> ResourceType | None:
        api_version = owner.get("apiVersion", "")
        group, _, version = api_version.rpartition("/")
        return self.registry.by_kind(group, version, owner.get("kind", ""))

    def _owner_ref(self, dependent: Ref, owner: Obj) -> Ref | None:
        rt = self._owner_rt(owner)
        if rt is None:
            return None
        return Ref(
            rt.storage_key,
            dependent.namespace if rt.namespaced else "",
            owner.get("name", ""),
            owner.get("uid", ""),
        )

    def _rt_for_key(self, key: str) -> ResourceType | None:
        for rt in self.registry.all():
            if rt.storage_key == key:
                return rt
        return None

    def _live(self, ref: Ref) -> Obj | None:
        entry = self.objects.storage.get(ref.storage_key, ref.namespace, ref.name)
        if entry is None:
            return None
        obj = entry.load()
        return obj if obj["metadata"].get("uid") == ref.uid else None

    # -- work -----------------------------------------------------------------------------
    def _work_one(self) -> None:
        """The newest mark first; a 404 or 409 means the object went or changed meanwhile, and its
        event marks it again."""
        (kind, _), ref = self._dirty.popitem()
        try:
            if kind == "dependent":
                self._attempt_to_delete(ref)
            else:
                self._process_owner(ref)
        except errors.StatusError as exc:
            if exc.code not in (404, 409):
                raise

    def _attempt_to_delete(self, ref: Ref) -> None:
        """`attemptToDeleteItem`: classify owners as solid / dangling / waiting-for-dependents."""
        obj = self._live(ref)
        if obj is None:
            return
        meta = obj["metadata"]
        owners = meta.get("ownerReferences") or []
        if not owners:
            return
        solid, dangling, waiting = [], [], []
        for owner in owners:
            owner_ref = self._owner_ref(ref, owner)
            live = self._live(owner_ref) if owner_ref is not None else None
            if live is None:
                if owner_ref is None:
                    solid.append(owner)  # a kind we do not serve: leave it alone
                else:
                    dangling.append(owner)
                continue
            lmeta = live["metadata"]
            if lmeta.get("deletionTimestamp") and FOREGROUND in (lmeta.get("finalizers") or ()):
                waiting.append(owner)
            else:
                solid.append(owner)
        rt = self._rt_for_key(ref.storage_key)
        if rt is None:
            return
        if solid:
            if not dangling and not waiting:
                return
            gone = {o.get("uid") for o in dangling + waiting}
            obj["metadata"]["ownerReferences"] = [o for o in owners if o.get("uid") not in gone]
            self.objects.update(rt, ref.namespace or None, ref.name, obj)
            return
        if meta.get("deletionTimestamp"):
            return  # already being deleted
        finalizers = meta.get("finalizers") or ()
        if waiting and ref.uid in self._dependents:
            policy = "Foreground"
        elif ORPHAN in finalizers:
            policy = "Orphan"
        elif FOREGROUND in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        self.objects.delete(
            rt, ref.namespace or None, ref.name, propagation_policy=policy, preconditions={"uid": ref.uid}
        )
        self.deleted += 1

    def _process_owner(self, ref: Ref) -> None:
        obj = self._live(ref)
        if obj is None:
            return
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or ())
        if not meta.get("deletionTimestamp"):
            return
        rt = self._rt_for_key(ref.storage_key)
        if rt is None:
            return
        dependents = [self._owners_of[d] for d in self._dependents.get(ref.uid, ()) if d in self._owners_of]
        if ORPHAN in finalizers:
            for dep_ref, _ in dependents:
                self._remove_owner_reference(dep_ref, ref.uid)
            finalizers.remove(ORPHAN)
            self._set_finalizers(rt, ref, obj, finalizers)
            return
        if FOREGROUND in finalizers:
            blocking = [
                dep_ref
                for dep_ref, owners in dependents
                if any(o.get("uid") == ref.uid and o.get("blockOwnerDeletion") for o in owners)
            ]
            if not blocking:
                finalizers.remove(FOREGROUND)
                self._set_finalizers(rt, ref, obj, finalizers)
                return
            for dep_ref in blocking:
                self._mark("dependent", dep_ref)

    def _remove_owner_reference(self, dep: Ref, owner_uid: str) -> None:
        rt = self._rt_for_key(dep.storage_key)
        obj = self._live(dep)
        if rt is None or obj is None:
            return
        owners = obj["metadata"].get("ownerReferences") or []
        kept = [o for o in owners if o.get("uid") != owner_uid]
        if kept != owners:
            obj["metadata"]["ownerReferences"] = kept
            self.objects.update(rt, dep.namespace or None, dep.name, obj)

    def _set_finalizers(self, rt: ResourceType, ref: Ref, obj: Obj, finalizers: list[str]) -> None:
        body = copy.deepcopy(obj)
        body["metadata"]["finalizers"] = finalizers
        self.objects.update(rt, ref.namespace or None, ref.name, body)
