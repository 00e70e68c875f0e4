"""A keyed work loop for the in-process controllers (StatefulSet, DaemonSet, service accounts).

What client-go's workqueue gives KCM's controllers, cut to what an in-process actor needs: a
key marked dirty any number of times is synced once; a sync may ask to run again after a delay
(minReadySeconds, a pod that must finish first); every sync reads the store itself, so a key
is all the work item carries. One task runs syncs, watch tasks only mark keys, so a burst of
events costs one sync per key, never one per event.

The store is read and written synchronously by the sync (`ObjectAPI`), so a sync always sees
its own writes and needs none of KCM's expectations. `PodOwnerController` is the loop, watches
and pod bookkeeping the controllers that own pods (Job, StatefulSet, DaemonSet) share; `Worker`
is the bare loop for a queue its owner orders itself (the garbage collector, the scheduler).
"""

from __future__ import annotations

import heapq
import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

import anyio
import anyio.lowlevel
import orjson

from localcluster import errors
from localcluster.objects import ObjectAPI
from localcluster.recorder import EventRecorder
from localcluster.registry import Obj, ResourceType
from localcluster.revisions import controller_of
from localcluster.storage import Entry, Storage, StoredEvent

K = TypeVar("K", bound=Hashable)
Key = tuple[str, str]

#: Syncs run back to back before the loop yields to other tasks.
_BATCH = 100
#: A write that raced another writer (a stale read, a conflict) is looked at again almost at once.
RETRY_AFTER_RACE = 0.05
#: A write the API refused (recorded as an event) is tried again later: a loop never crashes on one.
RETRY_AFTER_REFUSAL = 5.0


class Worker:
    """One task working through a queue its owner keeps (the garbage collector's de-duplicated
    marks, the scheduler's active pods): `wake()` after queueing; `run()` calls `step()` while
    `has_work()`, yields to other tasks every `batch` steps and after each run of work, and
    sleeps while there is none."""

    def __init__(self, has_work: Callable[[], bool], step: Callable[[], None], *, batch: int = 200) -> None:
        self._has_work = has_work
        self._step = step
        self._batch = batch
        self._wake = anyio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            while not self._has_work():
                self._wake = anyio.Event()
                await self._wake.wait()
            handled = 0
            while self._has_work():
                self._step()
                handled += 1
                if handled % self._batch == 0:
                    await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()


class KeyedLoop(Generic[K]):
    """`add(key)` marks a key dirty; `run()` syncs dirty keys one at a time with `sync(key)`,
    which returns seconds after which to sync the key again, or None."""

    def __init__(self, sync: Callable[[K], float | None]) -> None:
        self._sync = sync
        self._dirty: dict[K, None] = {}
        self._later: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._wake = anyio.Event()

    def add(self, key: K) -> None:
        if key not in self._dirty:
            self._dirty[key] = None
            self._wake.set()

    def add_after(self, key: K, delay: float) -> None:
        heapq.heappush(self._later, (anyio.current_time() + delay, next(self._seq), key))
        self._wake.set()

    async def watch_and_run(
        self, storage: Storage, watches: Iterable[tuple[str, Callable[[StoredEvent], None]]]
    ) -> None:
        """Run the loop beside a watch of each (storage key, handler), the handlers marking keys:
        every in-process controller's `run`, so a fault that drops watches is met alike."""
        async with anyio.create_task_group() as tg:
            for key, handle in watches:
                tg.start_soon(watch_storage, storage, key, handle)
            tg.start_soon(self.run)

    async def run(self) -> None:
        while True:
            now = anyio.current_time()
            while self._later and self._later[0][0] <= now:
                self.add(heapq.heappop(self._later)[2])
            handled = 0
            while self._dirty:
                key = next(iter(self._dirty))
                del self._dirty[key]
                again = self._sync(key)
                if again is not None:
                    self.add_after(key, again)
                handled += 1
                if handled % _BATCH == 0:
                    await anyio.lowlevel.checkpoint()
            self._wake = anyio.Event()
            timeout = self._later[0][0] - anyio.current_time() if self._later else None
            if timeout is None:
                await self._wake.wait()
            elif timeout > 0:
                with anyio.move_on_after(timeout):
                    await self._wake.wait()
            else:
                await anyio.lowlevel.checkpoint()


async def watch_storage(storage: Storage, key: str, handle: Callable[[StoredEvent], None]) -> None:
    """Feed every event of one resource to `handle`, first the objects present (as ADDED);
    subscribe again whenever the subscription is closed (a fault dropping every watch)."""
    while True:
        with storage.subscribe(key) as sub:
            for entry in list(storage.iter_entries(key)):
                handle(
                    StoredEvent(
                        "ADDED", entry.rv, None, entry.raw, entry.namespace, entry.labels, entry.fields
                    )
                )
            while not sub.closed:
                await sub.wait()
                for ev in sub.drain():
                    handle(ev)
        await anyio.lowlevel.checkpoint()


def retry_after(exc: errors.StatusError) -> float | None:
    """The in-process controllers' answer to a refused write; a 403 is a terminating namespace,
    where creating more is pointless until the object is gone."""
    if exc.code in (404, 409):
        return RETRY_AFTER_RACE
    if exc.code == 403:
        return None
    return RETRY_AFTER_REFUSAL


