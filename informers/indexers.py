"""Index functions: map an object to the index values it is filed under.

As client-go's `IndexFunc`, a function returns a list of values (an object may sit under
several, or none). The three every controller leans on are built in: by namespace, pods by
`spec.nodeName` (what the node-maintenance, taint-eviction and node-lifecycle controllers ask
"which pods run on this node?" with), and by the UID of the controlling owner (what the
ReplicaSet, Deployment and disruption controllers ask "which objects does this one own?" with).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

IndexFunc = Callable[[Mapping[str, Any]], list[str]]
Indexers = Mapping[str, IndexFunc]

NAMESPACE_INDEX = "namespace"
NODE_NAME_INDEX = "spec.nodeName"
CONTROLLER_UID_INDEX = "controllerUID"


def namespace_index(obj: Mapping[str, Any]) -> list[str]:
    """client-go's `MetaNamespaceIndexFunc`: the namespace, or nothing for cluster-scoped objects."""
    namespace = obj.get("metadata", {}).get("namespace")
    return [namespace] if namespace else []


def node_name_index(obj: Mapping[str, Any]) -> list[str]:
    """Pods by the node they are bound to; unscheduled pods are not indexed."""
    node = (obj.get("spec") or {}).get("nodeName")
    return [node] if node else []


def controller_uid_index(obj: Mapping[str, Any]) -> list[str]:
    """The UID of the ownerReference with `controller: true` (`metav1.GetControllerOf`)."""
    for ref in obj.get("metadata", {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("uid"):
            return [ref["uid"]]
    return []


def field_index(*path: str) -> IndexFunc:
    """A custom indexer on a scalar field, e.g. `field_index("spec", "schedulerName")`."""

    def index(obj: Mapping[str, Any]) -> list[str]:
        value: Any = obj
        for part in path:
            if not isinstance(value, Mapping):
                return []
            value = value.get(part)
        return [str(value)] if value is not None and value != "" else []

    return index


def label_index(label: str) -> IndexFunc:
    """A custom indexer on a label's value (objects without the label are not indexed)."""

    def index(obj: Mapping[str, Any]) -> list[str]:
        value = (obj.get("metadata", {}).get("labels") or {}).get(label)
        return [value] if value is not None else []

    return index


def default_indexers(*, pods: bool) -> dict[str, IndexFunc]:
    """The indexes present on every informer, plus `spec.nodeName` on pods."""
    out: dict[str, IndexFunc] = {
        NAMESPACE_INDEX: namespace_index,
        CONTROLLER_UID_INDEX: controller_uid_index,
    }
    if pods:
        out[NODE_NAME_INDEX] = node_name_index
    return out
