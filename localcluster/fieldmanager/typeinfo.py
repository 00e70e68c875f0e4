"""The list and map semantics SMD works from, read from a kind's OpenAPI as
`kube-openapi/pkg/schemaconv` reads them: `x-kubernetes-list-type` (atomic / set / map with
`x-kubernetes-list-map-keys`), else a `merge` patch strategy makes a list associative (keyed
by its patch merge key, or a set); any other list is atomic. `x-kubernetes-map-type: atomic`
makes a map or struct atomic. Types without a schema (IntOrString, Quantity, Time, free-form
objects) are "deduced": scalars are leaves, objects granular maps, lists atomic."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from localcluster.builtin import schemas

SCALAR, STRUCT, MAP, LIST, UNTYPED = "scalar", "struct", "map", "list", "untyped"
ATOMIC, SET, ASSOCIATIVE = "atomic", "set", "map"

#: Go struct fields that are values, not pointers: the zero object of a kind already has them
#: (as `{}`), so ownership of what is inside them never makes the struct itself a member.
_VALUE_STRUCTS = frozenset(("metadata", "spec", "status", "template", "strategy", "updateStrategy"))
#: Key defaults the published schemas leave out: every port list keyed by protocol defaults it
#: to TCP (`+default="TCP"` on ContainerPort and ServicePort).
_KEY_DEFAULTS = {"protocol": "TCP"}


@dataclass(slots=True, eq=False)
class Type:
    kind: str
    atomic: bool = False
    fields: dict[str, Type] = field(default_factory=dict)
    #: Fields the Go type always serializes (required, or value structs): present in the zero object.
    implicit: frozenset[str] = frozenset()
    elem: Type | None = None
    list_type: str = ATOMIC
    keys: tuple[str, ...] = ()
    #: Values of key fields an item may omit (the Go types' `+default` on list-map keys).
    key_defaults: dict[str, Any] = field(default_factory=dict)

    def child(self, key: str) -> Type:
        if self.kind == STRUCT:
            found = self.fields.get(key)
            if found is not None:
                return found
            return self.elem or DEDUCED
        if self.kind == MAP:
            return self.elem or DEDUCED
        return DEDUCED


DEDUCED = Type(UNTYPED)
_SCALAR = Type(SCALAR)
_cache: dict[int, Type] = {}
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def of_schema(schema: dict[str, Any] | None, *, root: bool = False) -> Type:
    """The type of a kind's root schema. A root without a `metadata` schema (CRDs publish none)
    gets ObjectMeta's."""
    resolved = schemas.resolve(schema)
    if resolved is None:
        return DEDUCED
    key = id(resolved)
    if key in _cache:
        return _cache[key]
    t = _compile(resolved)
    if root and t.kind == STRUCT and (t.fields.get("metadata") or DEDUCED).kind != STRUCT:
        meta = schemas.definitions().get(_OBJECT_META)
        t.fields["metadata"] = of_schema(meta)
        t.implicit = t.implicit | {"metadata"}
    return t


def _compile(resolved: dict[str, Any]) -> Type:
    key = id(resolved)
    if key in _cache:
        return _cache[key]
    typ = resolved.get("type")
    if isinstance(typ, list):  # ["string", "null"]
        typ = next((x for x in typ if x != "null"), None)
    props = resolved.get("properties")
    extra = resolved.get("additionalProperties")
    items = resolved.get("items")
    if props is not None or typ == "object" or isinstance(extra, dict):
        t = Type(
            STRUCT if props is not None else MAP, atomic=resolved.get("x-kubernetes-map-type") == "atomic"
        )
        _cache[key] = t  # before recursing: definitions refer to themselves
        required = set(resolved.get("required") or ())
        for name, sub in (props or {}).items():
            child = of_schema(sub)
            t.fields[name] = child
            if name in required or (name in _VALUE_STRUCTS and child.kind == STRUCT):
                required.add(name)
        t.implicit = frozenset(required & t.fields.keys())
        if isinstance(extra, dict):
            t.elem = of_schema(extra)
        elif props is None or resolved.get("x-kubernetes-preserve-unknown-fields"):
            t.elem = DEDUCED
        return t
    if typ == "array" or isinstance(items, dict):
        t = Type(LIST)
        _cache[key] = t
        t.elem = of_schema(items) if isinstance(items, dict) else DEDUCED
        list_type = resolved.get("x-kubernetes-list-type")
        strategy = str(resolved.get("x-kubernetes-patch-strategy") or "")
        if list_type == "map":
            t.list_type, t.keys = ASSOCIATIVE, tuple(resolved.get("x-kubernetes-list-map-keys") or ())
        elif list_type == "set":
            t.list_type = SET
        elif list_type is None and "merge" in strategy.split(","):
            merge_key = resolved.get("x-kubernetes-patch-merge-key")
            t.list_type, t.keys = (ASSOCIATIVE, (merge_key,)) if merge_key else (SET, ())
        t.key_defaults = {k: v for k, v in _KEY_DEFAULTS.items() if k in t.keys}
        t.atomic = t.list_type == ATOMIC
        return t
    if typ in ("string", "integer", "number", "boolean"):
        return _SCALAR
    if resolved.get("x-kubernetes-int-or-string"):
        return _SCALAR
    return DEDUCED
