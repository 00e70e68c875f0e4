"""Read-only views of a store, as client-go's generated listers: get, list, by index.

A lister never calls the API server: controllers read the cache and write through the client.
What it returns is the cached object itself, shared with every other reader: copy before
changing anything.
"""

from __future__ import annotations

import builtins
from typing import Any

from informers.indexers import NAMESPACE_INDEX
from informers.keys import split_key
from informers.store import Store
from kubeutil.selectors import Selector, parse

Obj = dict[str, Any]


class Lister:
    """Typed reads over one informer's store."""

    __slots__ = ("_store",)

    def __init__(self, store: Store) -> None:
        self._store = store

    def get(self, name: str, namespace: str | None = None) -> Obj | None:
        """The object named `name` (in `namespace` for namespaced kinds), or None."""
        return self._store.get(f"{namespace}/{name}" if namespace else name)

    def get_by_key(self, key: str) -> Obj | None:
        """The object a queue key names (client-go's `GetByKey`): what a reconcile reads first.
        A malformed key raises `ValueError`, as `split_key` does."""
        namespace, name = split_key(key)
        return self.get(name, namespace)

    def list(
        self, namespace: str | None = None, selector: Selector | str | None = None
    ) -> builtins.list[Obj]:
        """Objects in `namespace` (all if None) whose labels match `selector` (all if None)."""
        if namespace:
            objs = self._store.by_index(NAMESPACE_INDEX, namespace)
        else:
            objs = self._store.list()
        if selector is None:
            return objs
        sel = parse(selector) if isinstance(selector, str) else selector
        if sel.empty:
            return objs
        return [o for o in objs if sel.matches_obj(o)]

    def by_index(self, index_name: str, value: str) -> builtins.list[Obj]:
        """Objects filed under `value` in the named index (`KeyError` for an unknown index)."""
        return self._store.by_index(index_name, value)

    def keys(self) -> builtins.list[str]:
        return self._store.keys()

    def __len__(self) -> int:
        return len(self._store)
