"""scheduling.k8s.io/v1 PriorityClasses, with the two system classes every cluster has
(`pkg/apis/scheduling/types.go`: `SystemPriorityClasses`)."""

from __future__ import annotations

from typing import Any

from localcluster.builtin.base import BuiltinStrategy, columns
from localcluster.registry import FieldError, Obj, TableColumn

#: `HighestUserDefinablePriority`: user classes may not go above a billion.
HIGHEST_USER_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_PRIORITY

SYSTEM_PRIORITY_CLASSES: tuple[tuple[str, int, str], ...] = (
    (
        "system-node-critical",
        SYSTEM_CRITICAL_PRIORITY + 1000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        SYSTEM_CRITICAL_PRIORITY,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
)


def system_priority_classes() -> list[Obj]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "description": description,
        }
        for name, value, description in SYSTEM_PRIORITY_CLASSES
    ]


class PriorityClassStrategy(BuiltinStrategy):
    group = "scheduling.k8s.io"
    kind = "PriorityClass"
    tracks_generation = False

    def default(self, obj: Obj) -> None:
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        name = obj["metadata"].get("name", "")
        value = obj.get("value")
        system = {n: v for n, v, _ in SYSTEM_PRIORITY_CLASSES}
        if not isinstance(value, int) or isinstance(value, bool):
            errs.append(FieldError.required("value"))
        elif name in system:
            if value != system[name]:
                errs.append(
                    FieldError.forbidden(
                        "metadata.name",
                        f"{name!r} is a system priority class and its value must be {system[name]}",
                    )
                )
        elif name.startswith("system-"):
            errs.append(
                FieldError.forbidden(
                    "metadata.name",
                    "priority class names with 'system-' prefix are reserved for system use only",
                )
            )
        elif value > HIGHEST_USER_PRIORITY:
            errs.append(
                FieldError.forbidden(
                    "value", f"maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"
                )
            )
        policy = obj.get("preemptionPolicy")
        if policy not in ("PreemptLowerPriority", "Never"):
            errs.append(
                FieldError.not_supported("preemptionPolicy", policy, ("Never", "PreemptLowerPriority"))
            )
        if old is not None:
            if value != old.get("value"):
                errs.append(FieldError.forbidden("value", "may not be changed in an update."))
            if policy != old.get("preemptionPolicy"):
                errs.append(FieldError.invalid("preemptionPolicy", policy, "field is immutable"))
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        cols = columns(("Value", "integer"), ("Global-Default", "boolean"))
        return cols, [obj.get("value", 0), bool(obj.get("globalDefault"))]
