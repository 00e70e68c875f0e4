"""The wire schema of Kubernetes' API messages, read from `kubernetes.json` (made by `generate.py`).

Each message is the list of its Go struct's protobuf fields in declaration order: field number, JSON
name (empty for an `,inline` embedded struct), type (a scalar name or a fully qualified message) and
flags. The flags carry what the `.proto` alone does not say but Go's `encoding/json` acts on:
whether the Go field is a pointer (an absent pointer is `nil`, an absent value is its zero) and
whether its JSON tag says `omitempty`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import orjson

from localcluster.protobuf.wire import LEN, VARINT, key

REPEATED, POINTER, OMITEMPTY, INLINE, MAP = 1, 2, 4, 8, 16

_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
TIME = _META + "Time"
MICROTIME = _META + "MicroTime"
FIELDS_V1 = _META + "FieldsV1"
QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
RAW_EXTENSION = "k8s.io.apimachinery.pkg.runtime.RawExtension"
# apiextensions' JSON-schema unions, which print as one of their members (MarshalJSON in its marshal.go).
_APIEXTENSIONS = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1."
EXTENSIONS_JSON = _APIEXTENSIONS + "JSON"
PROPS_OR_BOOL = _APIEXTENSIONS + "JSONSchemaPropsOrBool"
PROPS_OR_ARRAY = _APIEXTENSIONS + "JSONSchemaPropsOrArray"
PROPS_OR_STRINGS = _APIEXTENSIONS + "JSONSchemaPropsOrStringArray"
# meta's kinds every group version has (metav1.AddToGroupVersion): options (`policy/v1 DeleteOptions`)
# and the unversioned Status and discovery documents (written as `v1 Status`).
_SHARED_META_KINDS = frozenset(
    {
        "DeleteOptions",
        "CreateOptions",
        "UpdateOptions",
        "PatchOptions",
        "GetOptions",
        "ListOptions",
        "Status",
        "APIVersions",
        "APIGroupList",
        "APIGroup",
        "APIResourceList",
    }
)


@dataclass(frozen=True, slots=True)
class Field:
    number: int
    name: str
    type: str
    repeated: bool
    pointer: bool
    omitempty: bool
    inline: bool
    map: bool
    len_key: bytes  # the field's key for a length-delimited value, precomputed for the encoder
    varint_key: bytes


@dataclass(frozen=True, slots=True)
class Message:
    name: str
    fields: tuple[Field, ...]  # Go's declaration order: the order encoding/json writes
    by_number: dict[int, Field]
    wire_order: tuple[Field, ...]  # by number: the order Go's Marshal writes


@functools.cache
def _schema() -> dict[str, Any]:
    data = resources.files("localcluster.protobuf").joinpath("kubernetes.json").read_bytes()
    schema: dict[str, Any] = orjson.loads(data)
    return schema


@functools.cache
def message(name: str) -> Message:
    """The message `name` (fully qualified); KeyError for a message the schema does not hold."""
    fields = tuple(
        Field(
            number,
            json_name,
            type_,
            bool(flags & REPEATED),
            bool(flags & POINTER),
            bool(flags & OMITEMPTY),
            bool(flags & INLINE),
            bool(flags & MAP),
            key(number, LEN),
            key(number, VARINT),
        )
        for number, json_name, type_, flags in _schema()["messages"][name]
    )
    return Message(name, fields, {f.number: f for f in fields}, tuple(sorted(fields, key=lambda f: f.number)))


def is_message(type_name: str) -> bool:
    return type_name in _schema()["messages"]


def list_wrapper(type_name: str) -> str | None:
    """`ExtraValue` and `Verbs` are Go slices (`[]string`) wrapped in a message `{repeated items = 1}`."""
    item: str | None = _schema()["wrappers"].get(type_name)
    return item


def kind_message(api_version: str, kind: str) -> str | None:
    """The message of a top-level kind (`apps/v1` `Deployment`), or None if Kubernetes has no such kind."""
    kinds = _schema()["kinds"]
    found: str | None = kinds.get(api_version, {}).get(kind)
    if found is None and kind in _SHARED_META_KINDS:
        found = kinds["meta.k8s.io/v1"][kind]
    return found


def list_kind_message(api_version: str, kind: str) -> str | None:
    """The message of `<kind>List` for `kind`, as a LIST answer needs."""
    return kind_message(api_version, kind + "List")
