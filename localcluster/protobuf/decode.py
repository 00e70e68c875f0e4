"""Turn a protobuf message into the JSON dict Go's `encoding/json` would print for the same Go object.

The real server decodes a protobuf body into its Go struct (gogo's generated `Unmarshal`) and
everything after works on that struct; a JSON client's body is `json.Marshal` of the same struct. So
the decoder walks the Go struct's fields (from the schema), not the wire: a field absent from the
wire is its Go zero value, and is printed as Go prints it: omitted when `omitempty` and empty, else
`null` for a nil pointer, slice or map, `0`/`""`/`false` for a zero scalar, `{}`-with-its-own-fields
for a zero struct (`"status": {}`, pod templates' `"creationTimestamp": null`). Kubernetes' special
types print their own way: Time as RFC 3339 seconds (the protobuf nanos are dropped, as Go drops
them), MicroTime with microseconds, Quantity as its string, IntOrString as an int or a string,
RawExtension and FieldsV1 as the JSON they carry.
"""

from __future__ import annotations

import base64
import datetime as dt
import struct
from typing import Any

import orjson

from localcluster.protobuf import schema as S
from localcluster.protobuf.wire import FIXED64, LEN, VARINT, ProtobufError, iter_fields, read_varint, signed64

MAGIC = b"k8s\x00"
_ZERO: dict[str, Any] = {"string": "", "int32": 0, "int64": 0, "bool": False, "double": 0}
_NIL = object()  # a Go nil (pointer, slice, map): `null` unless omitempty
Raw = list[tuple[int, int | bytes]]  # (wire type, value) of each occurrence of one field


class UnknownKindError(ProtobufError):
    """The envelope names a kind Kubernetes has no protobuf message for (a custom resource): 415."""


def decode_body(raw: bytes, *, default_api_version: str = "", default_kind: str = "") -> dict[str, Any]:
    """Decode an enveloped object (`k8s\\x00` + runtime.Unknown) into its JSON form with apiVersion and kind.

    An envelope without apiVersion or kind is read as the defaults (the kind the URL names), as the
    real server's decoder does."""
    if not raw.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    api_version = kind = encoding = ""
    payload = b""
    for number, wire, value in iter_fields(raw[len(MAGIC) :]):
        if wire != LEN or not isinstance(value, bytes):
            continue
        if number == 1:
            for n, w, v in iter_fields(value):
                if n in (1, 2) and w == LEN and isinstance(v, bytes):
                    if n == 1:
                        api_version = v.decode()
                    else:
                        kind = v.decode()
        elif number == 2:
            payload = value
        elif number == 3:
            encoding = value.decode(errors="replace")
    if encoding:
        raise ProtobufError(f"unsupported contentEncoding {encoding!r}")
    api_version, kind = api_version or default_api_version, kind or default_kind
    name = S.kind_message(api_version, kind)
    if name is None:
        raise UnknownKindError(f"no protobuf message for {api_version} {kind}")
    return {"apiVersion": api_version, "kind": kind, **decode_message(payload, name)}


def decode_message(buf: bytes, name: str) -> dict[str, Any]:
    """Decode `buf` as message `name`; fields the schema does not name are skipped, as Go skips them."""
    msg = S.message(name)
    raw: dict[int, Raw] = {}
    for number, wire, value in iter_fields(buf):
        if number in msg.by_number:
            raw.setdefault(number, []).append((wire, value))
    out: dict[str, Any] = {}
    for f in msg.fields:
        occurrences = raw.get(f.number)
        if f.inline:
            out.update(decode_message(_joined(occurrences), f.type))
            continue
        value = _field(f, occurrences)
        if f.omitempty and (value is _NIL if f.pointer else _empty(value)):
            continue  # a pointer to a zero value is not empty: `replicas: 0` stays
        out[f.name] = None if value is _NIL else value
    return out


def _empty(value: Any) -> bool:
    """Go's omitempty: false, 0, "", nil and empty slices and maps; never a struct."""
    if value is _NIL or value is False or value == "":
        return True
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == 0
    return isinstance(value, list) and not value


def _field(f: S.Field, occurrences: Raw | None) -> Any:
    if f.map:
        if not occurrences:
            return _NIL
        entries: dict[str, Any] = {}
        for wire, entry in occurrences:
            _expect(wire, LEN, "map entry")
            assert isinstance(entry, bytes)
            key, item = "", None
            for n, w, v in iter_fields(entry):
                if n == 1:
                    key = _string(w, v)
                elif n == 2:
                    item = [(w, v)]
            entries[key] = _single(f.type, item, pointer=False)
        return entries
    if f.repeated:
        if not occurrences:
            return _NIL
        items: list[Any] = []
        for wire, value in occurrences:
            if wire == LEN and f.type in ("int32", "int64", "bool"):  # packed
                assert isinstance(value, bytes)
                pos = 0
                while pos < len(value):
                    v, pos = read_varint(value, pos)
                    items.append(bool(v) if f.type == "bool" else signed64(v))
            else:
                items.append(_single(f.type, [(wire, value)], pointer=False))
        return items
    return _single(f.type, occurrences, pointer=f.pointer)


