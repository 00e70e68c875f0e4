"""`resource.Quantity` parsing and printing, as much as quota and limit ranges need: decimal
and binary suffixes, exponents, and the canonical form the real server prints back."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]*)$")


def parse(value: object) -> Decimal | None:
    """The quantity's value, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value.strip())
    if match is None:
        return None
    number, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation:
        return None
    if suffix and suffix[0] in "eE" and suffix[1:].lstrip("+-").isdigit():
        return base * (Decimal(10) ** int(suffix[1:]))
    scale = _SUFFIXES.get(suffix)
    return None if scale is None else base * scale


def format_like(value: Decimal, resource: str) -> str:
    """A usage figure as the quota controller prints it: CPU in cores or millicores, memory and
    storage in binary units when they divide evenly, counts as plain integers."""
    if value == value.to_integral_value() and not resource.endswith(("memory", "storage")):
        return str(int(value))
    if resource.endswith("cpu"):
        return f"{int(value * 1000)}m"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        scale = _SUFFIXES[suffix]
        if value and value % scale == 0:
            return f"{int(value / scale)}{suffix}"
    return str(int(value)) if value == value.to_integral_value() else f"{int(value * 1000)}m"
