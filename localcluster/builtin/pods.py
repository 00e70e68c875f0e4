"""Pods: scheme defaults, the admission a default cluster runs, validation and graceful deletion.

Defaults are `pkg/apis/core/v1/defaults.go`; on top, the admission plugins every cluster
enables: DefaultTolerationSeconds (tolerate not-ready / unreachable NoExecute for 300 s),
Priority (priority 0, preemptionPolicy), ServiceAccount (serviceAccountName "default").
"""

from __future__ import annotations

from typing import Any

from localcluster.builtin.base import SpecStrategy, columns, field_values, get_path
from localcluster.builtin.resources import resource_requirements_errors
from localcluster.builtin.validation import dns_label, non_negative, object_items, port_number
from localcluster.registry import FieldError, Obj, TableColumn

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300


def default_container(container: dict[str, Any]) -> None:
    image = str(container.get("image") or "")
    if "imagePullPolicy" not in container:
        last = image.rsplit("/", 1)[-1]
        tag = (
            last.split(":", 1)[1]
            if ":" in last and "@" not in last
            else ("" if "@" not in last else "digest")
        )
        container["imagePullPolicy"] = "Always" if tag in ("", "latest") else "IfNotPresent"
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def default_pod_spec(spec: dict[str, Any]) -> None:
    """`SetDefaults_PodSpec` and friends: also applied to templates of workloads."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    # v1's deprecated `serviceAccount` mirrors `serviceAccountName` (and stands in for it when
    # only it is sent), as the conversion to and from the internal type does
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    elif spec.get("serviceAccount"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if isinstance(container, dict):
            default_container(container)


def default_requests_to_limits(spec: dict[str, Any]) -> None:
    """`SetDefaults_Pod`: a limit with no request of its resource is also the request. Pods only,
    not templates (a template's pods get it when they are created)."""
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") if isinstance(container, dict) else None
        limits = resources.get("limits") if isinstance(resources, dict) else None
        if not isinstance(limits, dict) or not isinstance(resources, dict):
            continue
        requests = resources.get("requests")
        if not isinstance(requests, dict):
            requests = resources["requests"] = {}
        for name, value in limits.items():
            requests.setdefault(name, value)


def default_template_metadata(template: Any) -> None:
    """A PodTemplateSpec's metadata as Go serializes it: always present, with
    `creationTimestamp: null` (a zero `metav1.Time` is written as null, never left out)."""
    if not isinstance(template, dict):
        return
    meta = template.get("metadata")
    if meta is None:
        meta = template["metadata"] = {}
    if isinstance(meta, dict) and meta.get("creationTimestamp") is None:
        meta["creationTimestamp"] = None


def default_pod_template(template: Any) -> None:
    """A workload's pod template defaulted as the real server defaults it: its metadata as Go
    writes it and its pod spec as a pod's own (a template that is not an object is left alone)."""
    default_template_metadata(template)
    pod_spec = get_path(template, "spec")
    if isinstance(pod_spec, dict):
        default_pod_spec(pod_spec)


def add_default_tolerations(spec: dict[str, Any]) -> None:
    """DefaultTolerationSeconds admission: skipped for a key already tolerated for NoExecute."""
    tolerations = spec.setdefault("tolerations", [])
    for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
        if any(
            isinstance(t, dict)
            and t.get("effect", "") in ("", "NoExecute")
            and (t.get("key") == key or (not t.get("key") and t.get("operator") == "Exists"))
            for t in tolerations
        ):
            continue
        tolerations.append(
            {
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
            }
        )


def qos_class(spec: dict[str, Any]) -> str:
    """`GetPodQOS`: Guaranteed when every container limits cpu and memory to its requests."""
    containers = [
        c
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        if isinstance(c, dict)
    ]
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        requests = dict(res.get("requests") or {})
        limits = res.get("limits") or {}
        for name, value in limits.items():
            requests.setdefault(name, value)
        if requests or limits:
            any_set = True
        for name in ("cpu", "memory"):
            if name not in limits or str(limits.get(name)) != str(requests.get(name)):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


_MUTABLE_SPEC = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates")


class PodStrategy(SpecStrategy):
    kind = "Pod"
    has_status_subresource = True
    tracks_generation = False
    graceful_deletion = True
    return_deleted_object = True
    field_labels = frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    )

    def default_spec(self, spec: dict[str, Any]) -> None:
        default_pod_spec(spec)
        default_requests_to_limits(spec)
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("priority", 0)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def prepare_for_create(self, obj: Obj) -> None:
        spec = obj.get("spec") or {}
        add_default_tolerations(spec)
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}
        obj["metadata"].pop("generation", None)

    def prepare_for_status_update(self, obj: Obj, old: Obj) -> None:
        super().prepare_for_status_update(obj, old)
        meta, old_meta = obj["metadata"], old["metadata"]
        for key in ("ownerReferences", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)

    def validate_spec(self, spec: dict[str, Any], obj: Obj, old: Obj | None) -> list[FieldError]:
        errs = validate_pod_spec(spec, "spec")
        if old is not None:
            errs.extend(_validate_spec_update(spec, old.get("spec") or {}))
        return errs

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        fields = field_values(
            obj,
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        )
        fields["spec.hostNetwork"] = "true" if get_path(obj, "spec", "hostNetwork") else "false"
        return fields

    def graceful_period(self, obj: Obj, requested: int | None) -> int | None:
        """Pods on no node, or already finished, go at once, as `podStrategy.CheckGracefulDelete`."""
        spec = obj.get("spec") or {}
        period = requested if requested is not None else spec.get("terminationGracePeriodSeconds", 30)
        if not spec.get("nodeName"):
            return 0
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        return max(int(period or 0), 0)

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        statuses = status.get("containerStatuses") or []
        ready = sum(1 for s in statuses if s.get("ready"))
        restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
        phase = str(status.get("reason") or status.get("phase") or "")
        if obj["metadata"].get("deletionTimestamp"):
            phase = "Terminating"
        for s in statuses:
            waiting = get_path(s, "state", "waiting", "reason")
            if waiting:
                phase = waiting
        cols = columns(
            ("Ready", "string"),
            ("Status", "string"),
            ("Restarts", "string"),
            ("Age", "string"),
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
            kind="Pod",
        )
        return cols, [
            f"{ready}/{len(spec.get('containers') or [])}",
            phase,
            str(restarts),
            None,
            status.get("podIP") or "<none>",
            spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>",
            _readiness_gates(spec, status),
        ]


