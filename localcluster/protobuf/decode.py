"""Turn a typed protobuf message into the JSON dict Go's `encoding/json` would have produced for it.

Go's generator writes every non-pointer field, zero or not (`generation: 0`, `selfLink: ""`), and a
pointer field only when set. JSON clients send `omitempty` output, so a zero scalar is dropped unless
its field is a pointer (`keep=True`: `replicas: 0` and `gracePeriodSeconds: 0` mean something);
embedded messages stay (`"status": {}` is what kubectl's JSON body carries too). That way the server
sees the same dict whichever encoding kubectl chose, and defaulting/validation are shared.
"""

from __future__ import annotations

import base64
import datetime as dt
import struct
from dataclasses import dataclass
from typing import Any

import orjson

from localcluster.protobuf.wire import FIXED64, LEN, VARINT, ProtobufError, iter_fields, read_varint, signed64

# Scalar types (a field's `type` is one of these, a `Map`, or a message schema).
STR, BYTES, INT, BOOL, DOUBLE = "string", "bytes", "int", "bool", "double"
TIME, MICROTIME, QUANTITY, INT_OR_STRING, RAW = "time", "microtime", "quantity", "intorstring", "raw"


@dataclass(frozen=True, slots=True)
class Map:
    """`map<string, value>`: on the wire a repeated entry message {1 key, 2 value}."""

    value: FieldType


@dataclass(frozen=True, slots=True)
class F:
    """One field: JSON name, type, repeated, pointer (keep zero values), inline (Go embedded struct)."""

    name: str
    type: FieldType
    repeated: bool = False
    keep: bool = False
    inline: bool = False


Schema = dict[int, F]
FieldType = str | Map | Schema


_ZERO_VALUES: dict[str, Any] = {STR: "", BYTES: "", QUANTITY: "0", INT: 0, BOOL: False, DOUBLE: 0.0}


def _zero(value: Any) -> bool:
    return value == "" or value is False or (value == 0 and not isinstance(value, bool)) or value is None


def _time(raw: bytes, micro: bool) -> str | None:
    seconds = nanos = 0
    for number, _, value in iter_fields(raw):
        if number == 1 and isinstance(value, int):
            seconds = signed64(value)
        elif number == 2 and isinstance(value, int):
            nanos = signed64(value)
    if seconds == 0 and nanos == 0:
        return None  # Go's zero metav1.Time marshals as null: the same as absent
    when = dt.datetime.fromtimestamp(seconds, dt.UTC)
    if micro:
        return when.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")  # metav1.Time is second precision in JSON


def _first_string(raw: bytes) -> str:
    for number, wire, value in iter_fields(raw):
        if number == 1 and wire == LEN and isinstance(value, bytes):
            return value.decode()
    return ""


def _int_or_string(raw: bytes) -> int | str:
    kind, int_val, str_val = 0, 0, ""
    for number, _, value in iter_fields(raw):
        if number == 1 and isinstance(value, int):
            kind = value
        elif number == 2 and isinstance(value, int):
            int_val = signed64(value)
        elif number == 3 and isinstance(value, bytes):
            str_val = value.decode()
    return str_val if kind == 1 else int_val


def _scalar(ftype: str, wire: int, value: int | bytes) -> Any:
    if ftype == STR:
        _expect(wire, LEN, ftype)
        assert isinstance(value, bytes)
        return value.decode()
    if ftype == BYTES:
        _expect(wire, LEN, ftype)
        assert isinstance(value, bytes)
        return base64.b64encode(value).decode()  # []byte is base64 in JSON
    if ftype == INT:
        _expect(wire, VARINT, ftype)
        assert isinstance(value, int)
        return signed64(value)
    if ftype == BOOL:
        _expect(wire, VARINT, ftype)
        return bool(value)
    if ftype == DOUBLE:
        _expect(wire, FIXED64, ftype)
        assert isinstance(value, int)
        return struct.unpack("<d", value.to_bytes(8, "little"))[0]
    _expect(wire, LEN, ftype)
    assert isinstance(value, bytes)
    if ftype in (TIME, MICROTIME):
        return _time(value, ftype == MICROTIME)
    if ftype == QUANTITY:
        return _first_string(value)
    if ftype == INT_OR_STRING:
        return _int_or_string(value)
    if ftype == RAW:  # runtime.RawExtension {1 raw}: the embedded object is JSON
        raw = next((v for n, _, v in iter_fields(value) if n == 1 and isinstance(v, bytes)), b"")
        try:
            return orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError as exc:
            raise ProtobufError(f"RawExtension is not JSON: {exc}") from exc
    raise ProtobufError(f"unknown field type {ftype!r}")


def _expect(wire: int, want: int, ftype: str) -> None:
    if wire != want:
        raise ProtobufError(f"{ftype} field with wire type {wire}")


def _value(ftype: FieldType, wire: int, value: int | bytes) -> Any:
    if isinstance(ftype, dict):
        _expect(wire, LEN, "message")
        assert isinstance(value, bytes)
        return decode_message(value, ftype)
    if isinstance(ftype, Map):
        raise ProtobufError("nested map")
    return _scalar(ftype, wire, value)


def decode_message(buf: bytes, schema: Schema) -> dict[str, Any]:
    """Decode `buf` against `schema`; fields the schema does not name are skipped, as Go skips them."""
    out: dict[str, Any] = {}
    for number, wire, value in iter_fields(buf):
        f = schema.get(number)
        if f is None:
            continue
        if isinstance(f.type, Map):
            _expect(wire, LEN, "map entry")
            assert isinstance(value, bytes)
            key, item = "", None
            for n, w, v in iter_fields(value):
                if n == 1:
                    key = _scalar(STR, w, v)
                elif n == 2:
                    item = _value(f.type.value, w, v)
            if item is None:  # an absent value is the zero value
                item = _ZERO_VALUES.get(f.type.value, {}) if isinstance(f.type.value, str) else {}
            out.setdefault(f.name, {})[key] = item
            continue
        if f.repeated and wire == LEN and isinstance(f.type, str) and f.type in (INT, BOOL):
            items = []  # packed repeated scalars
            pos = 0
            while pos < len(value):  # type: ignore[arg-type]
                v, pos = read_varint(value, pos)  # type: ignore[arg-type]
                items.append(signed64(v) if f.type == INT else bool(v))
            out.setdefault(f.name, []).extend(items)
            continue
        decoded = _value(f.type, wire, value)
        if f.inline and isinstance(decoded, dict):
            out.update(decoded)
        elif f.repeated:
            out.setdefault(f.name, []).append(decoded)
        elif decoded is None or (not f.keep and not isinstance(f.type, dict) and _zero(decoded)):
            out.pop(f.name, None)  # the last occurrence wins, as in protobuf
        else:
            out[f.name] = decoded
    return out
