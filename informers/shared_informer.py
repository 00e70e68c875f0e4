"""SharedInformer: one cache of one resource, its events fanned out to many handlers.

As client-go's `sharedIndexInformer`, with the Go machinery asyncio does not need left out:
the reflector calls `replace` / `apply` synchronously, which update the store and push a
notification into every handler's own buffer, in one step and without awaiting. There is no
DeltaFIFO: in a single-threaded loop nothing can observe the store between the two.

Each handler has an unbounded buffer drained by its own task (client-go's
`processorListener`), so a slow handler only delays itself. Handlers are plain synchronous
callables (controllers only enqueue keys); one that raises is logged and counted, never allowed
to stop the others or the informer.

Semantics kept from client-go:
- An event for a key already cached is an update, never a second add.
- A relist emits adds for new keys, updates for known keys, and `DeletedFinalStateUnknown`
  deletes for keys that vanished while the watch was down.
- A handler added after start first receives every cached object as an add.
- Resync (if a period is set) replays every cached object as `on_update(obj, obj)`, each
  period stretched at random by up to 10% so informers do not resync in lock-step.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import structlog

from apiclient import KubeClient, Resource
from apiclient.resources import PODS
from informers import metrics
from informers.gcpolicy import Freezer
from informers.indexers import IndexFunc, default_indexers
from informers.keys import DeletedFinalStateUnknown, meta_key
from informers.lister import Lister
from informers.rawdecode import RawDecoder, decoder_for
from informers.reflector import Reflector, ReflectorOptions
from informers.store import Store
from informers.transform import Transform, default_transform

log = structlog.get_logger(__name__)

Obj = dict[str, Any]

_ADD, _UPDATE, _DELETE = 0, 1, 2
_BATCH = 256  # notifications a listener handles before letting the loop run others


@dataclass(frozen=True, slots=True)
class ResourceEventHandler:
    """Callbacks for one consumer; any may be left out."""

    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj | DeletedFinalStateUnknown], None] | None = None


class HandlerRegistration:
    """Returned by `add_event_handler`: its own `has_synced()` and the handle to remove it."""

    __slots__ = (
        "_buffer",
        "_cancel",
        "_done",
        "_failures",
        "_handler",
        "_name",
        "_pushed",
        "_sync_mark",
        "_wake",
    )

    def __init__(self, handler: ResourceEventHandler, name: str) -> None:
        self._handler = handler
        self._name = name
        self._buffer: deque[tuple[int, Any, Any]] = deque()
        self._wake: anyio.Event | None = None
        self._pushed = 0
        self._done = 0
        self._sync_mark: int | None = None
        self._cancel: anyio.CancelScope | None = None
        self._failures = 0

    def has_synced(self) -> bool:
        """True once this handler has been handed everything in the informer's initial list."""
        return self._sync_mark is not None and self._done >= self._sync_mark

    def _mark_synced(self) -> None:
        self._sync_mark = self._pushed

    def _push(self, kind: int, a: Any, b: Any) -> None:
        self._buffer.append((kind, a, b))
        self._pushed += 1
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set()

    async def _run(self) -> None:
        with anyio.CancelScope() as scope:
            self._cancel = scope
            buffer = self._buffer
            handler = self._handler
            while True:
                while not buffer:
                    self._wake = wake = anyio.Event()
                    await wake.wait()
                handled = 0
                while buffer and handled < _BATCH:
                    kind, a, b = buffer.popleft()
                    handled += 1
                    try:
                        if kind == _ADD:
                            if handler.on_add is not None:
                                handler.on_add(a)
                        elif kind == _UPDATE:
                            if handler.on_update is not None:
                                handler.on_update(a, b)
                        elif handler.on_delete is not None:
                            handler.on_delete(a)
                    except Exception as exc:
                        self._failed(exc)
                    finally:
                        self._done += 1
                await anyio.lowlevel.checkpoint()

    def _failed(self, exc: Exception) -> None:
        """Count and log; the traceback only the first time, a buggy handler fails on every event."""
        metrics.HANDLER_ERRORS.labels(self._name).inc()
        first = not self._failures
        self._failures += 1
        log.error("informer event handler failed", resource=self._name, error=repr(exc), exc_info=first)

    def _stop(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()


class SharedInformer:
    """A cache of one resource (optionally one namespace and selectors), shared by its handlers."""

    def __init__(
        self,
        client: KubeClient,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = default_transform,
        resync_period: float = 0.0,
        options: ReflectorOptions | None = None,
        freezer: Freezer | None = None,
    ) -> None:
        self.resource = res
        self._freezer = freezer or Freezer(enabled=False)
        self.namespace = namespace
        self.transform = transform
        self.resync_period = resync_period
        self.store = Store(default_indexers(pods=res == PODS))
        self._lister = Lister(self.store)
        self._name = res.group_resource
        self._listeners: list[HandlerRegistration] = []
        self._synced = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None
        self._started = False
        self._store_gauge = metrics.STORE_OBJECTS.labels(self._name)
        self.reflector = Reflector(
            client,
            res,
            self,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            options=options,
            transform=self._transform,
            freeze_pages=self._freezer.enabled,
            raw_decoder=self._raw_decoder,
        )

    # -- the contract -----------------------------------------------------------------

    @property
    def lister(self) -> Lister:
        return self._lister

    @property
    def last_sync_resource_version(self) -> str:
        """The newest resourceVersion seen: from the last LIST, watch event or bookmark."""
        return self.reflector.last_sync_resource_version

    @property
    def started(self) -> bool:
        return self._started

    def has_synced(self) -> bool:
        """True once the first LIST is in the store."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add named indexes (built over what is already cached); adding an existing name fails."""
        self.store.add_indexers(indexers)

    def add_event_handler(self, handler: ResourceEventHandler) -> HandlerRegistration:
        """Register a handler; once running it first gets every cached object as an add."""
        reg = HandlerRegistration(handler, self._name)
        if self._synced.is_set():
            for obj in self.store.list():
                reg._push(_ADD, obj, None)
            reg._mark_synced()
        self._listeners.append(reg)
        if self._tg is not None:
            self._tg.start_soon(reg._run, name=f"informer-handler:{self._name}")
        return reg

    def remove_event_handler(self, reg: HandlerRegistration) -> None:
        """Stop delivering to a handler; what is still buffered for it is dropped."""
        if reg in self._listeners:
            self._listeners.remove(reg)
            reg._stop()

    async def run(self) -> None:
        """List, watch and deliver until cancelled. Runs once per informer."""
        if self._started:
            raise RuntimeError(f"informer for {self._name} already started")
        self._started = True
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for reg in self._listeners:
                    tg.start_soon(reg._run, name=f"informer-handler:{self._name}")
                tg.start_soon(self.reflector.run, name=f"reflector:{self._name}")
                if self.resync_period > 0:
                    tg.start_soon(self._resync_loop, name=f"resync:{self._name}")
        finally:
            self._tg = None

    # -- the reflector's sink -------------------------------------------------------------

    def _raw_decoder(self) -> RawDecoder | None:
        """The transform's schema-directed decoder, if any; read at call time, as `_transform`."""
        return decoder_for(self.transform)

    def _transform(self, obj: Obj) -> Obj:
        """Read at call time: the factory may settle the transform until the informer starts."""
        return self.transform(obj) if self.transform is not None else obj

    def replace(self, items: list[Obj], resource_version: str) -> None:
        """A full LIST (already transformed): swap the store, then tell handlers what changed."""
        fresh: dict[str, Obj] = {meta_key(obj): obj for obj in items}
        previous = {k: v for k, v in self.store.items()} if self._listeners else {}
        self.store.replace(fresh.items())
        self._store_gauge.set(len(fresh))
        listeners = self._listeners
        if listeners:
            for key, obj in fresh.items():
                old = previous.get(key)
                for reg in listeners:
                    if old is None:
                        reg._push(_ADD, obj, None)
                    else:
                        reg._push(_UPDATE, old, obj)
            for key, old in previous.items():
                if key not in fresh:
                    tombstone = DeletedFinalStateUnknown(key, old)
                    for reg in listeners:
                        reg._push(_DELETE, tombstone, None)
        self._freezer.freeze()
        if not self._synced.is_set():
            for reg in listeners:
                reg._mark_synced()
            self._synced.set()

    def apply(self, event_type: str, obj: Obj) -> None:
        """One watch event (already transformed): update the store, then every handler's buffer."""
        key = meta_key(obj)
        store = self.store
        if event_type == "DELETED":
            store.delete(key)
            for reg in self._listeners:
                reg._push(_DELETE, obj, None)
        else:
            old = store.update(key, obj)
            if old is not None:
                for reg in self._listeners:
                    reg._push(_UPDATE, old, obj)
                self._freezer.note_event()
                return  # the size is unchanged (most events: renewals, status posts)
            for reg in self._listeners:
                reg._push(_ADD, obj, None)
        self._store_gauge.set(len(store))
        self._freezer.note_event()

    async def _resync_loop(self) -> None:
        await self._synced.wait()
        while True:
            await anyio.sleep(self.resync_period * (1.0 + 0.1 * random.random()))
            self.resync()

    def resync(self) -> None:
        """Replay every cached object to every handler as `on_update(obj, obj)`."""
        objs = self.store.list()
        for reg in self._listeners:
            for obj in objs:
                reg._push(_UPDATE, obj, obj)
