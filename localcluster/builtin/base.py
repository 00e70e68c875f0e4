"""The strategy every built-in kind starts from: schema pruning and the name rules."""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubeutil.timestamps import parse_time
from localcluster import errors
from localcluster.builtin import decoding, schemas
from localcluster.builtin.descriptions import DESCRIPTIONS
from localcluster.registry import FieldError, Obj, Strategy, TableColumn


class BuiltinStrategy(Strategy):
    """Prunes unknown fields with the kind's published schema (as the Go decoder drops them)."""

    group: str = ""
    version: str = "v1"
    kind: str = ""
    #: Names that must be DNS-1123 labels (namespaces, services) rather than subdomains.
    label_names: bool = False

    #: The status a new object starts with, as the kind's `PrepareForCreate` writes it (the
    #: counters the real server always serializes); None: the object's own, or none at all with
    #: a status subresource.
    initial_status: Obj | None = None

    #: Paths the last `prune` dropped, read by `ObjectAPI` right after it (same call, no await
    #: between) for `fieldValidation` Strict / Warn.
    last_pruned: list[str] = []  # replaced per call, never mutated

    def prepare_for_create(self, obj: Obj) -> None:
        super().prepare_for_create(obj)
        if self.initial_status is not None:
            obj["status"] = dict(self.initial_status)

    def prune(self, obj: Obj) -> None:
        """Also where a value the Go decoder cannot read is refused, with its 400."""
        try:
            self.last_pruned = schemas.prune_kind(obj, self.group, self.version, self.kind)
        except decoding.DecodeError as exc:
            raise errors.bad_request(
                f'{self.kind} in version "{self.version}" cannot be handled as a {self.kind}: {exc}'
            ) from exc


class SpecStrategy(BuiltinStrategy):
    """A kind whose defaults all live under `spec`. The decoder gives a missing spec its zero
    value, an empty object; a spec that is not an object gets no defaults and is left for
    validation to refuse."""

    def default(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            self.default_spec(spec)

    def default_spec(self, spec: dict[str, Any]) -> None:
        """The kind's `SetDefaults_*` on its spec."""

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [FieldError.required("spec")]
        return self.validate_spec(spec, obj, old)

    def validate_spec(self, spec: dict[str, Any], obj: Obj, old: Obj | None) -> list[FieldError]:
        """The kind's checks, on a spec that is an object (`obj` for the rest of the object)."""
        return []


def age(timestamp: str | None, now: dt.datetime | None = None) -> str:
    """kubectl's `HumanDuration` of the time since `timestamp`."""
    then = parse_time(timestamp)
    if then is None:
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


def columns(*specs: tuple[str, str] | tuple[str, str, int], kind: str = "") -> list[TableColumn]:
    """Column definitions from (name, type[, priority]); priority 1 is what `-o wide` adds.
    With `kind`, each column gets the real printer's description where one is known."""
    described = DESCRIPTIONS.get(kind, {})
    out = []
    for spec in specs:
        name, type_ = spec[0], spec[1]
        priority = spec[2] if len(spec) > 2 else 0  # type: ignore[misc]
        out.append(TableColumn(name=name, type=type_, priority=priority, description=described.get(name, "")))
    return out


def format_label_selector(selector: Any) -> str:
    """`metav1.FormatLabelSelector`: matchLabels and matchExpressions as a selector string."""
    if not isinstance(selector, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(sorted(values))})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(sorted(values))})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


def format_labels(labels: Any) -> str:
    """`labels.FormatLabels`: `k=v` pairs sorted by key, `<none>` when there are none."""
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def workload_columns(*specs: tuple[str, str], kind: str = "") -> list[TableColumn]:
    """A workload's columns: its own, then AGE and the wide CONTAINERS, IMAGES and SELECTOR that
    kubectl's printers end every pod-template owner's table with."""
    return columns(
        *specs,
        ("Age", "string"),
        ("Containers", "string", 1),
        ("Images", "string", 1),
        ("Selector", "string", 1),
        kind=kind,
    )


def workload_cells(template: Any, selector: str) -> list[Any]:
    """The cells under `workload_columns`' last four: no age (the client works it out from the
    object), the pod template's container names and images, and the selector as printed."""
    containers = get_path(template, "spec", "containers", default=[])
    names = ",".join(str(c.get("name", "")) for c in containers if isinstance(c, dict))
    images = ",".join(str(c.get("image", "")) for c in containers if isinstance(c, dict))
    return [None, names, images, selector]


def get_path(obj: Any, *path: str, default: Any = None) -> Any:
    cur = obj
    for part in path:
        if not isinstance(cur, dict):
            return default
        cur = cur.get(part)
    return default if cur is None else cur


def field_values(obj: Obj, *paths: str) -> dict[str, str]:
    """Field-selector values of fields named by their dotted path (`spec.nodeName`), as the
    kinds' `ToSelectableFields` give them: the value as a string, "" when absent or empty."""
    return {path: str(get_path(obj, *path.split(".")) or "") for path in paths}


def get_int(obj: Any, *path: str, default: int = 0) -> int:
    """An integer field, or `default` when it is absent, null or not an integer (a controller
    reading a field validation let through never crashes on it)."""
    value = get_path(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else default
