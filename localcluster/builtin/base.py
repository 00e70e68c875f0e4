"""The strategy every built-in kind starts from: schema pruning and the name rules."""

from __future__ import annotations

import datetime as dt
from typing import Any

from localcluster.builtin import schemas
from localcluster.registry import Obj, Strategy, TableColumn


class BuiltinStrategy(Strategy):
    """Prunes unknown fields with the kind's published schema (as the Go decoder drops them)."""

    group: str = ""
    version: str = "v1"
    kind: str = ""
    #: Names that must be DNS-1123 labels (namespaces, services) rather than subdomains.
    label_names: bool = False

    #: Paths the last `prune` dropped, read by `ObjectAPI` right after it (same call, no await
    #: between) for `fieldValidation` Strict / Warn.
    last_pruned: list[str] = []  # replaced per call, never mutated

    def prune(self, obj: Obj) -> None:
        self.last_pruned = schemas.prune_kind(obj, self.group, self.version, self.kind)


def age(timestamp: str | None, now: dt.datetime | None = None) -> str:
    """kubectl's `HumanDuration` of the time since `timestamp`."""
    if not timestamp:
        return "<unknown>"
    try:
        then = dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    seconds = int(((now or dt.datetime.now(dt.UTC)) - then).total_seconds())
    if seconds < 0:
        seconds = 0
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    return f"{days}d" if days < 365 * 2 else f"{days // 365}y"


def columns(*specs: tuple[str, str] | tuple[str, str, int]) -> list[TableColumn]:
    out = []
    for spec in specs:
        name, type_ = spec[0], spec[1]
        priority = spec[2] if len(spec) > 2 else 0  # type: ignore[misc]
        out.append(TableColumn(name=name, type=type_, priority=priority))
    return out


def get_path(obj: Any, *path: str, default: Any = None) -> Any:
    cur = obj
    for part in path:
        if not isinstance(cur, dict):
            return default
        cur = cur.get(part)
    return default if cur is None else cur


def get_int(obj: Any, *path: str, default: int = 0) -> int:
    """An integer field, or `default` when it is absent, null or not an integer (a controller
    reading a field validation let through never crashes on it)."""
    value = get_path(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else default
