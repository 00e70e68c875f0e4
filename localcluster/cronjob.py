"""The CronJob controller, simulated in-process as KCM's `cronjob_controllerv2.go` runs it.

Each sync finds the most recent schedule time missed since `status.lastScheduleTime` (or the
CronJob's creation), and, unless the CronJob is suspended, that time is older than
`startingDeadlineSeconds`, or `concurrencyPolicy: Forbid` finds a Job still running, creates
the Job `<cronjob>-<minutes since the epoch>` from `jobTemplate` (owned by the CronJob, so a
retry never makes two), `Replace` first deleting the running ones. `status.active` lists the
running Jobs, `lastScheduleTime` / `lastSuccessfulTime` follow them, and finished Jobs beyond
`successfulJobsHistoryLimit` / `failedJobsHistoryLimit` are deleted, oldest first. The key is
synced again at the next schedule time.

Schedules are read by `croniter` (five fields and the `@hourly`-style descriptors, as
`cron.ParseStandard`). The controller's clock is `now()` plus `offset`: tests move it forward
with `travel()` instead of waiting for the next minute.
"""

from __future__ import annotations

import copy
import datetime as dt

from croniter import croniter

from kubeutil.timestamps import format_time, parse_time
from localcluster import errors
from localcluster.builtin.base import get_int, get_path
from localcluster.job import finished_condition
from localcluster.keyed import KeyedLoop, add_unless_deleted, sync_stored, write_status
from localcluster.objects import ObjectAPI
from localcluster.recorder import EventRecorder
from localcluster.registry import Obj
from localcluster.revisions import controller_of, controller_ref
from localcluster.storage import StoredEvent

Key = tuple[str, str]
#: How many missed schedules the controller looks through before it gives up (`getRecentUnmetScheduleTimes`).
_TOO_MANY_MISSED = 100


def most_recent_schedule(
    schedule: str, since: dt.datetime, now: dt.datetime
) -> tuple[dt.datetime | None, dt.datetime]:
    """The latest schedule time in (since, now], and the next one after now."""
    it = croniter(schedule, since)
    last: dt.datetime | None = None
    for _ in range(_TOO_MANY_MISSED + 1):
        moment: dt.datetime = it.get_next(dt.datetime)
        if moment > now:
            return last, moment
        last = moment
    return last, croniter(schedule, now).get_next(dt.datetime)


