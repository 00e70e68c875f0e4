"""Drain: EvacuationRequest on the pods of a node, withdrawal, and the eviction fallback.

The KEP's drain is a request, not an action: the controller sets the pod condition
`EvacuationRequest=True` (reason `NodeMaintenance`, message `spec.reason`) and the pod's owner answers
with `EvacuationInitiated=True` and moves the pod (the Deployment controller surges first). Pods are
picked with `kubectl drain`'s filters (`staging/src/k8s.io/kubectl/pkg/drain/filters.go`), in its
order: DaemonSet pods are left alone (`--ignore-daemonsets`: neither evicted nor waited for), mirror
(static) pods are skipped, and pods that already finished (Succeeded/Failed) hold nothing on the node.
`spec.podSelector` narrows the drain to the pods it matches, as `--pod-selector`.

So that a maintenance always completes, a pod whose owner cannot answer (see `workload.py`) is
evicted through the eviction API, which honours PodDisruptionBudgets, as soon as its node drains;
one whose owner may answer is evicted only if it has not answered within the timeout (the
workload's own, else the maintenance's `evacuationTimeoutSeconds`), or answered
`EvacuationInitiated=False` ("I cannot"). `evacuationTimeoutSeconds: 0` means no such deadline:
pods whose owners may answer are never evicted, only the ones nobody answers for.

The eviction fallback never loses data without an opt-in, exactly as `kubectl drain` refuses:
a pod with an `emptyDir` volume needs `spec.deleteEmptyDirData`, a pod with no controller needs
`spec.force`. Until then such a pod is reported as blocking with kubectl's own message. A 429 is a
PDB saying "not now": like `kubectl drain` we try again after a pause (the server's Retry-After,
else 5 s), never in a hot loop, and the pod is reported as blocking with the budget's name.

Conditions with another reason belong to another requester (a descheduler, say): never overwritten,
never withdrawn; they still count as a request for the timeout.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS
from controllers.common.controller_ref import get_controller_of
from controllers.common.evacuation import (
    EVACUATION_INITIATED,
    EVACUATION_REQUEST,
    REASON_NODE_MAINTENANCE,
)
from controllers.common.patches import stale_plan_is_conflict
from controllers.common.pods import get_pod_condition, is_pod_terminal
from controllers.nodemaintenance.workload import Answer, Workload
from kubeutil.conditions import condition_index
from kubeutil.selectors import Selector
from kubeutil.timestamps import format_time, parse_time

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
# `kubectl drain` waits this long before retrying an eviction refused with 429.
EVICTION_RETRY_SECONDS = 5.0
# An eviction that fails otherwise (a pod under two PDBs gets a 500 every time) is an error: retried
# with a per-pod exponential backoff from EVICTION_RETRY_SECONDS up to client-go's 1000 s cap.
EVICTION_FAILURE_BACKOFF_CAP = 1000.0

BLOCK_AWAITING_OWNER = "AwaitingEvacuation"
BLOCK_EVICTION_REFUSED = "EvictionRefused"
BLOCK_EVICTION_FAILED = "EvictionFailed"
BLOCK_TERMINATING = "Terminating"
BLOCK_LOCAL_STORAGE = "LocalStorage"
BLOCK_NO_CONTROLLER = "NoController"
BLOCK_ONE_AT_A_TIME = "WaitingForSibling"

# kubectl's messages (filters.go: `localStorageFatal` as `errors()` prints it, `unmanagedFatal`).
LOCAL_STORAGE_FATAL = "cannot delete Pods with local storage (use --delete-emptydir-data to override)"
UNMANAGED_FATAL = "cannot delete Pods that declare no controller (use --force to override)"
DAEMONSET_FATAL = "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
# kubectl's warnings for what it lets through or leaves.
DAEMONSET_WARNING = "ignoring DaemonSet-managed Pods"
LOCAL_STORAGE_WARNING = "deleting Pods with local storage"
UNMANAGED_WARNING = "deleting Pods that declare no controller"


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    ref = get_controller_of(pod)
    return ref is not None and ref.get("kind") == "DaemonSet"


def is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    return MIRROR_POD_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def has_local_storage(pod: Mapping[str, Any]) -> bool:
    """kubectl's `hasLocalStorage`: any `emptyDir` volume."""
    return any(v.get("emptyDir") is not None for v in (pod.get("spec") or {}).get("volumes") or [])


