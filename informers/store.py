"""The cache: objects by key plus named indexes, as client-go's `threadSafeMap`.

Single-threaded asyncio needs no lock: every method runs to completion without awaiting, so a
reader never sees an object stored but not yet indexed. The indexes map an index value to the
set of keys filed under it; an update only touches the index entries whose values changed
(most updates are status changes that move no index).

Objects are stored as given and shared with every reader: callers must never mutate them.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from informers.indexers import IndexFunc

Obj = dict[str, Any]


class Store:
    """Objects by key, with indexes that are kept in step on every write."""

    __slots__ = ("_indexers", "_indices", "_items")

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        if indexers:
            self.add_indexers(indexers)

    # -- reads ------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def list(self) -> builtins.list[Obj]:
        return list(self._items.values())

    def items(self) -> Iterator[tuple[str, Obj]]:
        return iter(list(self._items.items()))

    @property
    def indexers(self) -> Mapping[str, IndexFunc]:
        return self._indexers

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        """Keys filed under `value` in the named index; `KeyError` if there is no such index."""
        index = self._index(index_name)
        keys = index.get(value)
        return list(keys) if keys else []

    def by_index(self, index_name: str, value: str) -> builtins.list[Obj]:
        index = self._index(index_name)
        keys = index.get(value)
        if not keys:
            return []
        items = self._items
        return [items[k] for k in keys]

    def index_values(self, index_name: str) -> builtins.list[str]:
        """Every value the named index currently holds (client-go's `ListIndexFuncValues`)."""
        return list(self._index(index_name))

    def _index(self, index_name: str) -> dict[str, set[str]]:
        try:
            return self._indices[index_name]
        except KeyError:
            raise KeyError(f"index {index_name!r} does not exist") from None

    # -- writes -----------------------------------------------------------------------

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indexes, building them over what is already stored; a name may be added once."""
        for name in indexers:
            if name in self._indexers:
                raise ValueError(f"indexer {name!r} already exists")
        for name, fn in indexers.items():
            self._indexers[name] = fn
            index: dict[str, set[str]] = {}
            self._indices[name] = index
            for key, obj in self._items.items():
                for value in fn(obj):
                    index.setdefault(value, set()).add(key)

    def update(self, key: str, obj: Obj) -> Obj | None:
        """Add or replace; returns the previous object, if any."""
        old = self._items.get(key)
        self._items[key] = obj
        self._reindex(key, old, obj)
        return old

    def delete(self, key: str) -> Obj | None:
        """Remove; returns the removed object, if any."""
        old = self._items.pop(key, None)
        if old is not None:
            self._reindex(key, old, None)
        return old

    def replace(self, items: Iterable[tuple[str, Obj]]) -> None:
        """Swap the whole content at once and rebuild the indexes (client-go's `Replace`)."""
        self._items = dict(items)
        for name, fn in self._indexers.items():
            index: dict[str, set[str]] = {}
            for key, obj in self._items.items():
                for value in fn(obj):
                    bucket = index.get(value)
                    if bucket is None:
                        index[value] = {key}
                    else:
                        bucket.add(key)
            self._indices[name] = index

    def _reindex(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for name, fn in self._indexers.items():
            old_values = fn(old) if old is not None else []
            new_values = fn(new) if new is not None else []
            if old_values == new_values:
                continue
            index = self._indices[name]
            for value in old_values:
                bucket = index.get(value)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del index[value]
            for value in new_values:
                bucket = index.get(value)
                if bucket is None:
                    index[value] = {key}
                else:
                    bucket.add(key)
