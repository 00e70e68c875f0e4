"""An object's `metadata`, read the way every controller reads it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def object_meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`metadata`, or an empty mapping: a tombstone's last state or a hand-built object may lack
    it, and a reader that asks for a name or a UID should get nothing rather than fail."""
    return obj.get("metadata") or {}
