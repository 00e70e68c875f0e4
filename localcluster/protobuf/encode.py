"""Write a JSON object as the protobuf bytes Go's generated `Marshal` writes for the same Go object.

The inverse of `decode.py`, used for protobuf answers: `json.Unmarshal` into the Go struct, then
gogo's `Marshal`, which writes fields in number order, every non-pointer field (zero or not), a
pointer, slice or `[]byte` only when it is not nil, map entries sorted by key, and a zero Time as an
empty message.
"""

from __future__ import annotations

import base64
import datetime as dt
import struct
from typing import Any

import orjson

from localcluster.protobuf import schema as S
from localcluster.protobuf.decode import MAGIC
from localcluster.protobuf.wire import FIXED64, LEN, VARINT, ProtobufError, key, varint

_SCHEMA = S.PROPS_OR_BOOL.rsplit(".", 1)[0] + ".JSONSchemaProps"


def encode_body(obj: dict[str, Any]) -> bytes:
    """An object with apiVersion and kind, enveloped as the real server writes it (`k8s\\x00` + Unknown)."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    name = S.kind_message(api_version, kind)
    if name is None:
        raise ProtobufError(f"no protobuf message for {api_version} {kind}")
    return envelope(api_version, kind, encode_message(obj, name))


def envelope(api_version: str, kind: str, message: bytes) -> bytes:
    """`k8s\\x00` + runtime.Unknown{typeMeta, raw, contentEncoding, contentType}, the last two empty."""
    type_meta = _bytes(1, api_version.encode()) + _bytes(2, kind.encode())
    return MAGIC + _bytes(1, type_meta) + _bytes(2, message) + _bytes(3, b"") + _bytes(4, b"")


def encode_message(obj: dict[str, Any], name: str) -> bytes:
    out = bytearray()
    for f in S.message(name).wire_order:
        if f.inline:
            out += _bytes(f.number, encode_message(obj, f.type))
            continue
        value = obj.get(f.name)
        if f.map:
            entries = value or {}
            for k in sorted(entries):
                out += _bytes(f.number, _bytes(1, k.encode()) + _one(2, f.type, entries[k], pointer=False))
        elif f.repeated:
            for item in value or ():
                out += _one(f.number, f.type, item, pointer=False)
        elif value is None and f.pointer:
            continue
        elif f.type == "string":  # the common case, inlined
            data = (value or "").encode()
            out += f.len_key + varint(len(data)) + data
        elif f.type in _VARINTS:
            out += f.varint_key + varint(int(value or 0))
        else:
            out += _one(f.number, f.type, value, pointer=f.pointer)
    return bytes(out)


_VARINTS = frozenset({"int32", "int64", "bool"})


def _one(number: int, type_name: str, value: Any, *, pointer: bool) -> bytes:
    if value is None and (pointer or type_name == "bytes"):
        return b""
    if type_name == "string":
        return _bytes(number, (value or "").encode())
    if type_name in _VARINTS:
        return key(number, VARINT) + varint(int(value or 0))
    if type_name == "double":
        return key(number, FIXED64) + struct.pack("<d", float(value or 0))
    if type_name == "bytes":
        return _bytes(number, base64.b64decode(value))
    if type_name in (S.TIME, S.MICROTIME):
        return _bytes(number, _time(value, micro=type_name == S.MICROTIME))
    if type_name == S.QUANTITY:
        return _bytes(number, _bytes(1, str(value or "0").encode()))
    if type_name == S.INT_OR_STRING:
        is_str = isinstance(value, str)
        payload = (
            key(1, VARINT)
            + varint(int(is_str))
            + key(2, VARINT)
            + varint(0 if is_str else int(value or 0))
            + _bytes(3, value.encode() if is_str else b"")
        )
        return _bytes(number, payload)
    if type_name in (S.RAW_EXTENSION, S.FIELDS_V1, S.EXTENSIONS_JSON):
        return _bytes(number, b"" if value is None else _bytes(1, orjson.dumps(value)))
    if type_name == S.PROPS_OR_BOOL:  # UnmarshalJSON: a schema allows, or a bare boolean
        allows = key(1, VARINT) + varint(int(isinstance(value, dict) or bool(value)))
        return _bytes(
            number, allows + (_one(2, _SCHEMA, value, pointer=True) if isinstance(value, dict) else b"")
        )
    if type_name in (S.PROPS_OR_ARRAY, S.PROPS_OR_STRINGS):  # a schema, or a list of schemas / strings
        if isinstance(value, list):
            item_type = _SCHEMA if type_name == S.PROPS_OR_ARRAY else "string"
            return _bytes(number, b"".join(_one(2, item_type, v, pointer=False) for v in value))
        return _bytes(number, _one(1, _SCHEMA, value, pointer=True))
    item = S.list_wrapper(type_name)
    if item is not None:
        return _bytes(number, b"".join(_one(1, item, v, pointer=False) for v in value or ()))
    if not isinstance(value, dict | None):
        raise ProtobufError(f"{type_name}: expected an object, got {type(value).__name__}")
    return _bytes(number, encode_message(value or {}, type_name))


def _time(value: str | None, *, micro: bool) -> bytes:
    if not value:
        return b""  # the zero time
    when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    seconds = int((when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(seconds=1))
    nanos = when.microsecond * 1000 if micro else 0  # metav1.Time keeps seconds only, as its JSON does
    return key(1, VARINT) + varint(seconds) + key(2, VARINT) + varint(nanos)


def _bytes(number: int, data: bytes) -> bytes:
    return key(number, LEN) + varint(len(data)) + data
