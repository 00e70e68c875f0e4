"""Kubernetes' own OpenAPI definitions for the built-in kinds (from `kubernetes-validate`).

The real server knows each built-in kind's fields from its Go types: it drops unknown fields
when decoding (pruning) and takes strategic-merge-patch keys from struct tags. The same facts
are in the published OpenAPI definitions (`properties`, `x-kubernetes-patch-strategy`,
`x-kubernetes-patch-merge-key`), so we read those rather than keep hand-written lists.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import orjson

from localcluster.builtin import decoding

Schema = dict[str, Any]
SCHEMA_VERSION = "v1.32.0-local"
_PRESERVE = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
}


@functools.cache
def definitions() -> dict[str, Schema]:
    root = (
        resources.files("kubernetes_validate")
        / "kubernetes-json-schema"
        / SCHEMA_VERSION
        / "_definitions.json"
    )
    data: dict[str, Any] = orjson.loads(root.read_bytes())
    defs: dict[str, Schema] = data["$defs"]
    return defs


@functools.cache
def definition_name(group: str, version: str, kind: str) -> str | None:
    """The definition whose `x-kubernetes-group-version-kind` names this kind."""
    for name, schema in definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            if gvk.get("group", "") == group and gvk.get("version") == version and gvk.get("kind") == kind:
                return name
    return None


def resolve(schema: Schema | None) -> Schema | None:
    """Follow `$ref`s (and single-item `allOf`) to the schema itself."""
    while schema is not None:
        ref = schema.get("$ref")
        if ref is None:
            all_of = schema.get("allOf")
            if all_of and len(all_of) == 1:
                schema = all_of[0]
                continue
            return schema
        name = ref.rsplit("/", 1)[-1]
        if name in _PRESERVE:
            return None
        schema = definitions().get(name)
    return None


def child(schema: Schema | None, key: str) -> Schema | None:
    """The schema of field `key` of an object schema (None when unknown or free-form)."""
    schema = resolve(schema)
    if schema is None:
        return None
    props = schema.get("properties")
    if props is not None and key in props:
        return props[key]  # type: ignore[no-any-return]
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        return extra
    return None


def items(schema: Schema | None) -> Schema | None:
    schema = resolve(schema)
    if schema is None:
        return None
    it = schema.get("items")
    return it if isinstance(it, dict) else None


class _Node:
    """A schema compiled for pruning: which keys an object keeps and how to prune each value.
    Resolving `$ref`s once per definition instead of once per object is what keeps pruning a
    pod cheap (it runs on every write). It also holds what the Go decoder checks while it
    prunes: each scalar field's Go type and which values are `resource.Quantity`s."""

    __slots__ = ("extra", "extra_quantity", "item", "nullable", "owner", "props", "quantities", "scalars")

    def __init__(self) -> None:
        self.props: dict[str, _Node | None] | None = None
        #: Fields whose null survives decoding: `metav1.Time` is a struct Go writes as null
        #: when zero (`creationTimestamp: null`, `lastProbeTime: null`); every other null is
        #: decoded as "unset" and dropped, as the real server drops it.
        self.nullable: frozenset[str] = frozenset()
        self.extra: _Node | None = None
        self.item: _Node | None = None
        #: The Go struct this object decodes into (`Toleration`), for decode errors.
        self.owner = ""
        #: Scalar fields: key -> (JSON schema type, Go type), e.g. ("integer", "int64").
        self.scalars: dict[str, tuple[str, str]] = {}
        #: Fields, or (`extra_quantity`) map values, that are `resource.Quantity`s.
        self.quantities: frozenset[str] = frozenset()
        self.extra_quantity = False


_compiled: dict[int, _Node | None] = {}


#: Time fields that are pointers in the Go types (`*metav1.Time`): a null there is unset, so
#: dropped like any other null; the schema alone cannot tell them from the struct-valued ones.
_POINTER_TIMES = frozenset(
    {
        "deletionTimestamp",
        "startTime",
        "completionTime",
        "lastScheduleTime",
        "lastSuccessfulTime",
        "lastScaleTime",
        "acquireTime",
        "renewTime",
        "expirationTimestamp",
    }
)


def _is_time(schema: Schema) -> bool:
    refs = [schema.get("$ref"), *(s.get("$ref") for s in schema.get("allOf") or () if isinstance(s, dict))]
    return any(isinstance(r, str) and r.endswith((".meta.v1.Time", ".meta.v1.MicroTime")) for r in refs)


