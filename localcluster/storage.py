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
- Each resource keeps a bounded window of recent events (the watch cache's history). A watch
  from an RV inside the window replays what followed; older is a 410 Expired, as a compacted
  etcd answers. A continue token whose RV left the window is expired the same way.
- Writes are synchronous and dispatch events to subscribers immediately, so when a
  subscription's buffer is empty it has seen everything up to `Storage.rv`: that is what makes
  bookmarks safe to send.

Callers never mutate dicts they got from here (`StoredEvent.obj`): they are shared.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import sys
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from localcluster import errors

Obj = dict[str, Any]
Filter = Callable[["StoredEvent"], "str | None"]

DEFAULT_WINDOW = 10_000
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

    __slots__ = ("_obj", "fields", "framed", "labels", "namespace", "prev_fields", "prev_labels", "raw", "rv", "type")

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
        self.framed: bytes | None = None

    @property
    def obj(self) -> Obj:
        obj = self._obj
        if obj is None:
            obj = self._obj = orjson.loads(self.raw)
        return obj

    def retyped(self, kind: str) -> StoredEvent:
        """The same change seen as another type (a selector turned MODIFIED into ADDED/DELETED)."""
        return StoredEvent(kind, self.rv, self._obj, self.raw, self.namespace, self.labels, self.fields)

    def slim(self) -> StoredEvent:
        """A copy without the parsed object (for the history window and replays from it)."""
        return StoredEvent(
            self.type, self.rv, None, self.raw, self.namespace, self.labels, self.fields, self.prev_labels, self.prev_fields
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
                i = bisect.bisect_right(self._maxes, key) if exclusive else bisect.bisect_left(self._maxes, key)
                if i == len(chunks):
                    return
                j = bisect.bisect_right(chunks[i], key) if exclusive else bisect.bisect_left(chunks[i], key)
            part = chunks[i][j:]
            yield from part
            key, exclusive = part[-1], True


class _Bucket:
    """Objects and history of one resource (storage key)."""

    __slots__ = ("evicted_rv", "history", "items", "keys", "subscribers")

    def __init__(self, window: int) -> None:
        self.items: dict[str, Entry] = {}
        self.keys = _SortedKeys()
        self.history: deque[StoredEvent] = deque(maxlen=window)
        #: RV of the newest event that fell out of the window: watches must start at or after it.
        self.evicted_rv = 0
        self.subscribers: list[Subscription] = []


class Storage:
    """All objects of all resources, with one resourceVersion counter."""

    def __init__(self, *, window: int = DEFAULT_WINDOW) -> None:
        self.rv = 1
        self._window = window
        self._buckets: dict[str, _Bucket] = {}

    # -- configuration -----------------------------------------------------------------
    @property
    def window(self) -> int:
        return self._window

    def set_window(self, size: int) -> None:
        """Shrink or grow every history window (fault injection: make clients get 410)."""
        self._window = size
        for bucket in self._buckets.values():
            old = bucket.history
            bucket.history = deque(maxlen=size)
            for ev in old:
                self._record(bucket, ev)

    def _bucket(self, key: str) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self._window)
            bucket.evicted_rv = self.rv
        return bucket

    # -- reads --------------------------------------------------------------------------
    def get(self, key: str, namespace: str, name: str) -> Entry | None:
        return self._bucket(key).items.get(object_key(namespace, name))

    def count(self, key: str) -> int:
        return len(self._bucket(key).items)

    def iter_entries(self, key: str, namespace: str | None = None, after: str | None = None) -> Iterator[Entry]:
        """Entries in key order, optionally in one namespace and after a key (exclusive)."""
        bucket = self._bucket(key)
        prefix = f"{namespace}/" if namespace else ""
        if after is not None and after >= prefix:
            keys = bucket.keys.iter_from(after, after=True)
        else:
            keys = bucket.keys.iter_from(prefix or None)
        items = bucket.items
        for k in keys:
            if prefix and not k.startswith(prefix):
                break
            entry = items.get(k)
            if entry is not None:  # removed by a write made while the caller walks
                yield entry

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

    def check_continue_rv(self, key: str, rv: int) -> None:
        """A paginated list may continue only while its RV is inside the window."""
        if rv < self._bucket(key).evicted_rv:
            raise errors.gone(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter, or use the continue token "
                "in this response to retrieve the remainder of the results. Continuing with the provided "
                "token results in an inconsistent list - objects that were created, modified, or deleted "
                "between the time the first chunk was returned and now may show up in the list."
            )

    # -- writes -------------------------------------------------------------------------
    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _record(self, bucket: _Bucket, ev: StoredEvent) -> None:
        """Append to the window a slim copy of `ev` (see `StoredEvent`)."""
        if ev._obj is not None:
            ev = ev.slim()
        history = bucket.history
        if history.maxlen is not None and len(history) == history.maxlen:
            if history.maxlen == 0:
                bucket.evicted_rv = ev.rv
                return
            bucket.evicted_rv = history[0].rv
        history.append(ev)

    def _emit(self, bucket: _Bucket, ev: StoredEvent) -> None:
        self._record(bucket, ev)
        for sub in list(bucket.subscribers):
            sub._offer(ev)

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
        if old is None:
            bucket.keys.add(k)
            ev = StoredEvent("ADDED", rv, obj, raw, namespace, labels, fields)
        else:
            ev = StoredEvent("MODIFIED", rv, obj, raw, namespace, labels, fields, old.labels, old.fields)
        self._emit(bucket, ev)
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
        ev = StoredEvent("DELETED", rv, obj, raw, namespace, old.labels, old.fields)
        self._emit(bucket, ev)
        return Entry(raw, rv, namespace, meta["name"], old.labels, old.fields)

    def drop_resource(self, key: str) -> None:
        """Forget a whole resource (a deleted CRD), closing its watches."""
        bucket = self._buckets.pop(key, None)
        if bucket is not None:
            for sub in list(bucket.subscribers):
                sub.close()

    # -- watch --------------------------------------------------------------------------
    def subscribe(self, key: str, resource_version: int | None = None, flt: Filter | None = None) -> Subscription:
        """Events after `resource_version` (replayed from the window), then live ones.

        `None` starts with the live stream only (the caller sends the initial state, as the
        real server does for a watch without an RV). Raises a 410 `StatusError` when the RV is
        older than the window."""
        bucket = self._bucket(key)
        sub = Subscription(self, key, flt)
        if resource_version is not None:
            if resource_version < bucket.evicted_rv:
                raise errors.gone(f"too old resource version: {resource_version} ({bucket.evicted_rv})")
            history = bucket.history
            start = _first_after(history, resource_version)
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


def _first_after(history: deque[StoredEvent], rv: int) -> int:
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
    try:
        padded = token + "=" * (-len(token) % 4)
        data = orjson.loads(base64.urlsafe_b64decode(padded))
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError("bad version")
        rv = int(data["rv"])
        start = str(data["start"])
    except (ValueError, KeyError, TypeError, orjson.JSONDecodeError) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from exc
    return rv, start.removesuffix("\x00")
