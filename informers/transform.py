"""Transforms applied to every object before it is cached: memory is the informer's main cost.

`default_transform` drops what no controller reads and every object carries: `managedFields`
(often half of an object's bytes) and the `kubectl.kubernetes.io/last-applied-configuration`
annotation (a second copy of the object). It edits in place: the object was just parsed and
nobody else holds it yet.

`pod_projection` keeps only the pod fields aiokcm's controllers read (identity, labels,
annotations, owners, deletion, node binding, tolerations, priority, phase, conditions,
per-container readiness and restarts for ranking), interns the strings
that repeat across pods (condition types, phases, node and namespace names, owner kinds,
timestamps) and shares equal sub-objects between pods (labels, owner references,
tolerations, conditions, container statuses; see `_Shared`), so a cached pod costs about
1.5 KB instead of 15-25 KB. It builds a new object and leaves its input alone. The shared
sub-objects are referenced by many cached pods at once: mutating one would change them all,
which is one more reason cached objects are never mutated. Controllers reading pods from a
projected cache must write with PATCH, never PUT the cached object back.

Cost (10,000 realistic pods): the projection itself is ~8 us/pod (a hit in a sharing table
skips building and interning the sub-object); releasing the parsed pod costs as much again.

`POD_FIELDS` states what the pod projection keeps as data, so the controller test suites can
run on caches whose objects record any read of a field outside it (tests/controllers/
projectionguard.py): a controller that starts reading a dropped field fails there instead of
silently seeing it absent. `node_projection` is the opposite kind: it keeps a node whole but
for the parts kubelets grow without bound and no controller here reads (`NODE_DROPPED`: the
image list alone is often 10-50 KB per node). `PROJECTIONS` is what `aiokcm run` caches.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import orjson

from apiclient.resources import NODES, PODS, Resource

Obj = dict[str, Any]
Transform = Callable[[Obj], Obj]
# A field table: key -> None (the value is kept or dropped whole) or the table of the value's
# own fields (for a list, of each element's).
FieldTree = dict[str, "FieldTree | None"]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_intern = sys.intern


_MISSING: Any = object()  # "field absent" in a structural key (distinct from any JSON value)

_dumps = orjson.dumps
_EncodeError = orjson.JSONEncodeError


class _Shared:
    """Hash-consing of sub-objects: equal ones are built once and shared by every pod having them.

    Pods of one ReplicaSet differ in little but their names, so labels, owner references,
    tolerations, conditions and container statuses repeat. The lookup key is computed from the
    *raw* sub-object, before any projection: on a hit the projected value is taken from the
    table and nothing is built or interned, only a miss builds it. For flat JSON the cheapest
    exact key is `orjson.dumps` of the raw value (measured: 0.2-0.3 us for a pod's five
    conditions, 4x cheaper than a tuple of `items()`, which allocates a tuple per field); it
    is exact because equal JSON text means equal values. Container statuses carry per-pod
    fields (containerID, state) the projection drops, so they are keyed by a tuple of the few
    fields kept instead.

    Safe only because cached objects are never mutated. Bounded: the table is dropped when it
    grows past `limit` (objects already shared stay shared), so unique values (a condition
    with a per-pod message) cost at most `limit` keys.
    """

    __slots__ = ("_limit", "table")

    def __init__(self, limit: int = 20_000) -> None:
        self.table: dict[Any, Any] = {}
        self._limit = limit

    def remember(self, key: Any, value: Any) -> Any:
        table = self.table
        if len(table) >= self._limit:
            self.table = table = {}
        table[key] = value
        return value


def _intern_short(value: Any) -> Any:
    """Intern short strings (names, reasons, timestamps repeat across pods); leave the rest."""
    return _intern(value) if value.__class__ is str and len(value) <= 64 else value


_labels = _Shared()
_owners = _Shared()
_tolerations = _Shared()
_conditions = _Shared()
_container_statuses = _Shared()


def default_transform(obj: Obj) -> Obj:
    """Drop `metadata.managedFields` and the last-applied annotation, in place."""
    meta = obj.get("metadata")
    if meta:
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if annotations and LAST_APPLIED in annotations:
            del annotations[LAST_APPLIED]
            if not annotations:
                del meta["annotations"]
    return obj


_META_KEEP = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
)
_SPEC_KEEP = (
    "nodeName",
    "priority",
    "priorityClassName",
    "schedulerName",
    "terminationGracePeriodSeconds",
    "restartPolicy",
    # KEP-4563: the pod's eviction responders, and the PodGroup that rules eviction out.
    "evictionResponders",
    "schedulingGroup",
)
_STATUS_KEEP = ("phase", "reason", "message", "startTime", "nominatedNodeName")


def _key(value: Any) -> bytes | None:
    """The sharing key of a raw JSON value; None (do not share) if it is not plain JSON."""
    try:
        return _dumps(value)
    except _EncodeError:
        return None


def _share(table: _Shared, value: Any, build: Callable[[Any], Any]) -> Any:
    """The shared projection of a raw JSON value, built on a miss (see `_Shared`)."""
    key = _key(value)
    found = table.table.get(key) if key is not None else None
    if found is None:
        found = build(value)
        if key is not None:
            table.remember(key, found)
    return found


def share_json_text(table: _Shared, text: bytes, build: Callable[[Any], Any]) -> Any:
    """The shared projection of a value given as JSON text; None if the value is falsy.

    For the schema-directed decoder (`informers.rawdecode`), which hands sub-objects over
    undecoded: on a hit the text is never parsed at all. The text is a key of the same table
    `_share` fills with `orjson.dumps` keys: both are exact (equal JSON text, whatever wrote it,
    means equal values), they merely may not meet. A falsy value (null, {}, []) is never
    stored: the projection leaves such a field out, and telling it apart needs the value.
    """
    found = table.table.get(text)
    if found is None:
        value = orjson.loads(text)
        if not value:
            return None
        found = table.remember(text, build(value))
    return found


def _build_labels(labels: Obj) -> Obj:
    return {_intern_short(k): _intern_short(v) for k, v in labels.items()}


def _share_labels(labels: Obj) -> Obj:
    result: Obj = _share(_labels, labels, _build_labels)
    return result


def _build_owners(refs: list[Obj]) -> list[Obj]:
    return [
        {
            "apiVersion": _intern_short(r.get("apiVersion", "")),
            "kind": _intern_short(r.get("kind", "")),
            "name": _intern_short(r.get("name", "")),
            "uid": _intern_short(r.get("uid", "")),
            **({"controller": True} if r.get("controller") else {}),
            **({"blockOwnerDeletion": True} if r.get("blockOwnerDeletion") else {}),
        }
        for r in refs
    ]


def _share_owners(refs: list[Obj]) -> list[Obj]:
    result: list[Obj] = _share(_owners, refs, _build_owners)
    return result


def _build_tolerations(tolerations: list[Obj]) -> list[Obj]:
    return [{_intern_short(k): _intern_short(v) for k, v in t.items()} for t in tolerations]


def _share_tolerations(tolerations: list[Obj]) -> list[Obj]:
    result: list[Obj] = _share(_tolerations, tolerations, _build_tolerations)
    return result


def _project_condition(cond: Obj) -> Obj:
    out: Obj = {"type": _intern_short(cond.get("type", "")), "status": _intern_short(cond.get("status", ""))}
    for key in ("reason", "message", "lastTransitionTime"):
        value = cond.get(key)
        if value:
            # Transition times repeat across pods created together; reasons repeat everywhere.
            out[key] = value if key == "message" else _intern_short(value)
    return out


def _build_conditions(conditions: list[Obj]) -> list[Obj]:
    # Every condition, kubelet bookkeeping included: writers address conditions by their index
    # in the cached list (JSON patches guarded by the resourceVersion), so the cached list must
    # be the server's, element for element.
    return [_project_condition(c) for c in conditions]


def _share_conditions(conditions: list[Obj]) -> list[Obj]:
    # Keyed by every field of every condition, kubelet ones included: a lastProbeTime change
    # only costs a miss (the kubelet leaves it null).
    result: list[Obj] = _share(_conditions, conditions, _build_conditions)
    return result


def _share_container_statuses(statuses: list[Obj]) -> list[Obj]:
    try:
        key: Any = tuple(
            [
                (
                    s.get("name", ""),
                    bool(s.get("ready")),
                    s.get("restartCount", 0),
                    s.get("started", _MISSING),
                )
                for s in statuses
            ]
        )
        found = _container_statuses.table.get(key)
    except TypeError:  # an unhashable field (not a valid status): project, do not share
        key, found = None, None
    if found is None:
        found = []
        for s in statuses:
            out: Obj = {
                "name": _intern_short(s.get("name", "")),
                "ready": bool(s.get("ready")),
                "restartCount": s.get("restartCount", 0),
            }
            if "started" in s:
                out["started"] = s["started"]
            found.append(out)
        if key is not None:
            _container_statuses.remember(key, found)
    return found


def _project_meta(meta: Obj) -> Obj:
    out: Obj = {k: meta[k] for k in _META_KEEP if k in meta}
    for key in ("namespace", "generateName", "creationTimestamp"):
        value = out.get(key)
        if value:
            out[key] = _intern_short(value)
    labels = meta.get("labels")
    if labels:
        out["labels"] = _share_labels(labels)
    annotations = meta.get("annotations")
    if annotations:
        kept = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        if kept:
            out["annotations"] = kept
    refs = meta.get("ownerReferences")
    if refs:
        out["ownerReferences"] = _share_owners(refs)
    return out


def pod_projection(pod: Obj) -> Obj:
    """A new, narrow pod: only what the controllers read (see the module docstring)."""
    out: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": _project_meta(pod.get("metadata") or {})}
    spec_in = pod.get("spec") or {}
    spec: Obj = {k: spec_in[k] for k in _SPEC_KEEP if k in spec_in}
    for key in ("nodeName", "priorityClassName", "schedulerName", "restartPolicy"):
        if key in spec:
            spec[key] = _intern_short(spec[key])
    tolerations = spec_in.get("tolerations")
    if tolerations:
        spec["tolerations"] = _share_tolerations(tolerations)
    volumes = spec_in.get("volumes")
    if volumes:
        # kubectl drain's local-storage filter: which volumes are emptyDir (the data a drain would lose)
        spec["volumes"] = [{k: v[k] for k in _VOLUME_KEEP if k in v} for v in volumes if isinstance(v, dict)]
    out["spec"] = spec
    status_in = pod.get("status") or {}
    status: Obj = {k: status_in[k] for k in _STATUS_KEEP if k in status_in}
    for key in ("phase", "startTime"):
        if key in status:
            status[key] = _intern_short(status[key])
    conditions = status_in.get("conditions")
    if conditions:
        status["conditions"] = _share_conditions(conditions)
    for key in ("containerStatuses", "initContainerStatuses"):
        statuses = status_in.get(key)
        if statuses:
            status[key] = _share_container_statuses(statuses)
    out["status"] = status
    return out


_VOLUME_KEEP = ("name", "emptyDir")
_OWNER_FIELDS: FieldTree = dict.fromkeys(
    ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")
)
_CONDITION_FIELDS: FieldTree = dict.fromkeys(("type", "status", "reason", "message", "lastTransitionTime"))
_CONTAINER_STATUS_FIELDS: FieldTree = dict.fromkeys(("name", "ready", "restartCount", "started"))

POD_FIELDS: FieldTree = {
    "apiVersion": None,
    "kind": None,
    "metadata": {
        **dict.fromkeys(_META_KEEP),
        "labels": None,
        "annotations": None,
        "ownerReferences": _OWNER_FIELDS,
    },
    "spec": {**dict.fromkeys(_SPEC_KEEP), "tolerations": None, "volumes": dict.fromkeys(_VOLUME_KEEP)},
    "status": {
        **dict.fromkeys(_STATUS_KEEP),
        "conditions": _CONDITION_FIELDS,
        "containerStatuses": _CONTAINER_STATUS_FIELDS,
        "initContainerStatuses": _CONTAINER_STATUS_FIELDS,
    },
}
"""Every field `pod_projection` keeps. Lists are kept whole (every element, in order, narrowed to
its kept fields), so an index into a cached list is an index into the server's."""

NODE_DROPPED: FieldTree = {
    "status": dict.fromkeys(("images", "volumesInUse", "volumesAttached", "config", "daemonEndpoints")),
}
"""What `node_projection` drops beyond `default_transform`."""

_NODE_STATUS_DROPPED = tuple(NODE_DROPPED["status"] or ())


def node_projection(node: Obj) -> Obj:
    """`default_transform`, then the node status parts no controller reads (`NODE_DROPPED`), in place."""
    default_transform(node)
    status = node.get("status")
    if status:
        for key in _NODE_STATUS_DROPPED:
            status.pop(key, None)
    return node


PROJECTIONS: dict[Resource, Transform] = {PODS: pod_projection, NODES: node_projection}
"""The transform of each resource `aiokcm run` caches narrowed (the others get `default_transform`)."""
