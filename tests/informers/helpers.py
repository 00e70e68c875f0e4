"""Objects and a recording handler shared by the informer tests."""

from __future__ import annotations

from typing import Any

from informers import DeletedFinalStateUnknown, ResourceEventHandler, meta_key

Obj = dict[str, Any]


def pod(
    name: str,
    namespace: str = "default",
    *,
    node: str | None = None,
    labels: dict[str, str] | None = None,
    owner_uid: str | None = None,
    phase: str = "Running",
) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "labels": dict(labels or {"app": "web"})}
    if owner_uid:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "rs",
                "uid": owner_uid,
                "controller": True,
            }
        ]
    spec: Obj = {"containers": [{"name": "c", "image": "nginx"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def rv_of(obj: Obj) -> int:
    return int(obj["metadata"]["resourceVersion"])


class Recorder:
    """A handler that replays events into a replica and checks client-go's delivery guarantees.

    `duplicate_adds` counts adds of keys the replica already has, `phantom` counts updates and
    deletes of keys it does not, `out_of_order` counts events older than what it already saw for
    the key (a relist may replay the same version as an update, never an older one).
    """

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []
        self.replica: dict[str, Obj] = {}
        self.duplicate_adds = 0
        self.phantom = 0
        self.out_of_order = 0
        self.tombstones: list[DeletedFinalStateUnknown] = []
        self._last_rv: dict[str, int] = {}

    def handler(self) -> ResourceEventHandler:
        return ResourceEventHandler(on_add=self.on_add, on_update=self.on_update, on_delete=self.on_delete)

    def _seen(self, key: str, obj: Obj) -> None:
        rv = rv_of(obj)
        if rv < self._last_rv.get(key, 0):
            self.out_of_order += 1
        self._last_rv[key] = rv

    def on_add(self, obj: Obj) -> None:
        key = meta_key(obj)
        if key in self.replica:
            self.duplicate_adds += 1
        self.replica[key] = obj
        self.events.append(("add", key, obj))
        self._seen(key, obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        key = meta_key(new)
        if key not in self.replica:
            self.phantom += 1
        self.replica[key] = new
        self.events.append(("update", key, (old, new)))
        self._seen(key, new)

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        key = meta_key(obj)
        if key not in self.replica:
            self.phantom += 1
        self.replica.pop(key, None)
        if isinstance(obj, DeletedFinalStateUnknown):
            self.tombstones.append(obj)
            self.events.append(("delete", key, obj))
            self._seen(key, obj.obj)
        else:
            self.events.append(("delete", key, obj))
            self._seen(key, obj)
