"""The eviction reconcile: delete a pod whose scheduled deletion came due.

The pod's `DisruptionTarget` condition (reason `DeletionByTaintManager`) is set through the status
subresource, then the pod is deleted with a UID precondition; a failure is retried five times
10 ms apart, as Go, then by the worker engine with the controller backoff (Go gives up until the
next update).

Deviation from Go, on purpose: the pod is read from the informer cache instead of a GET (the
patch and delete carry the UID, so a stale cache cannot hit a recreated pod); at the default
`--kube-api-qps` that is the difference between 6.7 and 10 evictions per second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import structlog

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS
from controllers.common.pods import get_pod_condition
from controllers.common.podstatus import patch_pod_condition
from controllers.context import EventRecorder
from controllers.tainteviction import metrics
from controllers.tainteviction.state import EVENT_REASON, EvictionSchedule, pod_reference
from informers import Lister
from kubeutil.conditions import Condition, new_condition
from kubeutil.meta import object_meta

DISRUPTION_TARGET = "DisruptionTarget"
REASON_DELETION_BY_TAINT_MANAGER = "DeletionByTaintManager"
MESSAGE_DELETION_BY_TAINT_MANAGER = "Taint manager: deleting due to NoExecute taint"
DELETE_RETRIES = 5
RETRY_SLEEP = 0.01

log = structlog.get_logger()


@dataclass(kw_only=True, eq=False)
class EvictionSync:
    """Deletes pods as their schedules fire; keys are pod keys."""

    client: KubeClient
    pod_lister: Lister
    schedule: EvictionSchedule
    recorder: EventRecorder

    async def sync(self, key: str) -> None:
        due = self.schedule.due_at.get(key, anyio.current_time())
        pod = self.pod_lister.get_by_key(key)
        if pod is None or str(object_meta(pod).get("uid", "")) != self.schedule.due_uid.get(key, ""):
            return  # gone, or a new pod under that name: its own events will judge it
        log.info("NoExecuteTaintManager is deleting pod", pod=key)  # KCM's line, at its level (V(0))
        self.recorder.event(pod_reference(key), "Normal", EVENT_REASON, f"Marking for deletion Pod {key}")
        error: Exception | None = None
        for _ in range(DELETE_RETRIES):
            try:
                await self._add_condition_and_delete(pod)
            except ApiError as exc:
                if exc.not_found or exc.conflict:
                    error = None  # gone, or replaced by a pod with another UID: nothing left to delete
                    break
                error = exc
                await anyio.sleep(RETRY_SLEEP)
            else:
                metrics.POD_DELETIONS_TOTAL.inc()
                metrics.POD_DELETION_DURATION.observe(max(0.0, anyio.current_time() - due))
                error = None
                break
        if error is not None:
            raise error  # the engine retries it with backoff

    async def _add_condition_and_delete(self, pod: Mapping[str, Any]) -> None:
        meta = object_meta(pod)
        namespace, name, uid = str(meta.get("namespace")), str(meta.get("name")), meta.get("uid")
        condition = disruption_target_update(get_pod_condition(dict(pod), DISRUPTION_TARGET))
        if condition is not None:
            await patch_pod_condition(self.client, pod, condition)
        await self.client.delete(PODS, name, namespace=namespace, preconditions={"uid": uid} if uid else None)


def disruption_target_update(current: Mapping[str, Any] | None) -> Condition | None:
    """`apipod.UpdatePodCondition` with the taint manager's `DisruptionTarget=True`, as a patch.

    None when the pod already carries that condition (status, reason and message). Otherwise the
    whole condition is replaced, as Go's is: the transition time is kept if the status was
    already True, and any `lastProbeTime` is cleared (the informer's projection drops that
    field, so it is cleared blindly; a no-op when absent).
    """
    if (
        current is not None
        and current.get("status") == "True"
        and current.get("reason") == REASON_DELETION_BY_TAINT_MANAGER
        and (current.get("message") or "") == MESSAGE_DELETION_BY_TAINT_MANAGER
    ):
        return None
    condition = new_condition(
        DISRUPTION_TARGET,
        "True",
        reason=REASON_DELETION_BY_TAINT_MANAGER,
        message=MESSAGE_DELETION_BY_TAINT_MANAGER,
    )
    if current is not None and current.get("status") == "True" and current.get("lastTransitionTime"):
        condition["lastTransitionTime"] = current["lastTransitionTime"]
    condition["lastProbeTime"] = None
    return condition