def _ref_name(schema: Schema | None) -> str:
    """The definition a schema refers to (`io.k8s.api.core.v1.Toleration`), or ""."""
    if not isinstance(schema, dict):
        return ""
    refs = [schema.get("$ref"), *(s.get("$ref") for s in schema.get("allOf") or () if isinstance(s, dict))]
    return next((r.rsplit("/", 1)[-1] for r in refs if isinstance(r, str)), "")


_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_GO_TYPES = {
    ("integer", "int32"): "int32",
    ("integer", "int64"): "int64",
    ("integer", None): "int64",
    ("number", "double"): "float64",
    ("number", None): "float64",
    ("boolean", None): "bool",
    ("string", None): "string",
}


def _scalar(schema: Schema) -> tuple[str, str] | None:
    """(JSON type, Go type) of a plain scalar field; None for anything else (refs, []byte, objects)."""
    if "$ref" in schema or "allOf" in schema:
        return None
    types = schema.get("type")
    kind = next((t for t in types if t != "null"), None) if isinstance(types, list) else types
    go = _GO_TYPES.get((str(kind), schema.get("format")))
    return (str(kind), go) if go is not None else None


def _compile(schema: Schema | None, owner: str = "") -> _Node | None:
    resolved = resolve(schema)
    if resolved is None:
        return None
    key = id(resolved)
    if key in _compiled:
        return _compiled[key]
    node = _Node()
    node.owner = (_ref_name(schema) or owner).rsplit(".", 1)[-1]
    _compiled[key] = node  # before recursing: definitions may refer to themselves
    props = resolved.get("properties")
    extra = resolved.get("additionalProperties")
    items_ = resolved.get("items")
    if props is not None:
        node.props = {k: _compile(v) for k, v in props.items()}
        node.nullable = frozenset(k for k, v in props.items() if _is_time(v) and k not in _POINTER_TIMES)
        node.scalars = {
            k: sc for k, v in props.items() if isinstance(v, dict) and (sc := _scalar(v)) is not None
        }
        node.quantities = frozenset(k for k, v in props.items() if _ref_name(v) == _QUANTITY)
    elif isinstance(extra, dict):
        node.extra = _compile(extra)
        node.extra_quantity = _ref_name(extra) == _QUANTITY
    if isinstance(items_, dict):
        node.item = _compile(items_)
    if node.props is None and node.extra is None and node.item is None and not node.extra_quantity:
        _compiled[key] = None
        return None
    return node


def _prune_node(value: Any, node: _Node, path: str, dropped: list[str]) -> None:
    """`path` is the JSON path of `value` as the strict decoder names it (`spec.containers[0]`),
    for `fieldValidation`; it costs one short string per visited field."""
    if isinstance(value, dict):
        props = node.props
        if props is not None:
            for key in list(value):
                if key not in props:
                    if key not in ("apiVersion", "kind"):
                        del value[key]
                        dropped.append(f"{path}.{key}" if path else key)
                    continue
                if value[key] is None and key not in node.nullable:
                    del value[key]
                    continue
                scalar = node.scalars.get(key)
                if scalar is not None:
                    decoding.check_scalar(value[key], scalar, node.owner, f"{path}.{key}" if path else key)
                elif key in node.quantities:
                    decoding.check_quantity(value[key])
                sub = props[key]
                if sub is not None:
                    _prune_node(value[key], sub, f"{path}.{key}" if path else key, dropped)
        elif node.extra_quantity:
            for sub_value in value.values():
                decoding.check_quantity(sub_value)
        elif node.extra is not None:
            for key, sub_value in value.items():
                _prune_node(sub_value, node.extra, f"{path}.{key}" if path else key, dropped)
    elif isinstance(value, list) and node.item is not None:
        for i, element in enumerate(value):
            _prune_node(element, node.item, f"{path}[{i}]", dropped)


def prune(value: Any, schema: Schema | None) -> list[str]:
    """Drop, in place, object fields the schema does not declare (as the decoder drops them);
    return their paths."""
    dropped: list[str] = []
    node = _compile(schema)
    if node is not None:
        _prune_node(value, node, "", dropped)
    return dropped


def prune_kind(obj: dict[str, Any], group: str, version: str, kind: str) -> list[str]:
    """As `prune`; raises `decoding.DecodeError` for a value the Go decoder would refuse."""
    name = definition_name(group, version, kind)
    if name is not None:
        dropped: list[str] = []
        node = _compile(definitions()[name], owner=name)
        if node is not None:
            _prune_node(obj, node, "", dropped)
        return dropped
    return []


def kind_schema(group: str, version: str, kind: str) -> Schema | None:
    name = definition_name(group, version, kind)
    return definitions()[name] if name is not None else None
