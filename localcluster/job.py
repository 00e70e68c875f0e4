"""The Job controller, simulated in-process as KCM runs it (`pkg/controller/job/job_controller.go`).

- Active pods are kept at min(parallelism, completions - succeeded) (with no `completions`: at
  `parallelism` until a first pod succeeds, then none are added); a suspended Job has none.
  Pods carry the template's labels (`controller-uid`, `job-name`) and a controller reference;
  Indexed Jobs' pods get the `batch.kubernetes.io/job-completion-index` annotation and the
  lowest index neither succeeded nor running.
- `status.succeeded` / `status.failed` count finished pods (for `restartPolicy: OnFailure`,
  container restarts count as failures, as the controller's `pastBackoffLimitOnFailure`);
  `status.active` the running ones; `startTime` is set on the first sync that may run pods.
- A Job whose failures exceed `backoffLimit` (reason BackoffLimitExceeded) or that ran longer
  than `activeDeadlineSeconds` (DeadlineExceeded) gets `Failed=True` and its active pods are
  deleted; one with enough successes gets `Complete=True` and `completionTime`.

Not simulated: the pod-recreation backoff delay (a failed pod is replaced at once, bounded by
`backoffLimit`), `ttlSecondsAfterFinished` (finished Jobs are kept; KCM's TTL-after-finished
controller is a separate controller), tracking finalizers and `podFailurePolicy`.
"""

from __future__ import annotations

import copy
import datetime as dt

from kubeutil.timestamps import parse_time
from localcluster import podstate
from localcluster.builtin.base import get_int, get_path
from localcluster.keyed import PodOwnerController, write_status
from localcluster.objects import ObjectAPI, now_rfc3339
from localcluster.registry import Obj
from localcluster.revisions import controller_ref

COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


def finished_condition(job: Obj) -> str | None:
    """ "Complete" or "Failed" when the Job has that condition True, else None."""
    for cond in get_path(job, "status", "conditions", default=[]):
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def _restarts(pod: Obj) -> int:
    return sum(
        int(cs.get("restartCount") or 0) for cs in get_path(pod, "status", "containerStatuses", default=[])
    )


def _index_of(pod: Obj) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX_ANNOTATION)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _compress(indexes: list[int]) -> str:
    """`completedIndexes`: sorted intervals, "1,3-5"."""
    out: list[str] = []
    for i in sorted(set(indexes)):
        if out and "-" in out[-1] and int(out[-1].split("-")[1]) == i - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        elif out and "-" not in out[-1] and int(out[-1]) == i - 1:
            out[-1] = f"{out[-1]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


