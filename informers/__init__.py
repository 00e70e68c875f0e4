"""Shared informers: one cached, indexed, watched copy of each resource for every controller.

See `docs/CONTRACTS.md` (informers) for the surface controllers code against, and the module
docstrings for the design: `reflector` (LIST + WATCH, relist, backoff), `store` and
`indexers` (the cache), `lister` (reads), `shared_informer` (fan-out to handlers), `factory`
(sharing and lifecycle), `transform` (what is kept of each object).
"""

from informers.backoff import Backoff, BackoffPolicy
from informers.factory import SharedInformerFactory
from informers.indexers import (
    CONTROLLER_UID_INDEX,
    NAMESPACE_INDEX,
    NODE_NAME_INDEX,
    IndexFunc,
    controller_uid_index,
    field_index,
    label_index,
    namespace_index,
    node_name_index,
)
from informers.keys import DeletedFinalStateUnknown, deleted_object, meta_key, split_key
from informers.lister import Lister
from informers.reflector import Reflector, ReflectorOptions
from informers.shared_informer import HandlerRegistration, ResourceEventHandler, SharedInformer
from informers.store import Store
from informers.transform import (
    POD_FIELDS,
    PROJECTIONS,
    FieldTree,
    Transform,
    default_transform,
    node_projection,
    pod_projection,
)

__all__ = [
    "CONTROLLER_UID_INDEX",
    "NAMESPACE_INDEX",
    "NODE_NAME_INDEX",
    "POD_FIELDS",
    "PROJECTIONS",
    "Backoff",
    "BackoffPolicy",
    "DeletedFinalStateUnknown",
    "FieldTree",
    "HandlerRegistration",
    "IndexFunc",
    "Lister",
    "Reflector",
    "ReflectorOptions",
    "ResourceEventHandler",
    "SharedInformer",
    "SharedInformerFactory",
    "Store",
    "Transform",
    "controller_uid_index",
    "default_transform",
    "deleted_object",
    "field_index",
    "label_index",
    "meta_key",
    "namespace_index",
    "node_name_index",
    "node_projection",
    "pod_projection",
    "split_key",
]