def _readiness_gates(spec: Obj, status: Obj) -> str:
    """`true/total` of the pod's readiness gates, as `printPod` counts them; `<none>` without gates."""
    gates = spec.get("readinessGates") or []
    if not gates:
        return "<none>"
    conditions = {
        c.get("type"): c.get("status") for c in status.get("conditions") or [] if isinstance(c, dict)
    }
    true = sum(1 for g in gates if isinstance(g, dict) and conditions.get(g.get("conditionType")) == "True")
    return f"{true}/{len(gates)}"


def validate_pod_spec(spec: dict[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    containers = spec.get("containers")
    if not containers or not isinstance(containers, list):
        return [FieldError.required(f"{path}.containers")]
    seen: set[str] = set()
    for cpath, c in object_items(containers, f"{path}.containers", errs):
        name = c.get("name")
        if not name:
            errs.append(FieldError.required(f"{cpath}.name"))
        else:
            problem = dns_label(str(name))
            if problem:
                errs.append(FieldError.invalid(f"{cpath}.name", name, problem))
            if name in seen:
                errs.append(FieldError.duplicate(f"{cpath}.name", name))
            seen.add(str(name))
        if not c.get("image"):
            errs.append(FieldError.required(f"{cpath}.image"))
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            if isinstance(c, dict):
                errs.extend(_container_errors(c, f"{path}.{key}[{i}]"))
    restart = spec.get("restartPolicy")
    if restart not in ("Always", "OnFailure", "Never"):
        errs.append(
            FieldError.not_supported(f"{path}.restartPolicy", restart, ("Always", "OnFailure", "Never"))
        )
    errs.extend(
        non_negative(spec.get("terminationGracePeriodSeconds"), f"{path}.terminationGracePeriodSeconds")
    )
    for i, t in enumerate(spec.get("tolerations") or []):
        op = t.get("operator", "Equal") if isinstance(t, dict) else None
        if op not in ("Equal", "Exists"):
            errs.append(
                FieldError.not_supported(f"{path}.tolerations[{i}].operator", op, ("Equal", "Exists"))
            )
        elif op == "Exists" and t.get("value"):
            errs.append(
                FieldError.invalid(
                    f"{path}.tolerations[{i}].operator",
                    t.get("value"),
                    "value must be empty when `operator` is 'Exists'",
                )
            )
        effect = t.get("effect", "") if isinstance(t, dict) else None
        if effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            errs.append(
                FieldError.not_supported(
                    f"{path}.tolerations[{i}].effect", effect, ("NoExecute", "NoSchedule", "PreferNoSchedule")
                )
            )
        if isinstance(t, dict) and t.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(
                FieldError.invalid(
                    f"{path}.tolerations[{i}].effect",
                    effect,
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
    return errs


def _container_errors(c: dict[str, Any], path: str) -> list[FieldError]:
    """`validateContainerPorts` (each port in 1-65535) and `ValidateResourceRequirements`."""
    errs: list[FieldError] = []
    for i, port in enumerate(c.get("ports") or []):
        if not isinstance(port, dict):
            continue
        ppath = f"{path}.ports[{i}]"
        if not port.get("containerPort"):
            errs.append(FieldError.required(f"{ppath}.containerPort"))
        else:
            errs.extend(port_number(port["containerPort"], f"{ppath}.containerPort"))
        if port.get("hostPort"):
            errs.extend(port_number(port["hostPort"], f"{ppath}.hostPort"))
    errs.extend(resource_requirements_errors(c.get("resources"), f"{path}.resources"))
    return errs


_UPDATABLE = (
    "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _validate_spec_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """`ValidatePodUpdate`: the new spec is "munged" with the old values of what may change
    (images, activeDeadlineSeconds, tolerations, schedulingGates, a negative grace period set to
    1) and must then equal the old spec; those fields have their own rules. nodeName changes
    only through the binding subresource."""
    errs: list[FieldError] = []
    for key in ("containers", "initContainers"):
        if len(new.get(key) or []) != len(old.get(key) or []):
            errs.append(FieldError.forbidden(f"spec.{key}", "pod updates may not add or remove containers"))
    if errs:
        return errs
    munged = dict(new)
    for key in ("containers", "initContainers"):
        if key in new:
            munged[key] = [
                {**c, "image": o.get("image")} if isinstance(c, dict) and isinstance(o, dict) else c
                for c, o in zip(new[key], old.get(key) or [], strict=True)
            ]
    for key in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        if key in old:
            munged[key] = old[key]
        else:
            munged.pop(key, None)
    old_grace, new_grace = old.get("terminationGracePeriodSeconds"), new.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and new_grace == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    if munged != old:
        errs.append(
            FieldError.forbidden("spec", f"pod updates may not change fields other than {_UPDATABLE}")
        )
    # activeDeadlineSeconds: may be set or lowered, never removed or raised
    old_ads, new_ads = old.get("activeDeadlineSeconds"), new.get("activeDeadlineSeconds")
    if old_ads is not None:
        if new_ads is None:
            errs.append(
                FieldError.invalid(
                    "spec.activeDeadlineSeconds", None, "must not update from a positive integer to nil value"
                )
            )
        elif isinstance(new_ads, int) and isinstance(old_ads, int) and new_ads > old_ads:
            errs.append(
                FieldError.invalid(
                    "spec.activeDeadlineSeconds", new_ads, "must be less than or equal to previous value"
                )
            )
    # schedulingGates: only removals
    old_gates = {g.get("name") for g in old.get("schedulingGates") or [] if isinstance(g, dict)}
    for i, gate in enumerate(new.get("schedulingGates") or []):
        if isinstance(gate, dict) and gate.get("name") not in old_gates:
            errs.append(
                FieldError.forbidden(
                    f"spec.schedulingGates[{i}]",
                    f"only deletion is allowed, but found new scheduling gate '{gate.get('name')}'",
                )
            )
    errs.extend(_validate_only_added_tolerations(new.get("tolerations") or [], old.get("tolerations") or []))
    return errs


def _validate_only_added_tolerations(new: list[Any], old: list[Any]) -> list[FieldError]:
    """`validateOnlyAddedTolerations`: every old toleration must still be there, compared with
    tolerationSeconds ignored on both sides, so an existing toleration's seconds may change
    (tolerationSeconds itself still needs effect NoExecute, checked with the spec)."""

    def without_seconds(t: Any) -> Any:
        return {k: v for k, v in t.items() if k != "tolerationSeconds"} if isinstance(t, dict) else t

    stripped_new = [without_seconds(t) for t in new]
    for t in old:
        if without_seconds(t) not in stripped_new:
            return [
                FieldError.forbidden(
                    "spec.tolerations", "existing toleration can not be modified except its tolerationSeconds"
                )
            ]
    return []
