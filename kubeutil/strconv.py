"""Go's `strconv.ParseInt(s, 10, bits)`, `strconv.Atoi` and `strconv.Quote` where Kubernetes uses them.

Python's `int()` is more forgiving (spaces, `_` separators, any size), so a label value such as
`1_0` or a deletion cost past int32 would compare as a number here and not in Kubernetes; the
node-affinity and toleration `Gt`/`Lt` operators, the pod deletion cost and `IntOrString`
percentages all parse with this. `go_quote` renders a string as Go's `%q` does, for error
messages that Kubernetes writes into statuses and events.
"""

from __future__ import annotations

import re

_DECIMAL = re.compile(r"[+-]?[0-9]+")

_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def parse_int(text: str, bits: int = 64) -> int | None:
    """The value `strconv.ParseInt(text, 10, bits)` gives, or None where it returns an error."""
    if not _DECIMAL.fullmatch(text):
        return None
    value = int(text, 10)
    bound = 1 << (bits - 1)
    return value if -bound <= value < bound else None


def atoi(text: str) -> int:
    """`strconv.Atoi` (a 64-bit `int`); raises `ValueError` with Go's `*NumError` message."""
    value = parse_int(text, 64)
    if value is None:
        reason = "value out of range" if _DECIMAL.fullmatch(text) else "invalid syntax"
        raise ValueError(f"strconv.Atoi: parsing {go_quote(text)}: {reason}")
    return value


def go_quote(text: str) -> str:
    """`strconv.Quote` (Go's `%q` of a string): double quotes, Go's escapes for the unprintable."""
    out = ['"']
    for ch in text:
        escaped = _GO_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)