class JobController(PodOwnerController):
    def __init__(self, objects: ObjectAPI) -> None:
        super().__init__(objects, objects.registry.require("batch", "v1", "jobs"), "job-controller")

    def _sync(self, job: Obj) -> float | None:
        if finished_condition(job) is not None or job["metadata"].get("deletionTimestamp"):
            return None
        spec = job.get("spec") or {}
        status: Obj = copy.deepcopy(job.get("status") or {})
        pods = self._pods(job)
        active = [
            p
            for p in pods
            if podstate.phase(p) not in ("Succeeded", "Failed") and not podstate.is_terminating(p)
        ]
        succeeded_pods = [p for p in pods if podstate.phase(p) == "Succeeded"]
        failed_pods = [p for p in pods if podstate.phase(p) == "Failed"]
        on_failure = get_path(spec, "template", "spec", "restartPolicy") == "OnFailure"
        failed = len(failed_pods) + (sum(_restarts(p) for p in active) if on_failure else 0)
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions")
        if indexed:
            done = sorted(
                {i for p in succeeded_pods if (i := _index_of(p)) is not None and i < int(completions or 0)}
            )
            succeeded = len(done)
            if done:
                status["completedIndexes"] = _compress(done)
        else:
            succeeded = len(succeeded_pods)
        suspended = bool(spec.get("suspend"))
        now = dt.datetime.now(dt.UTC)
        wait: float | None = None
        if not suspended and not status.get("startTime"):
            status["startTime"] = now_rfc3339()
        deadline = spec.get("activeDeadlineSeconds")
        started = parse_time(status.get("startTime"))
        failure: tuple[str, str] | None = None
        if failed > get_int(spec, "backoffLimit", default=6):
            failure = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif isinstance(deadline, int) and started is not None and not suspended:
            left = deadline - (now - started).total_seconds()
            if left <= 0:
                failure = ("DeadlineExceeded", "Job was active longer than specified deadline")
            else:
                wait = left
        if failure is not None:
            for pod in active:
                self._delete(job, pod)
            active = []
            self._condition(status, "Failed", *failure)
            self.events.event(job, "Warning", failure[0], failure[1])
        else:
            complete = succeeded >= completions if completions is not None else succeeded > 0 and not active
            if complete:
                self._condition(status, "Complete", None, None)
                status["completionTime"] = now_rfc3339()
                self.events.event(job, "Normal", "Completed", "Job completed")
                for pod in active if completions is not None else []:
                    self._delete(job, pod)
                active = []
            else:
                active = self._manage(job, active, succeeded_pods, succeeded, suspended)
        for key, value in (("active", len(active)), ("succeeded", succeeded), ("failed", failed)):
            if value:
                status[key] = value
            else:
                status.pop(key, None)
        write_status(self.objects, self._owner_rt, job, status)
        return wait

    @staticmethod
    def _condition(status: Obj, type_: str, reason: str | None, message: str | None) -> None:
        now = now_rfc3339()
        cond: Obj = {"type": type_, "status": "True", "lastProbeTime": now, "lastTransitionTime": now}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        status["conditions"] = [*(c for c in status.get("conditions") or [] if c.get("type") != type_), cond]

    def _manage(
        self, job: Obj, active: list[Obj], succeeded_pods: list[Obj], succeeded: int, suspended: bool
    ) -> list[Obj]:
        spec = job.get("spec") or {}
        parallelism = max(get_int(spec, "parallelism", default=1), 0)
        completions = spec.get("completions")
        if suspended:
            want = 0
        elif completions is None:
            want = 0 if succeeded > 0 else parallelism
        else:
            want = max(min(int(completions) - succeeded, parallelism), 0)
        if len(active) > want:
            extra = sorted(
                active,
                key=lambda p: (podstate.is_running_and_ready(p), p["metadata"].get("creationTimestamp", "")),
            )
            for pod in extra[: len(active) - want]:
                self._delete(job, pod)
            return extra[len(active) - want :]
        indexes: list[int | None] = [None] * (want - len(active))
        if spec.get("completionMode") == "Indexed":
            taken = {_index_of(p) for p in [*active, *succeeded_pods]}
            free = (i for i in range(int(completions or 0)) if i not in taken)
            indexes = [next(free, None) for _ in indexes]
            indexes = [i for i in indexes if i is not None]
        for index in indexes:
            active.append(self._create(job, index))
        return active

    def _create(self, job: Obj, index: int | None) -> Obj:
        meta = job["metadata"]
        template = copy.deepcopy(get_path(job, "spec", "template", default={}))
        tmeta = template.get("metadata") or {}
        pod_meta: Obj = {
            "generateName": f"{meta['name']}-" if index is None else f"{meta['name']}-{index}-",
            "namespace": meta["namespace"],
            "labels": dict(tmeta.get("labels") or {}),
            "ownerReferences": [controller_ref(job)],
        }
        annotations = dict(tmeta.get("annotations") or {})
        if index is not None:
            annotations[COMPLETION_INDEX_ANNOTATION] = str(index)
        if annotations:
            pod_meta["annotations"] = annotations
        pod_spec = template.get("spec") or {}
        if index is not None:
            pod_spec.setdefault("hostname", f"{meta['name']}-{index}")
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}
        return self._create_pod(job, pod).load()

    def _delete(self, job: Obj, pod: Obj) -> None:
        self._delete_pod(job, pod, gone=(404, 409))
