"""Protobuf request bodies (`application/vnd.kubernetes.protobuf`) decoded into the JSON dicts the server handles.

kubectl's typed clients (`create configmap|secret|namespace|deployment|service`) send protobuf; the
rest of the server speaks JSON dicts, so decoding at the door keeps one code path. Responses stay JSON,
which every client accepts. The envelope is the 4 magic bytes `k8s\\x00` and a `runtime.Unknown`
whose `raw` holds the typed message named by its TypeMeta.
"""

from __future__ import annotations

from typing import Any

from localcluster.protobuf.decode import decode_message
from localcluster.protobuf.schemas import KINDS, TYPE_META
from localcluster.protobuf.wire import ProtobufError, iter_fields

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

__all__ = ["CONTENT_TYPE", "MAGIC", "ProtobufError", "UnknownKindError", "decode_body"]


class UnknownKindError(ProtobufError):
    """The envelope names a kind we have no schema for (the server answers 415, as for any unreadable body)."""


def decode_body(raw: bytes) -> dict[str, Any]:
    """Decode an enveloped protobuf object into its JSON form, `apiVersion` and `kind` included."""
    if not raw.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    type_meta: dict[str, Any] = {}
    payload = b""
    for number, _, value in iter_fields(raw[len(MAGIC) :]):
        if not isinstance(value, bytes):
            continue
        if number == 1:
            type_meta = decode_message(value, TYPE_META)
        elif number == 2:
            payload = value  # kept as bytes: the typed message is decoded below
        elif number == 3 and value:
            raise ProtobufError(f"unsupported contentEncoding {value.decode(errors='replace')!r}")
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    schema = KINDS.get((group, kind))
    if schema is None:
        raise UnknownKindError(f"no protobuf schema for {api_version} {kind}")
    obj = decode_message(payload, schema)
    return {"apiVersion": api_version, "kind": kind, **obj}
