"""apps/v1 workloads: defaults of `pkg/apis/apps/v1/defaults.go` and the validation controllers hit."""

from __future__ import annotations

from typing import Any

from kubeutil import selectors
from localcluster.builtin.base import (
    BuiltinStrategy,
    SpecStrategy,
    columns,
    format_label_selector,
    get_path,
    workload_cells,
    workload_columns,
)
from localcluster.builtin.intorpercent import rolling_update_errors
from localcluster.builtin.pods import default_pod_template, validate_pod_spec
from localcluster.builtin.validation import immutable, non_negative, validate_label_selector, validate_labels
from localcluster.registry import FieldError, Obj, TableColumn


class WorkloadStrategy(SpecStrategy):
    """Shared by Deployment, ReplicaSet, StatefulSet, DaemonSet: the selector must be set,
    non-empty, match the template's labels, and never change."""

    group = "apps"
    has_status_subresource = True
    has_replicas = True

    def validate_spec(self, spec: dict[str, Any], obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        if self.has_replicas:
            errs.extend(non_negative(spec.get("replicas"), "spec.replicas"))
        errs.extend(non_negative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
        errs.extend(non_negative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit"))
        selector = spec.get("selector")
        selector_ok = False
        if not selector:
            errs.append(FieldError.required("spec.selector"))
        else:
            sel_errs = validate_label_selector(selector, "spec.selector")
            errs.extend(sel_errs)
            if not sel_errs and selectors.from_label_selector(selector).empty:
                errs.append(
                    FieldError.invalid("spec.selector", selector, "empty selector is invalid for deployment")
                )
            selector_ok = not sel_errs
        template = spec.get("template")
        if not isinstance(template, dict):
            errs.append(FieldError.required("spec.template"))
            return errs
        labels = get_path(template, "metadata", "labels", default={})
        label_errs = validate_labels(labels, "spec.template.metadata.labels")
        errs.extend(label_errs)
        if selector_ok and not label_errs:
            if not selectors.from_label_selector(selector).matches(labels):
                errs.append(
                    FieldError.invalid(
                        "spec.template.metadata.labels", labels, "`selector` does not match template `labels`"
                    )
                )
        pod_spec = template.get("spec")
        if not isinstance(pod_spec, dict):
            errs.append(FieldError.required("spec.template.spec"))
        else:
            errs.extend(validate_pod_spec(pod_spec, "spec.template.spec"))
            if pod_spec.get("restartPolicy") != "Always":
                errs.append(
                    FieldError.not_supported(
                        "spec.template.spec.restartPolicy", pod_spec.get("restartPolicy"), ("Always",)
                    )
                )
        if old is not None:
            errs.extend(immutable(selector, get_path(old, "spec", "selector"), "spec.selector"))
        return errs

    def validate_status(self, obj: Obj, old: Obj) -> list[FieldError]:
        errs: list[FieldError] = []
        status = obj.get("status") or {}
        for key in (
            "replicas",
            "readyReplicas",
            "availableReplicas",
            "updatedReplicas",
            "fullyLabeledReplicas",
            "observedGeneration",
        ):
            errs.extend(non_negative(status.get(key), f"status.{key}"))
        return errs


class DeploymentStrategy(WorkloadStrategy):
    """kube-apiserver's deployment strategy: an annotation change bumps the generation too
    (annotations are copied to the ReplicaSets, so they are part of what the controller rolls
    out), and a `/status` write keeps the old labels. The controller therefore writes its
    revision annotations through `/status`, which bumps nothing."""

    kind = "Deployment"
    initial_status: Obj = {}  # serialized as it is, empty

    def prepare_for_update(self, obj: Obj, old: Obj) -> None:
        super().prepare_for_update(obj, old)
        old_meta, meta = old["metadata"], obj["metadata"]
        generation = old_meta.get("generation", 1)
        if meta.get("generation") == generation and (meta.get("annotations") or {}) != (
            old_meta.get("annotations") or {}
        ):
            meta["generation"] = generation + 1

    def prepare_for_status_update(self, obj: Obj, old: Obj) -> None:
        super().prepare_for_status_update(obj, old)
        labels = old["metadata"].get("labels")
        if labels is None:
            obj["metadata"].pop("labels", None)
        else:
            obj["metadata"]["labels"] = labels

    def default_spec(self, spec: dict[str, Any]) -> None:
        spec.setdefault("replicas", 1)
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        default_pod_template(spec.get("template"))

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs = super().validate(obj, old)
        strategy = get_path(obj, "spec", "strategy", default={})
        if strategy.get("type") not in ("RollingUpdate", "Recreate"):
            errs.append(
                FieldError.not_supported(
                    "spec.strategy.type", strategy.get("type"), ("Recreate", "RollingUpdate")
                )
            )
        elif strategy.get("type") == "Recreate" and strategy.get("rollingUpdate"):
            errs.append(
                FieldError.forbidden(
                    "spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"
                )
            )
        rolling = strategy.get("rollingUpdate")
        if strategy.get("type") == "RollingUpdate" and isinstance(rolling, dict):
            errs.extend(rolling_update_errors(rolling, "spec.strategy.rollingUpdate"))
        deadline = get_path(obj, "spec", "progressDeadlineSeconds")
        if isinstance(deadline, int) and deadline <= get_path(obj, "spec", "minReadySeconds", default=0):
            errs.append(
                FieldError.invalid(
                    "spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"
                )
            )
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        cols = workload_columns(
            ("Ready", "string"), ("Up-to-date", "string"), ("Available", "string"), kind="Deployment"
        )
        return cols, [
            f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
            status.get("updatedReplicas", 0),
            status.get("availableReplicas", 0),
            *workload_cells(spec.get("template"), format_label_selector(spec.get("selector"))),
        ]


def _quoted(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def _zero(value: Any) -> bool:
    return value in (0, "0", "0%")


class ReplicaSetStrategy(WorkloadStrategy):
    kind = "ReplicaSet"
    initial_status = {"replicas": 0}

    def default_spec(self, spec: dict[str, Any]) -> None:
        spec.setdefault("replicas", 1)
        default_pod_template(spec.get("template"))

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        cols = workload_columns(
            ("Desired", "integer"), ("Current", "integer"), ("Ready", "integer"), kind="ReplicaSet"
        )
        return cols, [
            spec.get("replicas", 0),
            status.get("replicas", 0),
            status.get("readyReplicas", 0),
            *workload_cells(spec.get("template"), format_label_selector(spec.get("selector"))),
        ]


class StatefulSetStrategy(WorkloadStrategy):
    kind = "StatefulSet"
    initial_status = {"replicas": 0, "availableReplicas": 0}

    def default_spec(self, spec: dict[str, Any]) -> None:
        spec.setdefault("replicas", 1)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        update = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        if update.get("type") == "RollingUpdate":
            update.setdefault("rollingUpdate", {}).setdefault("partition", 0)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault(
            "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"}
        )
        default_pod_template(spec.get("template"))

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs = super().validate(obj, old)
        spec = obj.get("spec") or {}
        policy = spec.get("podManagementPolicy")
        if policy not in ("OrderedReady", "Parallel"):
            errs.append(
                FieldError(
                    "FieldValueInvalid",
                    "spec.podManagementPolicy",
                    f"Invalid value: {_quoted(policy)}: must be 'OrderedReady' or 'Parallel'",
                )
            )
        update = spec.get("updateStrategy") or {}
        if update.get("type") not in ("RollingUpdate", "OnDelete"):
            errs.append(
                FieldError(
                    "FieldValueInvalid",
                    "spec.updateStrategy",
                    f"Invalid value: {_quoted(update.get('type'))}: must be 'RollingUpdate' or 'OnDelete'",
                )
            )
        errs.extend(
            non_negative(
                get_path(update, "rollingUpdate", "partition"), "spec.updateStrategy.rollingUpdate.partition"
            )
        )
        errs.extend(non_negative(get_path(spec, "ordinals", "start"), "spec.ordinals.start"))
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        return columns(("Ready", "string")), [f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}"]


TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"


class DaemonSetStrategy(WorkloadStrategy):
    """The internal `spec.templateGeneration` (1 on create, +1 when the template changes) is
    what apps/v1 shows as the `deprecated.daemonset.template.generation` annotation; the
    controller labels pods with it (`pod-template-generation`)."""

    kind = "DaemonSet"
    initial_status = {
        "currentNumberScheduled": 0,
        "desiredNumberScheduled": 0,
        "numberMisscheduled": 0,
        "numberReady": 0,
    }
    has_replicas = False

    def prepare_for_update(self, obj: Obj, old: Obj) -> None:
        super().prepare_for_update(obj, old)
        annotations = obj["metadata"].setdefault("annotations", {})
        old_generation = (old["metadata"].get("annotations") or {}).get(TEMPLATE_GENERATION, "1")
        if get_path(obj, "spec", "template") != get_path(old, "spec", "template"):
            try:
                annotations[TEMPLATE_GENERATION] = str(int(old_generation) + 1)
            except ValueError:
                annotations[TEMPLATE_GENERATION] = "1"
        else:
            annotations[TEMPLATE_GENERATION] = old_generation

    def default_spec(self, spec: dict[str, Any]) -> None:
        update = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        if update.get("type") == "RollingUpdate":
            rolling = update.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", 1)
            rolling.setdefault("maxSurge", 0)
        spec.setdefault("revisionHistoryLimit", 10)
        default_pod_template(spec.get("template"))

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs = super().validate(obj, old)
        update = get_path(obj, "spec", "updateStrategy", default={})
        if update.get("type") not in ("RollingUpdate", "OnDelete"):
            errs.append(
                FieldError.not_supported(
                    "spec.updateStrategy", update.get("type"), ("RollingUpdate", "OnDelete")
                )
            )
        rolling = update.get("rollingUpdate") or {}
        if (
            update.get("type") == "RollingUpdate"
            and _zero(rolling.get("maxSurge", 0))
            and _zero(rolling.get("maxUnavailable", 1))
        ):
            errs.append(
                FieldError.required(
                    "spec.updateStrategy.rollingUpdate.maxUnavailable",
                    "Required value: cannot be 0 when maxSurge is 0",
                )
            )
        return errs

    def prepare_for_create(self, obj: Obj) -> None:
        super().prepare_for_create(obj)
        obj["metadata"].setdefault("annotations", {})[TEMPLATE_GENERATION] = "1"

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        status = obj.get("status") or {}
        cols = columns(("Desired", "integer"), ("Current", "integer"), ("Ready", "integer"))
        return cols, [
            status.get("desiredNumberScheduled", 0),
            status.get("currentNumberScheduled", 0),
            status.get("numberReady", 0),
        ]


class ControllerRevisionStrategy(BuiltinStrategy):
    """apps/v1 ControllerRevision: an immutable snapshot (`data`) with a revision number."""

    kind = "ControllerRevision"
    tracks_generation = False

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs = non_negative(obj.get("revision"), "revision")
        if old is not None and obj.get("data") != old.get("data"):
            errs.append(FieldError("FieldValueInvalid", "data", "Invalid value: field is immutable"))
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        owner = next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
        controller = (
            f"{str(owner.get('kind', '')).lower()}.apps/{owner.get('name', '')}" if owner else "<none>"
        )
        return columns(("Controller", "string"), ("Revision", "integer")), [
            controller,
            obj.get("revision", 0),
        ]