def _single(type_name: str, occurrences: Raw | None, *, pointer: bool) -> Any:
    """One value of `type_name` from its occurrences (the last wins; messages merge); absent → Go's zero."""
    if type_name in _ZERO:
        if not occurrences:
            return _NIL if pointer else _ZERO[type_name]
        wire, value = occurrences[-1]
        if type_name == "string":
            return _string(wire, value)
        if type_name == "double":
            _expect(wire, FIXED64, type_name)
            assert isinstance(value, int)
            number = struct.unpack("<d", value.to_bytes(8, "little"))[0]
            return (
                int(number) if number.is_integer() and abs(number) < 1e21 else number
            )  # Go prints 1, not 1.0
        _expect(wire, VARINT, type_name)
        assert isinstance(value, int)
        return bool(value) if type_name == "bool" else signed64(value)
    if type_name == "bytes":
        if not occurrences:
            return _NIL  # a nil []byte: null, or omitted
        wire, value = occurrences[-1]
        _expect(wire, LEN, type_name)
        assert isinstance(value, bytes)
        return base64.b64encode(value).decode()
    if occurrences is None and pointer:
        return _NIL
    buf = _joined(occurrences)
    if type_name in (S.TIME, S.MICROTIME):
        return _time(buf, micro=type_name == S.MICROTIME)
    if type_name == S.QUANTITY:
        return _scalar_at(buf, 1, "string", "") or "0"
    if type_name == S.INT_OR_STRING:
        kind = _scalar_at(buf, 1, "int64", 0)
        return _scalar_at(buf, 3, "string", "") if kind == 1 else _scalar_at(buf, 2, "int64", 0)
    if type_name in (S.RAW_EXTENSION, S.FIELDS_V1, S.EXTENSIONS_JSON):
        return _embedded_json(buf)
    if type_name in (S.PROPS_OR_BOOL, S.PROPS_OR_ARRAY, S.PROPS_OR_STRINGS):
        return _schema_union(type_name, decode_message(buf, type_name))
    item = S.list_wrapper(type_name)
    if item is not None:
        return [_single(item, [(w, v)], pointer=False) for n, w, v in iter_fields(buf) if n == 1]
    if not S.is_message(type_name):
        raise ProtobufError(f"no schema for message {type_name}")
    return decode_message(buf, type_name)


def _schema_union(type_name: str, union: dict[str, Any]) -> Any:
    """A JSON-schema union prints as the member that is set (apiextensions' marshal.go)."""
    if type_name == S.PROPS_OR_BOOL:
        return union["Allows"] if union.get("Schema") is None else union["Schema"]
    many = union.get("JSONSchemas" if type_name == S.PROPS_OR_ARRAY else "Property")
    return many if many else union.get("Schema")


def _joined(occurrences: Raw | None) -> bytes:
    """An embedded message sent in several pieces is their merge: the concatenation of the bytes."""
    parts = []
    for wire, value in occurrences or ():
        _expect(wire, LEN, "message")
        assert isinstance(value, bytes)
        parts.append(value)
    return b"".join(parts)


def _scalar_at(buf: bytes, number: int, type_name: str, zero: Any) -> Any:
    found = [(w, v) for n, w, v in iter_fields(buf) if n == number]
    return _single(type_name, found, pointer=False) if found else zero


def _time(buf: bytes, *, micro: bool) -> str | None:
    if not buf:
        return None  # Go's zero time is marshalled to nothing, and printed as null
    seconds = _scalar_at(buf, 1, "int64", 0)
    nanos = _scalar_at(buf, 2, "int64", 0)
    when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    text = f"{when.year:04d}-{when:%m-%dT%H:%M:%S}"
    return f"{text}.{nanos // 1000:06d}Z" if micro else f"{text}Z"


def _embedded_json(buf: bytes) -> Any:
    """RawExtension / FieldsV1 `{1: raw}`: JSON bytes (printed as is) or an enveloped protobuf object."""
    found = [v for n, w, v in iter_fields(buf) if n == 1 and w == LEN and isinstance(v, bytes)]
    if not found:
        return None  # a nil Raw prints as null
    raw = found[-1]
    if raw.startswith(MAGIC):
        return decode_body(raw)
    try:
        return orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError as exc:
        raise ProtobufError(f"embedded object is neither JSON nor protobuf: {exc}") from exc


def _string(wire: int, value: int | bytes) -> str:
    _expect(wire, LEN, "string")
    assert isinstance(value, bytes)
    return value.decode()


def _expect(wire: int, want: int, what: str) -> None:
    if wire != want:
        raise ProtobufError(f"{what} field with wire type {wire}")
