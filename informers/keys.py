"""Object keys as client-go's `MetaNamespaceKeyFunc` builds them: `namespace/name`, or `name`.

Keys are what handlers enqueue and what workers get back, so they must round-trip through
`split_key`. A `DeletedFinalStateUnknown` tombstone already carries its key, which `meta_key`
returns as is (client-go's `DeletionHandlingMetaNamespaceKeyFunc`), so a delete handler can key
whatever it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class DeletedFinalStateUnknown:
    """A delete the informer did not see: the object vanished while the watch was down.

    Handed to `on_delete` instead of the object when a relist finds a key gone; `obj` is the
    last state the cache knew, which may be stale.
    """

    key: str
    obj: dict[str, Any]


def deleted_object(obj: object) -> Mapping[str, Any] | None:
    """What an `on_delete` handler was told is gone: the object, or a tombstone's last known
    state (client-go's handlers type-assert the same two cases); None for anything else."""
    if isinstance(obj, DeletedFinalStateUnknown):
        obj = obj.obj
    return obj if isinstance(obj, Mapping) else None


def meta_key(obj: Mapping[str, Any] | DeletedFinalStateUnknown) -> str:
    """`namespace/name` for namespaced objects, `name` for cluster-scoped ones."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    name: str = meta["name"]
    return f"{namespace}/{name}" if namespace else name


def split_key(key: str) -> tuple[str, str]:
    """`(namespace, name)`; the namespace is `""` for a cluster-scoped key. Rejects malformed keys."""
    parts = key.split("/")
    if len(parts) == 1 and parts[0]:
        return "", parts[0]
    if len(parts) == 2 and parts[0] and parts[1]:
        return parts[0], parts[1]
    raise ValueError(f"unexpected key format: {key!r}")
