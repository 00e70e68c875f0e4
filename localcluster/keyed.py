"""A keyed work loop for the in-process controllers (StatefulSet, DaemonSet, service accounts).

What client-go's workqueue gives KCM's controllers, cut to what an in-process actor needs: a
key marked dirty any number of times is synced once; a sync may ask to run again after a delay
(minReadySeconds, a pod that must finish first); every sync reads the store itself, so a key
is all the work item carries. One task runs syncs, watch tasks only mark keys, so a burst of
events costs one sync per key, never one per event.

The store is read and written synchronously by the sync (`ObjectAPI`), so a sync always sees
its own writes and needs none of KCM's expectations.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import anyio
import anyio.lowlevel

from localcluster.storage import Storage, StoredEvent

K = TypeVar("K", bound=Hashable)

#: Syncs run back to back before the loop yields to other tasks.
_BATCH = 100


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
