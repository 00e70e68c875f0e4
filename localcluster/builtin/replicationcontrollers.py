"""core/v1 ReplicationControllers: served so that controllers listing them (the disruption
controller's informer, as KCM's) find the resource, with `/status` and `/scale` as the real server.

Defaults and validation are the few that matter to a client: `spec.replicas` defaults to 1 and is
non-negative, the selector (a plain label map) defaults to the template's labels and must match them.
"""

from __future__ import annotations

from typing import Any

from localcluster.builtin.base import SpecStrategy, columns, get_path
from localcluster.builtin.pods import default_pod_template
from localcluster.builtin.validation import non_negative
from localcluster.registry import FieldError, Obj, ScaleSubresource, TableColumn

#: An RC's selector is a plain label map, not a LabelSelector, so `/scale` leaves `status.selector` out.
RC_SCALE = ScaleSubresource(".spec.replicas", ".status.replicas", None)


class ReplicationControllerStrategy(SpecStrategy):
    kind = "ReplicationController"
    has_status_subresource = True
    initial_status = {"replicas": 0}

    def default_spec(self, spec: dict[str, Any]) -> None:
        spec.setdefault("replicas", 1)
        labels = get_path(spec, "template", "metadata", "labels")
        if not spec.get("selector") and isinstance(labels, dict):
            spec["selector"] = dict(labels)
        default_pod_template(spec.get("template"))

    def validate_spec(self, spec: dict[str, Any], obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = list(non_negative(spec.get("replicas"), "spec.replicas"))
        selector = spec.get("selector")
        if not isinstance(selector, dict) or not selector:
            errs.append(FieldError.required("spec.selector"))
            return errs
        labels = get_path(obj, "spec", "template", "metadata", "labels")
        if isinstance(labels, dict) and any(labels.get(k) != v for k, v in selector.items()):
            errs.append(
                FieldError.invalid(
                    "spec.template.metadata.labels", labels, "`selector` does not match template `labels`"
                )
            )
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        cols = columns(("Desired", "integer"), ("Current", "integer"), ("Ready", "integer"))
        return cols, [spec.get("replicas", 0), status.get("replicas", 0), status.get("readyReplicas", 0)]