def sync_stored(
    storage: Storage, storage_key: str, key: tuple[str, str], sync: Callable[[Obj], float | None]
) -> float | None:
    """Run `sync` on the stored object under `key`, if it is still there, so each controller's
    loop shares one reading of an object gone (nothing to do) and of a refused write."""
    entry = storage.get(storage_key, *key)
    if entry is None:
        return None
    try:
        return sync(entry.load())
    except errors.StatusError as exc:
        return retry_after(exc)


def write_status(objects: ObjectAPI, rt: ResourceType, obj: Obj, status: Obj) -> None:
    """Put `status` on `obj` and write it through /status, unless it is what the object has: a
    sync that changes nothing writes nothing (no new resourceVersion, no watch event)."""
    if status != (obj.get("status") or {}):
        obj["status"] = status
        meta = obj["metadata"]
        objects.update_status(rt, meta["namespace"], meta["name"], obj)


def add_unless_deleted(loop: KeyedLoop[tuple[str, str]]) -> Callable[[StoredEvent], None]:
    """A watch handler syncing the object an event is about; a deleted one has nothing left to sync."""

    def handle(ev: StoredEvent) -> None:
        if ev.type != "DELETED":
            loop.add((ev.namespace, ev.obj["metadata"]["name"]))

    return handle


def add_controller(
    loop: KeyedLoop[tuple[str, str]], kind: str, api_version: str
) -> Callable[[StoredEvent], None]:
    """A watch handler syncing the `kind` that controls the object an event is about; the raw
    bytes are checked first so the events of other owners are not decoded."""
    marker = orjson.dumps(kind)

    def handle(ev: StoredEvent) -> None:
        if marker not in ev.raw:
            return
        ref = controller_of(ev.obj)
        if ref is not None and ref.get("kind") == kind and ref.get("apiVersion") == api_version:
            loop.add((ev.namespace, ref["name"]))

    return handle


class PodOwnerController(ABC):
    """The frame of the simulated controllers that own pods (Job, StatefulSet, DaemonSet): one
    loop keyed by owner, marked by a change to the owner or to any pod it controls; each sync
    reads the owner from the store and hands it to `_sync`, which subclasses write."""

    def __init__(self, objects: ObjectAPI, owner_rt: ResourceType, component: str) -> None:
        self.objects = objects
        self._owner_rt = owner_rt
        self._pod_rt = objects.registry.require("", "v1", "pods")
        self.events = EventRecorder(objects, component)
        self.loop: KeyedLoop[Key] = KeyedLoop(self.sync)
        self._on_owner = add_unless_deleted(self.loop)
        self._on_pod = add_controller(self.loop, owner_rt.kind, owner_rt.api_version)

    def _more_watches(self) -> Iterable[tuple[str, Callable[[StoredEvent], None]]]:
        """Other resources whose changes mark owners (a DaemonSet's nodes): (storage key, handler)."""
        return ()

    async def run(self) -> None:
        watches = [
            (self._owner_rt.storage_key, self._on_owner),
            ("pods", self._on_pod),
            *self._more_watches(),
        ]
        await self.loop.watch_and_run(self.objects.storage, watches)

    def sync(self, key: Key) -> float | None:
        return sync_stored(self.objects.storage, self._owner_rt.storage_key, key, self._sync)

    @abstractmethod
    def _sync(self, owner: Obj) -> float | None:
        """Reconcile one owner; the seconds until it wants another look, or None."""

    def _pods(self, owner: Obj) -> list[Obj]:
        """The pods `owner` controls, in store order; the raw bytes are checked for its UID first
        so the namespace's other pods are not decoded."""
        meta = owner["metadata"]
        uid = meta["uid"]
        out = []
        for entry in self.objects.storage.iter_entries("pods", meta["namespace"]):
            if uid.encode() in entry.raw:
                pod = entry.load()
                ref = controller_of(pod)
                if ref is not None and ref.get("uid") == uid:
                    out.append(pod)
        return out

    def _create_pod(self, owner: Obj, pod: Obj) -> Entry:
        """Create `pod` and record it on the owner as the Job and DaemonSet controllers word it."""
        try:
            created = self.objects.create(self._pod_rt, pod["metadata"]["namespace"], pod)
        except errors.StatusError as exc:
            self.events.event(owner, "Warning", "FailedCreate", f"Error creating: {exc.message}")
            raise
        self.events.event(owner, "Normal", "SuccessfulCreate", f"Created pod: {created.name}")
        return created

    def _delete_pod(self, owner: Obj, pod: Obj, *, gone: tuple[int, ...] = (404,)) -> None:
        """Delete `pod` if it is still the one looked at (its UID), recording it on the owner;
        a refusal whose code is in `gone` means someone else got there first."""
        meta = pod["metadata"]
        try:
            self.objects.delete(
                self._pod_rt, meta["namespace"], meta["name"], preconditions={"uid": meta["uid"]}
            )
        except errors.StatusError as exc:
            if exc.code not in gone:
                raise
            return
        self.events.event(owner, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}")
