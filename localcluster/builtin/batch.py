"""batch/v1 Jobs and CronJobs: `pkg/apis/batch/v1/defaults.go`, the job strategy's generated
selector, the validation clients hit, and kubectl's columns.

A Job's selector is generated unless `spec.manualSelector` is true (`jobStrategy.PrepareForCreate`
+ `generateSelector`): `controller-uid=<uid>` on the selector, and `controller-uid` and
`job-name` on the template, as v1.24 labels them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from croniter import croniter

from kubeutil.timestamps import parse_time
from localcluster.builtin.base import (
    SpecStrategy,
    get_path,
    workload_cells,
    workload_columns,
)
from localcluster.builtin.pods import default_pod_template, default_template_metadata, validate_pod_spec
from localcluster.builtin.validation import immutable, non_negative, validate_label_selector
from localcluster.registry import FieldError, Obj, TableColumn

CONTROLLER_UID_LABEL = "controller-uid"
JOB_NAME_LABEL = "job-name"


def default_job_spec(spec: dict[str, Any]) -> None:
    """`SetDefaults_Job` (completions and parallelism 1 when both are unset, backoffLimit 6)."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    default_pod_template(spec.get("template"))


def validate_job_spec(spec: Any, path: str, *, generated_selector: bool) -> list[FieldError]:
    if not isinstance(spec, dict):
        return [FieldError.required(path)]
    errs: list[FieldError] = []
    for key in (
        "parallelism",
        "completions",
        "backoffLimit",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
    ):
        errs.extend(non_negative(spec.get(key), f"{path}.{key}"))
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and deadline == 0:
        errs.append(FieldError.invalid(f"{path}.activeDeadlineSeconds", deadline, "must be greater than 0"))
    mode = spec.get("completionMode")
    if mode not in (None, "NonIndexed", "Indexed"):
        errs.append(FieldError.not_supported(f"{path}.completionMode", mode, ("NonIndexed", "Indexed")))
    if mode == "Indexed" and spec.get("completions") is None:
        errs.append(FieldError.required(f"{path}.completions", "when completion mode is Indexed"))
    if generated_selector:
        if spec.get("selector") is None:
            errs.append(FieldError.required(f"{path}.selector"))
        else:
            errs.extend(validate_label_selector(spec.get("selector"), f"{path}.selector"))
    template = spec.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        errs.append(FieldError.required(f"{path}.template.spec"))
        return errs
    pod_spec = template["spec"]
    errs.extend(validate_pod_spec(pod_spec, f"{path}.template.spec"))
    if pod_spec.get("restartPolicy") not in ("OnFailure", "Never"):
        # kube-apiserver words it as a required value, not an unsupported one
        errs.append(
            FieldError.required(
                f"{path}.template.spec.restartPolicy", 'Required value: valid values: "OnFailure", "Never"'
            )
        )
    return errs