def is_targeted(pod: Mapping[str, Any]) -> bool:
    """A pod a drain must see leave the node (before `spec.podSelector` narrows it)."""
    return not (is_daemonset_pod(pod) or is_mirror_pod(pod) or is_pod_terminal(pod))


@dataclass(frozen=True, slots=True)
class DrainOptions:
    """The maintenance's `kubectl drain` flags: opt-ins for data loss, a pod filter, a grace period."""

    force: bool = False
    delete_emptydir_data: bool = False
    pod_selector: Selector | None = None
    grace_period_seconds: int | None = None

    def selects(self, pod: Mapping[str, Any]) -> bool:
        return self.pod_selector is None or self.pod_selector.matches(
            (pod.get("metadata") or {}).get("labels")
        )

    def refusal(self, pod: Mapping[str, Any]) -> tuple[str, str] | None:
        """Why the eviction fallback must not delete `pod` (kubectl's reason and message), if it must not."""
        if is_pod_terminal(pod):
            return None
        if has_local_storage(pod) and not self.delete_emptydir_data:
            return BLOCK_LOCAL_STORAGE, LOCAL_STORAGE_FATAL
        if get_controller_of(pod) is None and not self.force:
            return BLOCK_NO_CONTROLLER, UNMANAGED_FATAL
        return None


def after(start: datetime, seconds: float) -> datetime:
    """`start + seconds`, saturating at the largest date instead of overflowing."""
    try:
        return start + timedelta(seconds=seconds)
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)


class Action(enum.Enum):
    NONE = "none"  # not ours to touch, or nothing to do
    REQUEST = "request"  # set EvacuationRequest=True
    WAIT = "wait"  # requested, the owner has until `deadline` (None: no deadline)
    EVACUATING = "evacuating"  # the owner answered EvacuationInitiated=True
    EVICT = "evict"  # nobody answers, or not in time: evict
    BLOCK = "block"  # due for eviction, but it would lose data the maintenance did not allow to lose
    TERMINATING = "terminating"  # already being deleted
    WITHDRAW = "withdraw"  # our request, no maintenance drains the node (or selects the pod) any more


@dataclass(frozen=True, slots=True)
class PodPlan:
    action: Action
    deadline: datetime | None = None
    reason: str = ""  # BLOCK: kubectl's filter; EVICT: why now
    message: str = ""


