"""policy/v1 PodDisruptionBudgets, coordination.k8s.io/v1 Leases, events.k8s.io/v1 Events,
networking.k8s.io/v1 NetworkPolicies."""

from __future__ import annotations

from typing import Any

from localcluster.builtin.base import BuiltinStrategy, columns, field_values, get_path
from localcluster.builtin.intorpercent import int_or_percent_in_range
from localcluster.builtin.validation import non_negative, validate_label_selector
from localcluster.registry import FieldError, Obj, TableColumn


class PodDisruptionBudgetStrategy(BuiltinStrategy):
    """Status starts with the four counters the real server always serializes (not omitempty)."""

    group = "policy"
    kind = "PodDisruptionBudget"
    has_status_subresource = True
    initial_status = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs: list[FieldError] = []
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            errs.append(
                FieldError.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set")
            )
        for key in ("minAvailable", "maxUnavailable"):
            errs.extend(int_or_percent_in_range(spec.get(key), f"spec.{key}"))
        errs.extend(validate_label_selector(spec.get("selector"), "spec.selector"))
        policy = spec.get("unhealthyPodEvictionPolicy")
        if policy is not None and policy not in ("IfHealthyBudget", "AlwaysAllow"):
            errs.append(
                FieldError.not_supported(
                    "spec.unhealthyPodEvictionPolicy", policy, ("AlwaysAllow", "IfHealthyBudget")
                )
            )
        return errs

    def validate_status(self, obj: Obj, old: Obj) -> list[FieldError]:
        status = obj.get("status") or {}
        errs: list[FieldError] = []
        for key in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
            errs.extend(non_negative(status.get(key), f"status.{key}"))
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        spec = obj.get("spec") or {}
        cols = columns(
            ("Min Available", "string"), ("Max Unavailable", "string"), ("Allowed Disruptions", "integer")
        )
        return cols, [
            str(spec.get("minAvailable", "N/A")),
            str(spec.get("maxUnavailable", "N/A")),
            get_path(obj, "status", "disruptionsAllowed", default=0),
        ]


class LeaseStrategy(BuiltinStrategy):
    group = "coordination.k8s.io"
    kind = "Lease"
    tracks_generation = False
    allow_create_on_update = True
    allow_unconditional_update = False

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs: list[FieldError] = []
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and (not isinstance(duration, int) or duration <= 0):
            errs.append(FieldError.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
        errs.extend(non_negative(spec.get("leaseTransitions"), "spec.leaseTransitions"))
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        return columns(("Holder", "string")), [get_path(obj, "spec", "holderIdentity", default="")]


class EventsV1Strategy(BuiltinStrategy):
    group = "events.k8s.io"
    kind = "Event"
    tracks_generation = False
    allow_create_on_update = True
    field_labels = frozenset(
        {"reason", "type", "regarding.kind", "regarding.name", "regarding.namespace", "reportingController"}
    )

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        if not obj.get("eventTime"):
            errs.append(FieldError.required("eventTime"))
        if obj.get("type") not in (None, "Normal", "Warning"):
            errs.append(FieldError.not_supported("type", obj.get("type"), ("Normal", "Warning")))
        return errs

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        return field_values(
            obj,
            "reason",
            "type",
            "reportingController",
            "regarding.kind",
            "regarding.name",
            "regarding.namespace",
        )


class NetworkPolicyStrategy(BuiltinStrategy):
    """Stored and served (nothing here enforces them): what `kubectl apply` of a manifest set needs."""

    group = "networking.k8s.io"
    kind = "NetworkPolicy"

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = list(validate_label_selector(spec.get("podSelector"), "spec.podSelector"))
        for i, kind in enumerate(spec.get("policyTypes") or []):
            if kind not in ("Ingress", "Egress"):
                errs.append(FieldError.not_supported(f"spec.policyTypes[{i}]", kind, ("Egress", "Ingress")))
        return errs
