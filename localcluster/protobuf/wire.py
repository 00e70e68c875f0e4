"""The protobuf wire format, read and written by hand.

Why not the `protobuf` package: it would decode into its own message objects, which still have to be
walked field by field to print Kubernetes' JSON (inline structs, omitempty, Time, Quantity,
IntOrString, RawExtension are none of protobuf's JSON mapping), so the library would only replace
this module's ~100 lines, at the cost of a runtime dependency and of building descriptors from the
`.proto` files. The wire format is four wire types, stable since 2008; the field numbers and types
come from Kubernetes' `generated.proto` files through `kubernetes.json`.
"""

from __future__ import annotations

from collections.abc import Iterator

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5


class ProtobufError(ValueError):
    """Malformed protobuf bytes: truncated, a bad varint or a wire type Kubernetes never uses."""


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Return (value, next position); at most 10 bytes, as the format allows."""
    if pos < len(buf) and buf[pos] < 0x80:
        return buf[pos], pos + 1
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ProtobufError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint longer than 10 bytes")


def signed64(value: int) -> int:
    """int32/int64 fields: negatives travel as 64-bit two's complement (not zigzag)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def iter_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yield (field number, wire type, value): an int for varint/fixed, bytes for length-delimited.

    Groups (wire types 3/4) are deprecated and never produced by Kubernetes' generator: an error.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("field number 0")
        if wire == VARINT:
            value, pos = read_varint(buf, pos)
            yield number, wire, value
        elif wire == LEN:
            size, pos = read_varint(buf, pos)
            if pos + size > end:
                raise ProtobufError(f"field {number}: length {size} past the end")
            yield number, wire, bytes(buf[pos : pos + size])
            pos += size
        elif wire == FIXED64:
            if pos + 8 > end:
                raise ProtobufError("truncated fixed64")
            yield number, wire, int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wire == FIXED32:
            if pos + 4 > end:
                raise ProtobufError("truncated fixed32")
            yield number, wire, int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire} (field {number})")


def varint(value: int) -> bytes:
    """Encode an int32/int64/bool/enum: negatives as 64-bit two's complement (ten bytes), as Go writes them."""
    if 0 <= value < 0x80:
        return _SMALL[value]
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = [bytes([i]) for i in range(0x80)]


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)
