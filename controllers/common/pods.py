"""Pod state as `pkg/api/v1/pod/util.go` and `pkg/controller/controller_utils.go` read it.

Every controller asks the same questions of a pod (ready? available after minReadySeconds?
still counted, or terminating or terminal?); they must all get the same answer, so the answers
live here and nowhere else. Pods are the informers' plain dicts and are never mutated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from kubeutil.conditions import get_condition
from kubeutil.strconv import parse_int
from kubeutil.timestamps import parse_time

Obj = Mapping[str, Any]

POD_READY = "Ready"
PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"
PHASE_UNKNOWN = "Unknown"

POD_DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
# `validFirstDigit`: a minus, a lone zero, or a digit 1-9 first.
_VALID_FIRST_DIGIT = re.compile(r"-|0$|[1-9]")


def pod_key(pod: Obj) -> str:
    """`namespace/name`, the key expectations and work queues use (`controller.PodKey`)."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def get_pod_condition(pod: Obj, condition_type: str) -> Mapping[str, Any] | None:
    """The pod's condition of `condition_type`, or None (`podutil.GetPodCondition`)."""
    return get_condition(pod.get("status"), condition_type)


def get_pod_ready_condition(pod: Obj) -> Mapping[str, Any] | None:
    return get_pod_condition(pod, POD_READY)


def is_condition_true(pod: Obj, condition_type: str) -> bool:
    cond = get_pod_condition(pod, condition_type)
    return cond is not None and cond.get("status") == "True"


def is_pod_ready(pod: Obj) -> bool:
    """The `Ready` condition is `True` (`podutil.IsPodReady`)."""
    return is_condition_true(pod, POD_READY)


def is_pod_available(pod: Obj, min_ready_seconds: int, now: datetime) -> bool:
    """Ready, and ready for longer than `min_ready_seconds` (`podutil.IsPodAvailable`).

    As Kubernetes: with minReadySeconds 0 a ready pod is available at once; otherwise the Ready
    condition's `lastTransitionTime + minReadySeconds` must be strictly before `now`.
    """
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds == 0:
        return True
    cond = get_pod_ready_condition(pod)
    since = parse_time((cond or {}).get("lastTransitionTime"))
    return since is not None and since + timedelta(seconds=min_ready_seconds) < now


def seconds_until_available(pod: Obj, min_ready_seconds: int, now: datetime) -> float | None:
    """How long until a ready pod becomes available; None when it is not ready or already available."""
    if min_ready_seconds <= 0 or not is_pod_ready(pod) or is_pod_available(pod, min_ready_seconds, now):
        return None
    since = parse_time((get_pod_ready_condition(pod) or {}).get("lastTransitionTime"))
    if since is None:
        return None
    return max(0.0, (since + timedelta(seconds=min_ready_seconds) - now).total_seconds())


def is_terminating(pod: Obj) -> bool:
    """`metadata.deletionTimestamp` is set: the pod is going away and no longer counts."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_pod_terminal(pod: Obj) -> bool:
    """Phase `Succeeded` or `Failed`: the pod will never run again."""
    return (pod.get("status") or {}).get("phase") in (PHASE_SUCCEEDED, PHASE_FAILED)


def is_pod_active(pod: Obj) -> bool:
    """Neither terminal nor terminating (`controller.IsPodActive`): what replica counts count."""
    return not is_pod_terminal(pod) and not is_terminating(pod)


def filter_active_pods(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`controller.FilterActivePods`."""
    return [p for p in pods if is_pod_active(p)]


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def node_name(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def max_container_restarts(pod: Obj) -> int:
    """The highest `restartCount` of the pod's containers (0 with none)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    return max((int(s.get("restartCount") or 0) for s in statuses), default=0)


def deletion_cost(pod: Obj) -> int:
    """`controller.kubernetes.io/pod-deletion-cost` as an int32; 0 when absent or invalid.

    As `helper.GetDeletionCostFromPodAnnotations`, whose error the ranking ignores: a leading `+`
    or zero (`+10`, `008`) is invalid there, though `strconv.ParseInt` would take it.
    """
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(POD_DELETION_COST_ANNOTATION)
    if raw is None:
        return 0
    text = str(raw)
    if not _VALID_FIRST_DIGIT.match(text):
        return 0
    return parse_int(text, 32) or 0
