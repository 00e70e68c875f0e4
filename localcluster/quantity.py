"""`resource.Quantity` parsing and printing, as much as quota and limit ranges need: decimal
and binary suffixes, exponents, and the canonical form the real server prints back."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# Decimal suffixes step by powers of 1000 from nano up, binary ones by powers of 1024 from Ki.
_SUFFIXES = {
    **{
        suffix: Decimal(10) ** (3 * step)
        for step, suffix in enumerate(("n", "u", "m", "", "k", "M", "G", "T", "P", "E"), -3)
    },
    **{f"{prefix}i": Decimal(2) ** (10 * step) for step, prefix in enumerate("KMGTPE", 1)},
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