class CronJobController:
    def __init__(self, objects: ObjectAPI) -> None:
        self.objects = objects
        self._cj_rt = objects.registry.require("batch", "v1", "cronjobs")
        self._job_rt = objects.registry.require("batch", "v1", "jobs")
        self.events = EventRecorder(objects, "cronjob-controller")
        self.loop: KeyedLoop[Key] = KeyedLoop(self.sync)
        self._on_cronjob = add_unless_deleted(self.loop)
        self.offset = dt.timedelta()

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC) + self.offset

    def travel(self, delta: dt.timedelta) -> None:
        """Move the controller's clock forward and look at every CronJob again."""
        self.offset += delta
        for entry in list(self.objects.storage.iter_entries(self._cj_rt.storage_key)):
            self.loop.add((entry.namespace, entry.name))

    async def run(self) -> None:
        watches = [(self._cj_rt.storage_key, self._on_cronjob), (self._job_rt.storage_key, self._on_job)]
        await self.loop.watch_and_run(self.objects.storage, watches)

    def _on_job(self, ev: StoredEvent) -> None:
        ref = controller_of(ev.obj)
        if ref is not None and ref.get("kind") == "CronJob":
            self.loop.add((ev.namespace, ref["name"]))

    def sync(self, key: Key) -> float | None:
        return sync_stored(self.objects.storage, self._cj_rt.storage_key, key, self._sync)

    def _jobs(self, cronjob: Obj) -> list[Obj]:
        uid = cronjob["metadata"]["uid"]
        return [
            job
            for e in self.objects.storage.iter_entries(
                self._job_rt.storage_key, cronjob["metadata"]["namespace"]
            )
            if (ref := controller_of(job := e.load())) is not None and ref.get("uid") == uid
        ]

    def _sync(self, cronjob: Obj) -> float | None:
        meta, spec = cronjob["metadata"], cronjob.get("spec") or {}
        if meta.get("deletionTimestamp"):
            return None
        status = copy.deepcopy(cronjob.get("status") or {})
        jobs = self._jobs(cronjob)
        running = [j for j in jobs if finished_condition(j) is None]
        for job in jobs:
            if finished_condition(job) == "Complete":
                done = parse_time(get_path(job, "status", "completionTime"))
                last_ok = parse_time(status.get("lastSuccessfulTime"))
                if done is not None and (last_ok is None or done > last_ok):
                    status["lastSuccessfulTime"] = format_time(done)
        now = self.now()
        since = parse_time(status.get("lastScheduleTime")) or parse_time(meta.get("creationTimestamp")) or now
        scheduled, upcoming = most_recent_schedule(str(spec.get("schedule", "")), since, now)
        if scheduled is not None and not spec.get("suspend"):
            deadline = spec.get("startingDeadlineSeconds")
            if isinstance(deadline, int) and (now - scheduled).total_seconds() > deadline:
                self.events.event(
                    cronjob,
                    "Warning",
                    "MissSchedule",
                    f"Missed scheduled time to start a job: {format_time(scheduled)}",
                )
            elif spec.get("concurrencyPolicy") == "Forbid" and running:
                pass  # skipped this time; looked at again at the next schedule
            else:
                if spec.get("concurrencyPolicy") == "Replace":
                    for job in running:
                        self._delete(cronjob, job)
                    running = []
                created = self._create(cronjob, scheduled)
                if created is not None:
                    running.append(created)
                status["lastScheduleTime"] = format_time(scheduled)
        status["active"] = [
            {
                "kind": "Job",
                "namespace": j["metadata"]["namespace"],
                "name": j["metadata"]["name"],
                "uid": j["metadata"]["uid"],
                "apiVersion": "batch/v1",
                "resourceVersion": j["metadata"].get("resourceVersion", ""),
            }
            for j in running
        ]
        if not status["active"]:
            del status["active"]
        self._clean_history(cronjob, jobs)
        write_status(self.objects, self._cj_rt, cronjob, status)
        return max((upcoming - now).total_seconds(), 0.0) + 0.1

    def _create(self, cronjob: Obj, scheduled: dt.datetime) -> Obj | None:
        meta = cronjob["metadata"]
        template = copy.deepcopy(get_path(cronjob, "spec", "jobTemplate", default={}))
        tmeta = template.get("metadata") or {}
        name = f"{meta['name']}-{int(scheduled.timestamp()) // 60}"
        job_meta: Obj = {
            "name": name,
            "namespace": meta["namespace"],
            "labels": dict(tmeta.get("labels") or {}),
            "annotations": dict(tmeta.get("annotations") or {}),
            "ownerReferences": [controller_ref(cronjob)],
        }
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": job_meta,
            "spec": template.get("spec") or {},
        }
        try:
            created = self.objects.create(self._job_rt, meta["namespace"], job).load()
        except errors.StatusError as exc:
            if exc.code == 409:
                return None  # made by an earlier sync: it is in the list next time
            self.events.event(cronjob, "Warning", "FailedCreate", f"Error creating job: {exc.message}")
            raise
        self.events.event(cronjob, "Normal", "SuccessfulCreate", f"Created job {name}")
        return created

    def _delete(self, cronjob: Obj, job: Obj) -> None:
        meta = job["metadata"]
        try:
            self.objects.delete(
                self._job_rt, meta["namespace"], meta["name"], propagation_policy="Background"
            )
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
            return
        self.events.event(cronjob, "Normal", "SuccessfulDelete", f"Deleted job {meta['name']}")

    def _clean_history(self, cronjob: Obj, jobs: list[Obj]) -> None:
        spec = cronjob.get("spec") or {}
        for outcome, limit in (
            ("Complete", get_int(spec, "successfulJobsHistoryLimit", default=3)),
            ("Failed", get_int(spec, "failedJobsHistoryLimit", default=1)),
        ):
            finished = sorted(
                (
                    j
                    for j in jobs
                    if finished_condition(j) == outcome and not j["metadata"].get("deletionTimestamp")
                ),
                key=lambda j: str(get_path(j, "status", "startTime", default="")),
            )
            for job in finished[: max(len(finished) - limit, 0)]:
                self._delete(cronjob, job)
