"""The SMD type of each served kind, and the fields its strategy resets (`GetResetFields`):
a write to the main resource of a kind with a status subresource never owns status, a write to
`/status` owns nothing else."""

from __future__ import annotations

from typing import Any

from localcluster.builtin import schemas
from localcluster.fieldmanager.typeinfo import Type, of_schema
from localcluster.registry import ResourceType

_types: dict[int, Type] = {}
_OWN = ("metadata", "status", "apiVersion", "kind")


def kind_type(rt: ResourceType) -> Type:
    schema: Any = getattr(rt.strategy, "schema", None)
    if not isinstance(schema, dict):
        schema = schemas.kind_schema(rt.group, rt.version, rt.kind)
    key = id(schema)
    found = _types.get(key)
    if found is None:
        found = _types[key] = of_schema(schema, root=True)
    return found


def reset_fields(rt: ResourceType, subresource: str | None, obj: dict[str, Any]) -> tuple[str, ...]:
    if subresource == "status":
        return tuple(k for k in obj if k not in _OWN)
    if getattr(rt.strategy, "has_status_subresource", False):
        return ("status",)
    return ()