def plan_pod(
    pod: Mapping[str, Any],
    *,
    draining: bool,
    timeout: float,
    now: datetime,
    options: DrainOptions | None = None,
    workload: Workload | None = None,
) -> PodPlan:
    """What the drain does with one pod of a node that is (or is no longer) being drained.

    `timeout` is the maintenance's `evacuationTimeoutSeconds` (0: no deadline for pods whose owner
    may answer); `workload` says who owns the pod (default: an owner that may answer).
    """
    opts = options or DrainOptions()
    work = workload or Workload(Answer.MAY)
    request = get_pod_condition(pod, EVACUATION_REQUEST)
    requested = request is not None and request.get("status") == "True"
    ours = requested and request is not None and request.get("reason") == REASON_NODE_MAINTENANCE
    if not draining:
        return PodPlan(Action.WITHDRAW if ours else Action.NONE)
    if not is_targeted(pod):
        return PodPlan(Action.NONE)
    if not opts.selects(pod):
        return PodPlan(Action.WITHDRAW if ours else Action.NONE)
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return PodPlan(Action.TERMINATING)
    wait = work.timeout if work.timeout is not None else (None if timeout <= 0 else timeout)
    if not requested or request is None:
        due = now if work.evict_promptly else (after(now, wait) if wait is not None else None)
        return PodPlan(Action.REQUEST, due)
    requested_at = parse_time(request.get("lastTransitionTime")) or now
    initiated = get_pod_condition(pod, EVACUATION_INITIATED)
    if initiated is not None:
        status = initiated.get("status")
        if status == "True":
            return PodPlan(Action.EVACUATING)
        answered_at = parse_time(initiated.get("lastTransitionTime"))
        if status == "False" and answered_at is not None and answered_at >= requested_at:
            return _evict(pod, opts, "the owner answered that it cannot evacuate the pod")
    if work.evict_promptly:
        why = (
            "the pod has no controller to answer the EvacuationRequest"
            if work.answer is Answer.NONE
            else f"{work.owner} cannot answer the EvacuationRequest"
        )
        return _evict(pod, opts, why)
    if wait is None:
        return PodPlan(Action.WAIT, None)
    deadline = after(requested_at, wait)
    if now >= deadline:
        who = "nobody" if work.answer is Answer.NONE else work.owner
        return _evict(pod, opts, f"{who} did not answer the EvacuationRequest within {wait:g}s")
    return PodPlan(Action.WAIT, deadline)


def _evict(pod: Mapping[str, Any], opts: DrainOptions, why: str) -> PodPlan:
    refused = opts.refusal(pod)
    if refused is not None:
        return PodPlan(Action.BLOCK, reason=refused[0], message=refused[1])
    return PodPlan(Action.EVICT, message=why)


# -- writes ---------------------------------------------------------------------------------------


def _pod_ref(pod: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("resourceVersion", ""))


async def request_evacuation(
    client: KubeClient, pod: Mapping[str, Any], *, message: str, now: datetime
) -> None:
    """Set `EvacuationRequest=True` with a JSON patch guarded by the resourceVersion we planned on.

    JSON patch rather than a merge patch because a merge patch replaces the whole conditions list
    (the kubelet's Ready would be lost to a stale cache); the `test` makes a stale plan fail (retried).
    """
    namespace, name, rv = _pod_ref(pod)
    condition = {
        "type": EVACUATION_REQUEST,
        "status": "True",
        "reason": REASON_NODE_MAINTENANCE,
        "message": message,
        "lastTransitionTime": format_time(now),
    }
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}]
    existing = condition_index(pod.get("status"), EVACUATION_REQUEST)
    if existing is not None:
        ops.append({"op": "replace", "path": f"/status/conditions/{existing}", "value": condition})
    elif (pod.get("status") or {}).get("conditions"):
        ops.append({"op": "add", "path": "/status/conditions/-", "value": condition})
    else:
        ops.append({"op": "add", "path": "/status/conditions", "value": [condition]})
    with stale_plan_is_conflict():
        await client.patch(PODS, name, ops, namespace=namespace, subresource="status", patch_type="json")


async def withdraw_evacuation(client: KubeClient, pod: Mapping[str, Any]) -> None:
    """Remove our `EvacuationRequest`, testing that the slot still holds our condition."""
    index = condition_index(pod.get("status"), EVACUATION_REQUEST)
    if index is None:
        return
    namespace, name, _rv = _pod_ref(pod)
    base = f"/status/conditions/{index}"
    ops = [
        {"op": "test", "path": f"{base}/type", "value": EVACUATION_REQUEST},
        {"op": "test", "path": f"{base}/reason", "value": REASON_NODE_MAINTENANCE},
        {"op": "remove", "path": base},
    ]
    try:
        with stale_plan_is_conflict():
            await client.patch(PODS, name, ops, namespace=namespace, subresource="status", patch_type="json")
    except ApiError as exc:
        if not exc.not_found:
            raise


