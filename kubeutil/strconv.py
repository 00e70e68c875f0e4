"""Go's `strconv.ParseInt(s, 10, bits)` for the places Kubernetes reads integers out of strings.

Python's `int()` is more forgiving (spaces, `_` separators, any size), so a label value such as
`1_0` or a deletion cost past int32 would compare as a number here and not in Kubernetes; the
node-affinity and toleration `Gt`/`Lt` operators and the pod deletion cost all parse with this.
"""

from __future__ import annotations

import re

_DECIMAL = re.compile(r"[+-]?[0-9]+")


def parse_int(text: str, bits: int = 64) -> int | None:
    """The value `strconv.ParseInt(text, 10, bits)` gives, or None where it returns an error."""
    if not _DECIMAL.fullmatch(text):
        return None
    value = int(text, 10)
    bound = 1 << (bits - 1)
    return value if -bound <= value < bound else None
