"""Events expire an hour after their last write, as kube-apiserver's `--event-ttl` makes them.

The real server stores each Event under an etcd lease of that TTL, renewed by every update, and
etcd deletes the key when the lease runs out: watchers see DELETED, nothing else is involved.
Without it an embedded cluster left running for days would keep every Event its kubelets and
controllers ever recorded. One subscription notes when each Event was last written (on the
loop's clock); every `interval` the ones past their TTL are removed from storage directly.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from localcluster.storage import Storage, object_key

EVENT_TTL = 3600.0
#: How often expired Events are looked for (etcd revokes leases within about this much).
SWEEP_INTERVAL = 60.0
_EVENTS = "events"


class EventTTL:
    def __init__(self, storage: Storage, *, ttl: float = EVENT_TTL, interval: float = SWEEP_INTERVAL) -> None:
        self.storage = storage
        self.ttl = ttl
        self.interval = interval
        #: Event key -> loop time of its last write, oldest first.
        self._written: OrderedDict[str, float] = OrderedDict()

    async def run(self) -> None:
        """Follow Event writes and sweep until cancelled (in the cluster's task group); a closed
        subscription (a fault dropping every watch) starts over."""
        while True:
            await self._follow()
            await asyncio.sleep(0)

    async def _follow(self) -> None:
        loop = asyncio.get_running_loop()
        with self.storage.subscribe(_EVENTS) as sub:
            for entry in self.storage.iter_entries(_EVENTS):
                self._written[object_key(entry.namespace, entry.name)] = loop.time()
            next_sweep = loop.time() + self.interval
            while not sub.closed:
                try:
                    async with asyncio.timeout(max(next_sweep - loop.time(), 0)):
                        await sub.wait()
                except TimeoutError:
                    pass
                now = loop.time()
                for ev in sub.drain():
                    self._written.pop(ev.key, None)
                    if ev.type != "DELETED":
                        self._written[ev.key] = now
                if now >= next_sweep:
                    self.sweep(now)
                    next_sweep = now + self.interval

    def sweep(self, now: float) -> int:
        """Remove the Events last written more than `ttl` ago; how many went."""
        removed = 0
        written = self._written
        while written:
            key, at = next(iter(written.items()))
            if now - at < self.ttl:
                break
            del written[key]
            namespace, _, name = key.partition("/")
            entry = self.storage.get(_EVENTS, namespace, name)
            if entry is not None:
                self.storage.remove(_EVENTS, entry.load())
                removed += 1
        return removed
