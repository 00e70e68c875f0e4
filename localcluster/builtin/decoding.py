"""What kube-apiserver's JSON decoder refuses before any validation runs (400, not 422).

The Go decoder fills typed structs: a string where an `int64` goes, or a quantity that does not
parse, fails the request as a whole ("... cannot be handled as a Pod: ..."). Schema pruning
walks every field already, so it asks here about each scalar and each `resource.Quantity`.
"""

from __future__ import annotations

import re
from typing import Any

from localcluster import quantity

QUANTITY_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_QUANTITY_SHAPE = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_INDEX = re.compile(r"\[\d+\]")
_INT_BOUNDS = {"int32": 2**31, "int64": 2**63}


class DecodeError(Exception):
    """The decoder's own words (`json: cannot unmarshal ...`); the caller adds the kind."""


def _json_value(value: Any) -> str:
    """`UnmarshalTypeError.Value`: the JSON kind of what was sent."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array"


def check_scalar(value: Any, scalar: tuple[str, str], owner: str, path: str) -> None:
    """`encoding/json`'s type check of one struct field (Go type `scalar[1]`)."""
    kind, go = scalar
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            if -_INT_BOUNDS[go] <= value < _INT_BOUNDS[go]:
                return
            shown = f"number {value}"
        elif isinstance(value, float):
            shown = f"number {value!r}"
        else:
            shown = _json_value(value)
    elif kind == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return
        shown = _json_value(value)
    elif kind == "boolean":
        if isinstance(value, bool):
            return
        shown = _json_value(value)
    else:
        if isinstance(value, str):
            return
        shown = _json_value(value)
    field = _INDEX.sub("", path)
    raise DecodeError(f"json: cannot unmarshal {shown} into Go struct field {owner}.{field} of type {go}")


def check_quantity(value: Any) -> None:
    """`Quantity.UnmarshalJSON`: numbers and parsable strings; anything else is refused."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return
    text = value.strip() if isinstance(value, str) else str(value).lower()
    if not _QUANTITY_SHAPE.match(text):
        raise DecodeError(QUANTITY_FORMAT)
    if quantity.parse(text) is None:
        raise DecodeError("unable to parse quantity's suffix")
