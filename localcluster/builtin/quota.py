"""core/v1 ResourceQuotas and LimitRanges: validation and kubectl's columns. Usage and the
admission that enforces both live in `localcluster.quota`."""

from __future__ import annotations

from typing import Any

from localcluster import quantity
from localcluster.builtin.base import BuiltinStrategy, columns
from localcluster.registry import FieldError, Obj, TableColumn

LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")


def _quantities(values: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for name, value in (values or {}).items():
        parsed = quantity.parse(value)
        if parsed is None:
            errs.append(
                FieldError.invalid(
                    f"{path}[{name}]",
                    value,
                    "quantities must match the regular expression "
                    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                )
            )
        elif parsed < 0:
            errs.append(FieldError.invalid(f"{path}[{name}]", value, "must be greater than or equal to 0"))
    return errs


class ResourceQuotaStrategy(BuiltinStrategy):
    kind = "ResourceQuota"
    has_status_subresource = True
    tracks_generation = False

    def prepare_for_create(self, obj: Obj) -> None:
        super().prepare_for_create(obj)

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return _quantities((obj.get("spec") or {}).get("hard"), "spec.hard")

    def validate_status(self, obj: Obj, old: Obj) -> list[FieldError]:
        status = obj.get("status") or {}
        return _quantities(status.get("hard"), "status.hard") + _quantities(status.get("used"), "status.used")

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        status = obj.get("status") or {}
        hard, used = status.get("hard") or {}, status.get("used") or {}
        requests: list[str] = []
        limits: list[str] = []
        for name in sorted(hard):
            cell = f"{name}: {used.get(name, '0')}/{hard[name]}"
            (limits if name.startswith("limits.") else requests).append(cell)
        return columns(("Age", "string"), ("Request", "string"), ("Limit", "string")), [
            None,
            ", ".join(requests),
            ", ".join(limits),
        ]


class LimitRangeStrategy(BuiltinStrategy):
    kind = "LimitRange"
    tracks_generation = False

    def default(self, obj: Obj) -> None:
        """`SetDefaults_LimitRangeItem`: a container item's default limit is its max, and its
        default request the default limit."""
        for item in (obj.get("spec") or {}).get("limits") or []:
            if not isinstance(item, dict) or item.get("type") != "Container":
                continue
            default = item.setdefault("default", {})
            for name, value in (item.get("max") or {}).items():
                default.setdefault(name, value)
            request = item.setdefault("defaultRequest", {})
            for name, value in default.items():
                request.setdefault(name, value)
            if not default:
                item.pop("default")
            if not request:
                item.pop("defaultRequest")

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        for i, item in enumerate((obj.get("spec") or {}).get("limits") or []):
            path = f"spec.limits[{i}]"
            if not isinstance(item, dict):
                errs.append(FieldError.required(path))
                continue
            if item.get("type") not in LIMIT_TYPES:
                errs.append(FieldError.not_supported(f"{path}.type", item.get("type"), LIMIT_TYPES))
            for key in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
                errs.extend(_quantities(item.get(key), f"{path}.{key}"))
            low, high = item.get("min") or {}, item.get("max") or {}
            for name in low.keys() & high.keys():
                lo, hi = quantity.parse(low[name]), quantity.parse(high[name])
                if lo is not None and hi is not None and lo > hi:
                    errs.append(
                        FieldError.invalid(
                            f"{path}.min[{name}]",
                            low[name],
                            f"min value {low[name]} is greater than max value {high[name]}",
                        )
                    )
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        return columns(("Created At", "date")), [obj["metadata"].get("creationTimestamp", "")]

    table_age_column = None