# A 409 from the eviction API (its PodDisruptionBudget changed under it, or the pod did): look again soon.
EVICTION_CONFLICT_RETRY_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class EvictionOutcome:
    """`blocked_reason` is None when the pod is gone or going (or `conflict`); else retry after `retry_after`."""

    blocked_reason: str | None = None
    message: str = ""
    retry_after: float = 0.0
    conflict: bool = False


def failure_backoff(failures: int) -> float:
    """The wait after the `failures`-th failed eviction of one pod in a row (1 -> 5 s, doubling)."""
    return min(EVICTION_RETRY_SECONDS * 2.0 ** min(max(failures - 1, 0), 30), EVICTION_FAILURE_BACKOFF_CAP)


def refusal_message(exc: ApiError) -> str:
    """The server's message with its causes, which name the budget ("The disruption budget web needs ...")."""
    causes = [
        str(c.get("message"))
        for c in exc.details.get("causes") or []
        if isinstance(c, dict) and c.get("message")
    ]
    return " ".join([exc.message, *causes]) if causes else exc.message


async def evict(
    client: KubeClient, pod: Mapping[str, Any], *, grace_period_seconds: int | None = None
) -> EvictionOutcome:
    """One eviction attempt, as `kubectl drain`'s `evictPods` makes one per round."""
    namespace, name, _rv = _pod_ref(pod)
    uid = (pod.get("metadata") or {}).get("uid")
    options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if uid:
        options["preconditions"] = {"uid": uid}  # never evict a new pod that took the name
    if grace_period_seconds is not None and grace_period_seconds >= 0:
        options["gracePeriodSeconds"] = grace_period_seconds
    try:
        await client.evict(namespace, name, delete_options=options)
    except ApiError as exc:
        if exc.not_found:
            return EvictionOutcome()
        if exc.conflict:
            # A precondition on the uid (a new pod took the name) or a budget updated concurrently:
            # neither is an error nor a refusal; the next look sees which.
            return EvictionOutcome(
                message=exc.message, retry_after=EVICTION_CONFLICT_RETRY_SECONDS, conflict=True
            )
        if exc.too_many_requests:
            wait = exc.retry_after_seconds or EVICTION_RETRY_SECONDS
            return EvictionOutcome(BLOCK_EVICTION_REFUSED, refusal_message(exc), max(wait, 1.0))
        return EvictionOutcome(BLOCK_EVICTION_FAILED, exc.message, EVICTION_RETRY_SECONDS)
    return EvictionOutcome()


def combine(options: Sequence[DrainOptions]) -> DrainOptions:
    """The options of several maintenances draining one pod: data is lost only if every one allows it.

    The grace period override applies only when all of them give one (the longest); otherwise the
    pod's own. The pod selectors have already chosen the pod, so the result has none.
    """
    graces = [o.grace_period_seconds for o in options]
    return DrainOptions(
        force=bool(options) and all(o.force for o in options),
        delete_emptydir_data=bool(options) and all(o.delete_emptydir_data for o in options),
        grace_period_seconds=max(g for g in graces if g is not None)
        if graces and None not in graces
        else None,
    )


def combine_timeouts(timeouts: Sequence[float]) -> float:
    """The shortest deadline of several maintenances; 0 (no deadline) only if none gives one."""
    positive = [t for t in timeouts if t > 0]
    return min(positive) if positive else 0.0


# -- what happens to a pod, in words (dry runs) ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Preview:
    """One pod's fate: `verb` is surge, evict, wait, skip or block; `why` says why in a sentence."""

    verb: str
    why: str