def job_completions(obj: Obj) -> str:
    """kubectl's COMPLETIONS cell (`printJob`)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = int(spec.get("parallelism") or 0)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 180:
        return f"{minutes}m" if minutes >= 10 or seconds % 60 == 0 else f"{minutes}m{seconds % 60}s"
    return f"{minutes // 60}h"


def _selector_text(selector: Any) -> str:
    if not isinstance(selector, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    return ",".join(parts) or "<none>"


class JobStrategy(SpecStrategy):
    group = "batch"
    kind = "Job"
    has_status_subresource = True
    initial_status: Obj = {}

    def default_spec(self, spec: dict[str, Any]) -> None:
        default_job_spec(spec)

    def prepare_for_create(self, obj: Obj) -> None:
        super().prepare_for_create(obj)
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get("manualSelector") is True:
            return
        uid = obj["metadata"]["uid"]
        spec["selector"] = {"matchLabels": {CONTROLLER_UID_LABEL: uid}}
        template = spec.get("template")
        if isinstance(template, dict):
            default_template_metadata(template)
            labels = template["metadata"].setdefault("labels", {}) or {}
            labels.update({CONTROLLER_UID_LABEL: uid, JOB_NAME_LABEL: obj["metadata"]["name"]})
            template["metadata"]["labels"] = labels

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec")
        errs = validate_job_spec(spec, "spec", generated_selector=True)
        if old is not None and isinstance(spec, dict):
            old_spec = old.get("spec") or {}
            for key in ("selector", "completions", "completionMode"):
                errs.extend(immutable(spec.get(key), old_spec.get(key), f"spec.{key}"))
            if not old_spec.get("suspend"):
                errs.extend(immutable(spec.get("template"), old_spec.get("template"), "spec.template"))
        return errs

    def validate_status(self, obj: Obj, old: Obj) -> list[FieldError]:
        status = obj.get("status") or {}
        errs: list[FieldError] = []
        for key in ("active", "succeeded", "failed"):
            errs.extend(non_negative(status.get(key), f"status.{key}"))
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        status = obj.get("status") or {}
        start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
        duration = ""
        if start is not None:
            duration = _duration(((end or dt.datetime.now(dt.UTC)) - start).total_seconds())
        cols = workload_columns(("Completions", "string"), ("Duration", "string"))
        template, selector = get_path(obj, "spec", "template"), get_path(obj, "spec", "selector")
        return cols, [job_completions(obj), duration, *workload_cells(template, _selector_text(selector))]


def valid_schedule(schedule: str) -> bool:
    """What `cron.ParseStandard` accepts: five fields or a `@` descriptor (robfig/cron)."""
    text = schedule.strip()
    if text.startswith("TZ=") or text.startswith("CRON_TZ="):
        return False  # v1.24 refuses a time zone in the schedule (spec.timeZone is not served)
    if text.startswith("@"):
        return text in ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
    return len(text.split()) == 5 and bool(croniter.is_valid(text))


class CronJobStrategy(SpecStrategy):
    group = "batch"
    kind = "CronJob"
    has_status_subresource = True
    initial_status: Obj = {}

    def default_spec(self, spec: dict[str, Any]) -> None:
        spec.setdefault("concurrencyPolicy", "Allow")
        spec.setdefault("suspend", False)
        spec.setdefault("successfulJobsHistoryLimit", 3)
        spec.setdefault("failedJobsHistoryLimit", 1)
        job_template = spec.get("jobTemplate")
        if isinstance(job_template, dict):
            job_template.setdefault("metadata", {})
            if job_template["metadata"].get("creationTimestamp") is None:
                job_template["metadata"]["creationTimestamp"] = None
            job_spec = job_template.get("spec")
            if isinstance(job_spec, dict):
                # only the template's pod spec: completions/parallelism are defaulted on the Job itself
                default_pod_template(job_spec.get("template"))

    def validate_spec(self, spec: dict[str, Any], obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        schedule = spec.get("schedule")
        if not schedule:
            errs.append(FieldError.required("spec.schedule"))
        elif not isinstance(schedule, str) or not valid_schedule(schedule):
            errs.append(FieldError.invalid("spec.schedule", schedule, "unparseable cron schedule"))
        policy = spec.get("concurrencyPolicy")
        if policy not in ("Allow", "Forbid", "Replace"):
            errs.append(
                FieldError.not_supported("spec.concurrencyPolicy", policy, ("Allow", "Forbid", "Replace"))
            )
        for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
            errs.extend(non_negative(spec.get(key), f"spec.{key}"))
        job_spec = get_path(spec, "jobTemplate", "spec")
        errs.extend(validate_job_spec(job_spec, "spec.jobTemplate.spec", generated_selector=False))
        return errs

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        last = parse_time(status.get("lastScheduleTime"))
        last_text = "<none>" if last is None else _duration((dt.datetime.now(dt.UTC) - last).total_seconds())
        cols = workload_columns(
            ("Schedule", "string"), ("Suspend", "boolean"), ("Active", "integer"), ("Last Schedule", "string")
        )
        template = get_path(spec, "jobTemplate", "spec", "template")
        selector = get_path(spec, "jobTemplate", "spec", "selector")
        return cols, [
            spec.get("schedule", ""),
            bool(spec.get("suspend")),
            len(status.get("active") or []),
            last_text,
            *workload_cells(template, _selector_text(selector)),
        ]
