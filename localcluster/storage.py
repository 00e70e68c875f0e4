"""The versioned object store and watch hub (etcd plus the watch cache, in one process).

Why it looks like this:
- One global, monotonically increasing resourceVersion, as etcd's revision: every write of any
  kind takes the next number, so RVs order all events and a client can resume from any of them.
- Objects are held serialized (`Entry.raw`, orjson bytes copied to their exact size, see
  `_compact`) with only what selectors need kept parsed (labels, selectable fields). A defaulted pod is ~2 KB as bytes against ~8 KB as
  nested dicts, which is what makes 150,000 pods fit in well under 2 GiB; LIST and watch
  write the bytes as they are, and writers parse the old object only when they update it.
- Keys per resource are kept sorted (`_SortedKeys`: chunks of ~1,000 with `bisect`), as etcd
  returns keys in order, so LIST pages with `limit`/`continue` cost O(page) and not a sort of
  every object, and a create or delete at 150,000 pods moves ~1,000 pointers, not ~75,000.
- Two histories, as kube-apiserver has two (the numbers are the constants below):
  etcd's, which reads at an old revision (`resourceVersionMatch=Exact`, continue tokens) until
  compaction, run every 5 minutes to the revision seen at the previous run; and the watch
  cache's, a window per resource that a watch from an RV replays (older: 410 "too old resource
  version"), sized as the cacher sizes it: 100 events at least, growing while its oldest event
  is younger than 75 s, up to 102,400. One history of events per resource serves both: it keeps
  what either still needs. A read at an old RV is rebuilt from the current objects and the
  events after that RV (each carries the entry it replaced), so no object is stored twice.
- Writes are synchronous and dispatch events to subscribers immediately, so when a
  subscription's buffer is empty it has seen everything up to `Storage.rv`: that is what makes
  bookmarks safe to send.

Callers never mutate dicts they got from here (`StoredEvent.obj`): they are shared.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import heapq
import itertools
import sys
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from localcluster import errors

Obj = dict[str, Any]
Filter = Callable[["StoredEvent"], "str | None"]

#: The watch cache's upper bound per resource (the cacher's `defaultUpperBoundCapacity`).
DEFAULT_WINDOW = 100 * 1024
#: Its lower bound (`--default-watch-cache-size`), and how young its oldest event must be for it to grow.
WINDOW_LOWER_BOUND = 100
EVENT_FRESH_SECONDS = 75.0
#: Events kept per resource for reads at an old RV, at most: past it a busy resource's old RVs
#: read as compacted before the compactor runs (bounds memory; etcd itself keeps everything).
HISTORY_LIMIT = DEFAULT_WINDOW
#: kube-apiserver's `--etcd-compaction-interval`.
COMPACTION_INTERVAL = 300.0
#: Reads at an old RV remembered between pages (each: the entries the RV's objects had).
_SNAPSHOTS = 32
#: A subscriber that falls this far behind is closed, as the cacher drops a blocked watcher.
MAX_BUFFERED = 200_000


def object_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


@dataclass(slots=True)
class Entry:
    """A stored object: its bytes plus what selectors read without parsing."""

    raw: bytes
    rv: int
    namespace: str
    name: str
    labels: dict[str, str]
    fields: dict[str, str]

    def load(self) -> Obj:
        """A fresh, private copy of the object."""
        result: Obj = orjson.loads(self.raw)
        return result


class StoredEvent:
    """One change. `obj` is the object after the change (the last state for DELETED, with the
    deletion's RV); `prev_*` describe the object before it, so watchers with a selector can
    turn an update into ADDED or DELETED when the object moves into or out of the selector.

    `obj` is parsed from `raw` on first access when the event was built without it: the history
    window keeps such slim copies (10,000 parsed pods would be ~80 MB held for replays that
    HTTP watchers never parse), and live events carry the writer's dict so in-process actors
    pay nothing. `framed` caches the watch line (`{"type":..,"object":..}\n`) so N watchers
    of one event share one serialization."""

    __slots__ = (
        "_obj",
        "at",
        "fields",
        "framed",
        "key",
        "labels",
        "namespace",
        "prev",
        "prev_fields",
        "prev_labels",
        "raw",
        "rv",
        "type",
    )

    def __init__(
        self,
        type: str,
        rv: int,
        obj: Obj | None,
        raw: bytes,
        namespace: str,
        labels: dict[str, str],
        fields: dict[str, str],
        prev_labels: dict[str, str] | None = None,
        prev_fields: dict[str, str] | None = None,
        *,
        key: str = "",
        prev: Entry | None = None,
        at: float = 0.0,
    ) -> None:
        self.type = type
        self.rv = rv
        self._obj = obj
        self.raw = raw
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.prev_labels = prev_labels
        self.prev_fields = prev_fields
        #: The object's storage key, the entry this change replaced (None for ADDED: the key
        #: had no object before), and when the change was recorded (the storage clock).
        self.key = key
        self.prev = prev
        self.at = at
        self.framed: bytes | None = None

    @property
    def obj(self) -> Obj:
        obj = self._obj
        if obj is None:
            obj = self._obj = orjson.loads(self.raw)
        return obj

    def retyped(self, kind: str) -> StoredEvent:
        """The same change seen as another type (a selector turned MODIFIED into ADDED/DELETED)."""
        return StoredEvent(
            kind, self.rv, self._obj, self.raw, self.namespace, self.labels, self.fields, key=self.key
        )

    def slim(self) -> StoredEvent:
        """A copy without the parsed object (for the history window and replays from it)."""
        return StoredEvent(
            self.type,
            self.rv,
            None,
            self.raw,
            self.namespace,
            self.labels,
            self.fields,
            self.prev_labels,
            self.prev_fields,
            key=self.key,
            prev=self.prev,
            at=self.at,
        )

    def __repr__(self) -> str:
        return f"StoredEvent({self.type!r}, rv={self.rv}, namespace={self.namespace!r})"


class Subscription:
    """An in-process watch: `async for ev in sub` yields `StoredEvent`s (type possibly rewritten
    to ADDED/DELETED by the filter). Ends when the storage closes it (too slow) or on `close()`."""

    def __init__(self, storage: Storage, key: str, flt: Filter | None) -> None:
        self._storage = storage
        self.key = key
        self._filter = flt
        self._buffer: deque[StoredEvent] = deque()
        self._wakeup = asyncio.Event()
        self.closed = False
        #: Set when closed because the consumer fell too far behind.
        self.overflowed = False

    def _offer(self, ev: StoredEvent) -> None:
        """Called once per event per subscriber on every write: kept to a few attribute reads."""
        if self.closed:
            return
        flt = self._filter
        if flt is not None:
            kind = flt(ev)
            if kind is None:
                return
            if kind != ev.type:
                ev = ev.retyped(kind)
        buffer = self._buffer
        buffer.append(ev)
        if len(buffer) > MAX_BUFFERED:
            self.overflowed = True
            self.close()
        wakeup = self._wakeup
        if not wakeup.is_set():
            wakeup.set()

    def drain(self, limit: int | None = None) -> list[StoredEvent]:
        """What is buffered right now (at most `limit` events, oldest first), without waiting."""
        buffer = self._buffer
        if limit is not None and len(buffer) > limit:
            popleft = buffer.popleft
            return [popleft() for _ in range(limit)]
        out = list(buffer)
        buffer.clear()
        self._wakeup.clear()
        return out

    @property
    def pending(self) -> int:
        return len(self._buffer)

    async def wait(self) -> None:
        """Wait until an event is buffered or the subscription closes."""
        while not self._buffer and not self.closed:
            self._wakeup.clear()
            await self._wakeup.wait()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._storage._unsubscribe(self)
            self._wakeup.set()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> StoredEvent:
        await self.wait()
        if self._buffer:
            ev = self._buffer.popleft()
            return ev
        raise StopAsyncIteration

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _SortedKeys:
    """A sorted set of keys as a list of sorted chunks (the `sortedcontainers.SortedList` idea).

    One flat sorted list costs a memmove of the tail on every insert and delete: ~13 us each at
    150,000 keys with generated names, on every pod create and delete. Chunks of at most
    `2 * load` keys bound that to a small move plus a bisect over the chunk maxima. Iteration
    copies one chunk at a time and re-finds its place after each, so writes made while a caller
    walks the keys never break the walk (they may or may not be seen, as with the flat list)."""

    __slots__ = ("_chunks", "_len", "_load", "_maxes")

    def __init__(self, load: int = 512) -> None:
        self._chunks: list[list[str]] = []
        self._maxes: list[str] = []
        self._len = 0
        self._load = load

    def __len__(self) -> int:
        return self._len

    def add(self, key: str) -> None:
        """Insert a key that is not present."""
        chunks, maxes = self._chunks, self._maxes
        self._len += 1
        if not maxes:
            chunks.append([key])
            maxes.append(key)
            return
        i = bisect.bisect_left(maxes, key)
        if i == len(maxes):
            i -= 1
            chunk = chunks[i]
            chunk.append(key)
            maxes[i] = key
        else:
            chunk = chunks[i]
            bisect.insort(chunk, key)
        load = self._load
        if len(chunk) > 2 * load:
            half = chunk[load:]
            del chunk[load:]
            maxes[i] = chunk[-1]
            chunks.insert(i + 1, half)
            maxes.insert(i + 1, half[-1])

    def remove(self, key: str) -> None:
        """Delete a key that is present."""
        chunks, maxes = self._chunks, self._maxes
        i = bisect.bisect_left(maxes, key)
        chunk = chunks[i]
        j = bisect.bisect_left(chunk, key)
        if j == len(chunk) or chunk[j] != key:
            raise KeyError(key)
        del chunk[j]
        self._len -= 1
        if not chunk:
            del chunks[i]
            del maxes[i]
        elif j == len(chunk):
            maxes[i] = chunk[-1]

    def position(self, key: str, *, after: bool = False) -> int:
        """How many keys sort before `key` (or before-or-equal, with `after`): `bisect_left` /
        `bisect_right` on the flat list. Sums chunk lengths: ~150 additions at 150,000 keys."""
        chunks = self._chunks
        i = bisect.bisect_left(self._maxes, key)
        if i == len(chunks):
            return self._len
        inner = bisect.bisect_right(chunks[i], key) if after else bisect.bisect_left(chunks[i], key)
        return sum(map(len, chunks[:i])) + inner

    def iter_from(self, start: str | None = None, *, after: bool = False) -> Iterator[str]:
        """Keys from `start` (inclusive, or exclusive with `after`) to the end, in order."""
        key, exclusive = start, after
        while True:
            chunks = self._chunks
            if key is None:
                if not chunks:
                    return
                i = j = 0
            else:
                i = (
                    bisect.bisect_right(self._maxes, key)
                    if exclusive
                    else bisect.bisect_left(self._maxes, key)
                )
                if i == len(chunks):
                    return
                j = bisect.bisect_right(chunks[i], key) if exclusive else bisect.bisect_left(chunks[i], key)
            part = chunks[i][j:]
            yield from part
            key, exclusive = part[-1], True


class _History:
    """Events appended at the end, dropped from the front, read at any index in O(1).

    A deque walks its 64-item blocks to reach an index: the window's size checks read the event
    `capacity` from the end on every write, and replays read by index from a binary search, so
    at a window of tens of thousands of lease renewals a deque made each write walk hundreds of
    blocks. A list with a moving head, compacted once half of it is dropped, reads in O(1) and
    drops in amortized O(1).
    """

    __slots__ = ("_head", "_items")

    def __init__(self) -> None:
        self._items: list[StoredEvent] = []
        self._head = 0

    def __len__(self) -> int:
        return len(self._items) - self._head

    def __bool__(self) -> bool:
        return len(self._items) > self._head

    def __iter__(self) -> Iterator[StoredEvent]:
        return itertools.islice(self._items, self._head, None)

    def __getitem__(self, index: int) -> StoredEvent:
        size = len(self._items) - self._head
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("history index out of range")
        return self._items[self._head + index]

    def append(self, ev: StoredEvent) -> None:
        self._items.append(ev)

    def popleft(self) -> StoredEvent:
        if self._head >= len(self._items):
            raise IndexError("pop from an empty history")
        ev = self._items[self._head]
        self._head += 1
        if self._head >= 1024 and 2 * self._head >= len(self._items):
            del self._items[: self._head]
            self._head = 0
        return ev


class _Bucket:
    """Objects and history of one resource (storage key).

    `history` holds the events either history still needs, oldest first; its newest
    `window_len` events are the watch cache's window. `cache_rv` is the watch cache's
    resourceVersion (its start, then its newest event), what a list served from it reports."""

    __slots__ = (
        "base_rv",
        "cache_rv",
        "capacity",
        "dropped_rv",
        "history",
        "items",
        "keys",
        "popped",
        "subscribers",
        "window_len",
    )

    def __init__(self, rv: int, capacity: int) -> None:
        self.items: dict[str, Entry] = {}
        self.keys = _SortedKeys()
        self.history = _History()
        self.window_len = 0
        self.capacity = capacity
        #: An event ever left the window: watches start after its oldest event, not at `cache_rv`'s start.
        self.popped = False
        #: RV of the newest event dropped from `history`: no read at an RV below it can be rebuilt.
        self.dropped_rv = 0
        #: The RV the watch cache started at (the cacher's initial list): watchable while nothing left the window.
        self.base_rv = rv
        self.cache_rv = rv
        self.subscribers: list[Subscription] = []

    def watch_floor(self) -> int:
        """The oldest RV a watch may start from (`watchCache.getAllEventsSinceLocked`: oldest - 1)."""
        if not self.popped:
            return self.base_rv
        if self.window_len:
            return self.history[-self.window_len].rv - 1
        return self.cache_rv


@dataclass(slots=True)
class _Snapshot:
    """What one resource looked like at `rv`: the entries of the keys changed since (None: no
    object then), filled from the events after `rv` up to `upto` and extended on each page."""

    rv: int
    upto: int
    overrides: dict[str, Entry | None] = field(default_factory=dict)
    sorted_keys: list[str] = field(default_factory=list)


class Storage:
    """All objects of all resources, with one resourceVersion counter."""

    def __init__(self, *, window: int = DEFAULT_WINDOW, clock: Callable[[], float] | None = None) -> None:
        self.rv = 1
        self._upper = window
        self._lower = min(WINDOW_LOWER_BOUND, window)
        self._clock = clock or _loop_time
        self._buckets: dict[str, _Bucket] = {}
        #: Reads below this RV are gone (etcd's compacted revision); `_tick_rv` is where the next compaction goes.
        self.compacted_rv = 0
        self._tick_rv: int | None = None
        self._snapshots: OrderedDict[tuple[str, int], _Snapshot] = OrderedDict()
        self._rv_waiters: list[tuple[str, int, asyncio.Future[None]]] = []

    # -- configuration -----------------------------------------------------------------
    @property
    def window(self) -> int:
        return self._upper

    def set_window(self, size: int) -> None:
        """Bound every watch cache window to `size` events (fault injection: make watches get
        410); `DEFAULT_WINDOW` restores the cacher's sizing."""
        self._upper = size
        self._lower = min(WINDOW_LOWER_BOUND, size)
        for bucket in self._buckets.values():
            bucket.capacity = max(min(bucket.capacity, self._upper), self._lower)
            self._shrink_window(bucket, bucket.capacity)
            self._trim(bucket)

    def _bucket(self, key: str) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self.rv, self._lower)
        return bucket

    # -- compaction -----------------------------------------------------------------------
    def compact(self) -> None:
        """One run of kube-apiserver's compactor: compact to the revision the previous run saw."""
        if self._tick_rv is not None:
            self.compacted_rv = self._tick_rv
            for bucket in self._buckets.values():
                self._trim(bucket)
            for snap_key in [k for k in self._snapshots if k[1] < self.compacted_rv]:
                del self._snapshots[snap_key]
        self._tick_rv = self.rv

    async def run_compactor(self, interval: float = COMPACTION_INTERVAL) -> None:
        """Compact every `interval` seconds of the loop's clock until cancelled."""
        while True:
            await asyncio.sleep(interval)
            self.compact()

    # -- reads --------------------------------------------------------------------------
    def get(self, key: str, namespace: str, name: str) -> Entry | None:
        return self._bucket(key).items.get(object_key(namespace, name))

    def count(self, key: str) -> int:
        return len(self._bucket(key).items)

    def cache_rv(self, key: str) -> int:
        """The watch cache's resourceVersion for a resource: what a list it serves reports."""
        return self._bucket(key).cache_rv

    def iter_entries(
        self, key: str, namespace: str | None = None, after: str | None = None
    ) -> Iterator[Entry]:
        """Entries in key order, optionally in one namespace and after a key (exclusive)."""
        bucket = self._bucket(key)
        items = bucket.items
        for k in self._keys_from(bucket, namespace, after):
            entry = items.get(k)
            if entry is not None:  # removed by a write made while the caller walks
                yield entry

    def _keys_from(self, bucket: _Bucket, namespace: str | None, after: str | None) -> Iterator[str]:
        prefix = f"{namespace}/" if namespace else ""
        if after is not None and after >= prefix:
            keys = bucket.keys.iter_from(after, after=True)
        else:
            keys = bucket.keys.iter_from(prefix or None)
        for k in keys:
            if prefix and not k.startswith(prefix):
                return
            yield k

    def count_entries(self, key: str, namespace: str | None = None, after: str | None = None) -> int:
        """How many entries `iter_entries` would yield, from sorted-key positions (O(log n)):
        what a first LIST page needs for `remainingItemCount` without walking 150,000 keys."""
        keys = self._bucket(key).keys
        if namespace:
            lo = keys.position(f"{namespace}/")
            # every key of the namespace starts with "<ns>/"; "<ns>0" is the first string after them
            hi = keys.position(f"{namespace}0")
        else:
            lo, hi = 0, len(keys)
        if after is not None:
            lo = max(lo, keys.position(after, after=True))
        return max(hi - lo, 0)

    # -- reads at an old resourceVersion (etcd's MVCC) ------------------------------------
    def check_readable(self, key: str, rv: int) -> None:
        """Raise `errors.Compacted` when the objects at `rv` can no longer be rebuilt."""
        if rv < self.compacted_rv or rv < self._bucket(key).dropped_rv:
            raise Compacted(rv)

    def iter_entries_at(
        self, key: str, rv: int, namespace: str | None = None, after: str | None = None
    ) -> Iterator[Entry]:
        """`iter_entries` as of `rv` (call `check_readable` first): a consistent page of a list
        whose first page was read at `rv`, whatever was written since."""
        snap = self._snapshot(key, rv)
        if snap is None:
            yield from self.iter_entries(key, namespace, after)
            return
        bucket = self._bucket(key)
        items, overrides = bucket.items, snap.overrides
        prefix = f"{namespace}/" if namespace else ""
        lo = (
            bisect.bisect_right(snap.sorted_keys, after)
            if after is not None
            else bisect.bisect_left(snap.sorted_keys, prefix)
        )
        # keys that had an object at `rv` and have none now: merged into the walk of today's keys
        keys = snap.sorted_keys
        gone = (
            k
            for k in map(keys.__getitem__, range(lo, len(keys)))
            if k not in items and overrides[k] is not None
        )
        gone_in_ns = (k for k in gone if k.startswith(prefix)) if prefix else gone
        for k in heapq.merge(self._keys_from(bucket, namespace, after), gone_in_ns):
            if k in overrides:
                then = overrides[k]
                if then is not None:
                    yield then
            else:
                entry = items.get(k)
                if entry is not None:
                    yield entry

    def count_entries_at(
        self, key: str, rv: int, namespace: str | None = None, after: str | None = None
    ) -> int:
        """`count_entries` as of `rv`: today's count corrected by the keys changed since."""
        count = self.count_entries(key, namespace, after)
        snap = self._snapshot(key, rv)
        if snap is None:
            return count
        items = self._bucket(key).items
        prefix = f"{namespace}/" if namespace else ""
        for k, then in snap.overrides.items():
            if (after is None or k > after) and k.startswith(prefix):
                count += (then is not None) - (k in items)
        return count

    def _snapshot(self, key: str, rv: int) -> _Snapshot | None:
        """The keys changed after `rv` and their entries then; None when nothing changed."""
        bucket = self._bucket(key)
        history = bucket.history
        if not history or history[-1].rv <= rv:
            return None
        snap = self._snapshots.get((key, rv))
        if snap is None:
            snap = self._snapshots[(key, rv)] = _Snapshot(rv, rv)
            if len(self._snapshots) > _SNAPSHOTS:
                self._snapshots.popitem(last=False)
        else:
            self._snapshots.move_to_end((key, rv))
        overrides, added = snap.overrides, []
        for i in range(_first_after(history, snap.upto), len(history)):
            ev = history[i]
            if ev.key not in overrides:  # the first change after `rv` tells what was there at `rv`
                overrides[ev.key] = ev.prev
                added.append(ev.key)
        snap.upto = history[-1].rv
        if len(added) > 64:  # many new keys: one sort beats many inserts
            snap.sorted_keys = sorted(snap.sorted_keys + added)
        else:
            for k in added:
                bisect.insort(snap.sorted_keys, k)
        return snap

    # -- freshness -------------------------------------------------------------------------
    async def wait_for_rv(self, key: str, rv: int, timeout: float) -> bool:
        """Wait until the resource's watch cache has seen `rv` (the cacher's
        `waitUntilFreshAndBlock`); False when `timeout` seconds pass first."""
        if self._bucket(key).cache_rv >= rv:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = (key, rv, future)
        self._rv_waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                await future
            return True
        except TimeoutError:
            return False
        finally:
            if waiter in self._rv_waiters:
                self._rv_waiters.remove(waiter)

    def _wake_waiters(self, key: str, rv: int) -> None:
        for waiter in list(self._rv_waiters):
            if waiter[0] == key and waiter[1] <= rv and not waiter[2].done():
                waiter[2].set_result(None)

    # -- writes -------------------------------------------------------------------------
    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _record(self, bucket: _Bucket, ev: StoredEvent) -> None:
        """Append a slim copy of `ev` (see `StoredEvent`) to the history, sizing the watch window
        as the cacher does (`watchCache.resizeCacheLocked`) and dropping what nobody needs."""
        if ev._obj is not None:
            ev = ev.slim()
        history = bucket.history
        capacity = bucket.capacity
        if bucket.window_len == capacity and capacity:
            oldest = history[-capacity]
            if ev.at - oldest.at < EVENT_FRESH_SECONDS:
                bucket.capacity = min(capacity * 2, self._upper)
            elif capacity >= 4 and ev.at - history[-(capacity // 4)].at > EVENT_FRESH_SECONDS:
                bucket.capacity = max(capacity // 2, self._lower)
                self._shrink_window(bucket, bucket.capacity)
        history.append(ev)
        if bucket.window_len < bucket.capacity:
            bucket.window_len += 1
        else:
            bucket.popped = True
        bucket.cache_rv = ev.rv
        self._trim(bucket)

    def _shrink_window(self, bucket: _Bucket, size: int) -> None:
        if bucket.window_len > size:
            bucket.window_len = size
            bucket.popped = True

    def _trim(self, bucket: _Bucket) -> None:
        """Drop events outside the window that compaction (or `HISTORY_LIMIT`) took away."""
        history = bucket.history
        compacted = self.compacted_rv
        while len(history) > bucket.window_len and (
            history[0].rv <= compacted or len(history) > HISTORY_LIMIT
        ):
            bucket.dropped_rv = history.popleft().rv

    def _emit(self, key: str, bucket: _Bucket, ev: StoredEvent) -> None:
        self._record(bucket, ev)
        for sub in list(bucket.subscribers):
            sub._offer(ev)
        if self._rv_waiters:
            self._wake_waiters(key, ev.rv)

    def write(
        self, key: str, obj: Obj, *, labels: dict[str, str], fields: dict[str, str], expect_new: bool
    ) -> Entry:
        """Store `obj` (create when `expect_new`, else replace) with a new RV set in its metadata.
        The caller has already checked existence and preconditions; `obj` becomes shared."""
        bucket = self._bucket(key)
        meta = obj["metadata"]
        namespace = sys.intern(meta.get("namespace", "") or "")
        name = meta["name"]
        k = object_key(namespace, name)
        rv = self._next_rv()
        meta["resourceVersion"] = str(rv)
        raw = _compact(orjson.dumps(obj))
        _intern_values(labels)
        _intern_values(fields)
        entry = Entry(raw, rv, namespace, name, labels, fields)
        old = bucket.items.get(k)
        bucket.items[k] = entry
        at = self._clock()
        if old is None:
            bucket.keys.add(k)
            ev = StoredEvent("ADDED", rv, obj, raw, namespace, labels, fields, key=k, at=at)
        else:
            ev = StoredEvent(
                "MODIFIED",
                rv,
                obj,
                raw,
                namespace,
                labels,
                fields,
                old.labels,
                old.fields,
                key=k,
                prev=old,
                at=at,
            )
        self._emit(key, bucket, ev)
        return entry

    def remove(self, key: str, obj: Obj) -> Entry:
        """Delete the object; `obj` is its last state, which gets the deletion's RV."""
        bucket = self._bucket(key)
        meta = obj["metadata"]
        namespace = meta.get("namespace", "") or ""
        k = object_key(namespace, meta["name"])
        old = bucket.items.pop(k)
        bucket.keys.remove(k)
        rv = self._next_rv()
        meta["resourceVersion"] = str(rv)
        raw = _compact(orjson.dumps(obj))
        ev = StoredEvent(
            "DELETED", rv, obj, raw, namespace, old.labels, old.fields, key=k, prev=old, at=self._clock()
        )
        self._emit(key, bucket, ev)
        return Entry(raw, rv, namespace, meta["name"], old.labels, old.fields)

    def drop_resource(self, key: str) -> None:
        """Forget a whole resource (a deleted CRD), closing its watches."""
        bucket = self._buckets.pop(key, None)
        for snap_key in [k for k in self._snapshots if k[0] == key]:
            del self._snapshots[snap_key]
        if bucket is not None:
            for sub in list(bucket.subscribers):
                sub.close()

    # -- watch --------------------------------------------------------------------------
    def subscribe(
        self, key: str, resource_version: int | None = None, flt: Filter | None = None
    ) -> Subscription:
        """Events after `resource_version` (replayed from the window), then live ones.

        `None` starts with the live stream only (the caller sends the initial state, as the
        real server does for a watch without an RV). Raises a 410 `StatusError` when the RV is
        older than the window. An RV the resource has not reached yet is no error (the cacher
        answers 200 and waits): events up to it are skipped."""
        bucket = self._bucket(key)
        if resource_version is not None and resource_version > self.rv:
            flt = _after(resource_version, flt)
        sub = Subscription(self, key, flt)
        if resource_version is not None:
            floor = bucket.watch_floor()
            if resource_version < floor:
                raise errors.gone(f"too old resource version: {resource_version} ({floor})")
            history = bucket.history
            start = max(_first_after(history, resource_version), len(history) - bucket.window_len)
            for i in range(start, len(history)):
                # a private copy: a consumer that parses `obj` must not pin it in the window
                sub._offer(history[i].slim())
        bucket.subscribers.append(sub)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        bucket = self._buckets.get(sub.key)
        if bucket is not None and sub in bucket.subscribers:
            bucket.subscribers.remove(sub)

    def close_all_watches(self) -> int:
        """Close every subscription (fault injection: drop every open watch)."""
        subs = [s for b in self._buckets.values() for s in b.subscribers]
        for sub in subs:
            sub.close()
        return len(subs)

    def subscriber_count(self, key: str | None = None) -> int:
        if key is not None:
            return len(self._bucket(key).subscribers)
        return sum(len(b.subscribers) for b in self._buckets.values())


class Compacted(Exception):
    """The objects at this RV can no longer be read (etcd's `ErrCompacted`)."""

    def __init__(self, rv: int) -> None:
        super().__init__(f"required revision {rv} has been compacted")
        self.rv = rv


def _loop_time() -> float:
    """The running loop's clock (virtual under looptime), else the monotonic clock."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


def _after(rv: int, flt: Filter | None) -> Filter:
    """`flt`, skipping events up to `rv` (a watch from an RV not reached yet)."""

    def skip(ev: StoredEvent) -> str | None:
        if ev.rv <= rv:
            return None
        return flt(ev) if flt is not None else ev.type

    return skip


def _intern_values(strings: dict[str, str]) -> None:
    """Share repeated label and field values (`default`, `Running`, `node-7`, `app=web`) between
    the entries that hold them: each parsed copy is ~55 bytes, times 150,000 pods. Keys need no
    help (orjson caches short keys); `metadata.name` is unique (interning it would only grow the
    intern table). Values stay equal, so doing it in place is invisible to readers."""
    intern = sys.intern
    for k, v in strings.items():
        if type(v) is str and k != "metadata.name":
            strings[k] = intern(v)


def _compact(raw: bytes) -> bytes:
    """An exact-size copy of orjson's output. `orjson.dumps` returns its growable write buffer
    without shrinking it: a 1 KB pod holds ~8 KB of heap (measured by RSS), so 150,000 stored
    pods would waste about a gigabyte. One memcpy per write is the price."""
    return bytes(memoryview(raw))


def _first_after(history: _History, rv: int) -> int:
    lo, hi = 0, len(history)
    while lo < hi:
        mid = (lo + hi) // 2
        if history[mid].rv <= rv:
            lo = mid + 1
        else:
            hi = mid
    return lo


# -- continue tokens ----------------------------------------------------------------------
def encode_continue(rv: int, last_key: str) -> str:
    """As the real server: base64 of `{"v":"meta.k8s.io/v1","rv":RV,"start":"<key>\\u0000"}`."""
    token = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": last_key + "\x00"})
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    """(rv, last key) of a token, with `storage.DecodeContinue`'s checks and words; rv -1 is
    the token a compacted continue hands out: carry on at the latest revision."""
    try:
        padded = token + "=" * (-len(token) % 4)
        data = orjson.loads(base64.urlsafe_b64decode(padded))
        if not isinstance(data, dict):
            raise ValueError("not an object")
        version = data.get("v")
        if version != "meta.k8s.io/v1":
            raise ValueError(f"server does not recognize this encoded version {version!r}".replace("'", '"'))
        rv = int(data.get("rv") or 0)
        if rv == 0:
            raise ValueError("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        start = str(data.get("start") or "")
        if not start:
            raise ValueError("encoded start key empty (version meta.k8s.io/v1)")
    except (ValueError, TypeError, orjson.JSONDecodeError) as exc:
        raise errors.bad_request(f"invalid continue token: continue key is not valid: {exc}") from exc
    return rv, start.removesuffix("\x00")