def preview(pod: Mapping[str, Any], *, options: DrainOptions, workload: Workload, timeout: float) -> Preview:
    """What a fresh maintenance with `options` does to `pod`, by the same rules as `plan_pod`."""
    if is_mirror_pod(pod):
        return Preview("skip", "mirror (static) pod, managed by the kubelet")
    if is_daemonset_pod(pod):
        return Preview("skip", f"{DAEMONSET_WARNING} (a DaemonSet pod is not evacuated)")
    if is_pod_terminal(pod):
        return Preview("skip", "already finished")
    if not options.selects(pod):
        return Preview("skip", "not matched by the pod selector")
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return Preview("wait", "already terminating")
    if workload.answer is Answer.WILL:
        return Preview(
            "surge", f"{workload.describe()}: a replacement becomes available elsewhere before the pod goes"
        )
    refused = options.refusal(pod)
    wait = workload.timeout if workload.timeout is not None else (timeout if timeout > 0 else None)
    if workload.evict_promptly:
        if refused is not None:
            return Preview("block", refused[1])
        who = "no controller" if workload.answer is Answer.NONE else workload.describe()
        return Preview("evict", f"{who}: evicted as soon as the node drains, under its PodDisruptionBudget")
    then = (
        "then blocks: " + refused[1] if refused is not None else "then evicted under its PodDisruptionBudget"
    )
    if wait is None:
        return Preview("wait", f"{workload.describe()}: waits for its owner, no eviction deadline")
    return Preview("wait", f"{workload.describe()}: waits {wait:g}s for its owner to answer, {then}")


@dataclass(frozen=True, slots=True)
class KubectlVerdict:
    """kubectl's `PodDeleteStatus`: delete or not, and `Okay`/`Skip`/`Warning`/`Error` with a message."""

    delete: bool
    kind: str
    message: str = ""


def kubectl_filter(
    pod: Mapping[str, Any],
    *,
    force: bool,
    delete_emptydir_data: bool,
    ignore_daemonsets: bool,
    daemonset_error: str | None = None,
) -> KubectlVerdict:
    """`kubectl drain`'s filters in its order, stopping at the first that keeps the pod.

    `daemonset_error` is the error of getting the pod's DaemonSet (None when it exists); a
    DaemonSet that is gone (a message ending "not found") lets `force` delete the orphan.
    """
    verdict = KubectlVerdict(True, "Okay")
    for check in (_kubectl_daemonset, _kubectl_mirror, _kubectl_local_storage, _kubectl_unreplicated):
        verdict = check(pod, force, delete_emptydir_data, ignore_daemonsets, daemonset_error)
        if not verdict.delete:
            break
    return verdict


def _kubectl_daemonset(
    pod: Mapping[str, Any], force: bool, _e: bool, ignore: bool, error: str | None
) -> KubectlVerdict:
    if not is_daemonset_pod(pod) or is_pod_terminal(pod):
        return KubectlVerdict(True, "Okay")
    if error is not None:
        if error.endswith("not found") and force:
            return KubectlVerdict(True, "Warning", error)
        return KubectlVerdict(False, "Error", error)
    if not ignore:
        return KubectlVerdict(False, "Error", DAEMONSET_FATAL)
    return KubectlVerdict(False, "Warning", DAEMONSET_WARNING)


def _kubectl_mirror(pod: Mapping[str, Any], _f: bool, _e: bool, _i: bool, _d: str | None) -> KubectlVerdict:
    return KubectlVerdict(False, "Skip") if is_mirror_pod(pod) else KubectlVerdict(True, "Okay")


def _kubectl_local_storage(
    pod: Mapping[str, Any], _f: bool, allow: bool, _i: bool, _d: str | None
) -> KubectlVerdict:
    if not has_local_storage(pod) or is_pod_terminal(pod):
        return KubectlVerdict(True, "Okay")
    if not allow:
        return KubectlVerdict(False, "Error", LOCAL_STORAGE_FATAL)
    return KubectlVerdict(True, "Warning", LOCAL_STORAGE_WARNING)


def _kubectl_unreplicated(
    pod: Mapping[str, Any], force: bool, _e: bool, _i: bool, _d: str | None
) -> KubectlVerdict:
    if is_pod_terminal(pod) or get_controller_of(pod) is not None:
        return KubectlVerdict(True, "Okay")
    if force:
        return KubectlVerdict(True, "Warning", UNMANAGED_WARNING)
    return KubectlVerdict(False, "Error", UNMANAGED_FATAL)
