"""autoscaling/v2 HorizontalPodAutoscalers: `SetDefaults_HorizontalPodAutoscaler`, the
validation clients hit, and kubectl's columns (`printHorizontalPodAutoscaler`).

Only v2 is served: the real server converts between v1 and v2 through its internal type, and
the local store keeps one shape per resource, so v1 (whose CPU target and status differ in
shape) would need a converter of its own.
"""

from __future__ import annotations

from typing import Any

from localcluster.builtin.base import SpecStrategy, columns, get_path
from localcluster.registry import FieldError, Obj, TableColumn

DEFAULT_CPU_UTILIZATION = 80


class HorizontalPodAutoscalerStrategy(SpecStrategy):
    group = "autoscaling"
    version = "v2"
    kind = "HorizontalPodAutoscaler"
    has_status_subresource = True
    initial_status = {"desiredReplicas": 0}

    def default_spec(self, spec: dict[str, Any]) -> None:
        spec.setdefault("minReplicas", 1)
        if not spec.get("metrics"):
            spec["metrics"] = [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION},
                    },
                }
            ]

    def validate_spec(self, spec: dict[str, Any], obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        ref = spec.get("scaleTargetRef")
        if not isinstance(ref, dict):
            errs.append(FieldError.required("spec.scaleTargetRef"))
        else:
            for key in ("kind", "name"):
                if not ref.get(key):
                    errs.append(FieldError.required(f"spec.scaleTargetRef.{key}"))
        low, high = spec.get("minReplicas"), spec.get("maxReplicas")
        if isinstance(low, int) and low < 1:
            errs.append(FieldError.invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
        if not isinstance(high, int) or isinstance(high, bool):
            errs.append(FieldError.required("spec.maxReplicas"))
        elif high < 1:
            errs.append(FieldError.invalid("spec.maxReplicas", high, "must be greater than 0"))
        elif isinstance(low, int) and high < low:
            errs.append(
                FieldError.invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`")
            )
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        ref = spec.get("scaleTargetRef") or {}
        targets = []
        current = {
            get_path(m, "resource", "name"): m
            for m in status.get("currentMetrics") or []
            if m.get("type") == "Resource"
        }
        for metric in spec.get("metrics") or []:
            if metric.get("type") != "Resource":
                targets.append("<unknown>")
                continue
            name = get_path(metric, "resource", "name")
            target = get_path(metric, "resource", "target", default={})
            now = get_path(current.get(name), "resource", "current", "averageUtilization")
            shown = f"{now}%" if now is not None else "<unknown>"
            if target.get("averageUtilization") is not None:
                targets.append(f"{shown}/{target['averageUtilization']}%")
            else:
                targets.append(f"<unknown>/{target.get('averageValue') or target.get('value')}")
        cols = columns(
            ("Reference", "string"),
            ("Targets", "string"),
            ("MinPods", "string"),
            ("MaxPods", "integer"),
            ("Replicas", "integer"),
        )
        return cols, [
            f"{ref.get('kind', '')}/{ref.get('name', '')}",
            ", ".join(targets) or "<none>",
            str(spec.get("minReplicas", "<unset>")),
            spec.get("maxReplicas", 0),
            status.get("currentReplicas", 0),
        ]
