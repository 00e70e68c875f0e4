"""Drain through EvictionRequests (`spec.evictionAPI: EvictionRequest`): the maintenance as a requester.

Instead of the `EvacuationRequest` pod condition and its eviction fallback, each pod to evacuate
gets an EvictionRequest (KEP-4563) with requester `nodemaintenance.aiokcm.io/drain`. The pod's
eviction responders (its workload controller first, the imperative evictor last, which evicts
under the PodDisruptionBudgets) then move it; the maintenance only asks, withdraws and watches.

One request per pod, not per maintenance: the API keeps one intent per requester and pod (the
Eviction's `status.requesters` is keyed by requester name), and the node sync already composes the
maintenances that drain a pod into one decision, as it does for the pod condition. The request is
named from the pod's name, UID and the requester (`evictionapi.requester.request_name`), so it is
found again after a restart, and it is owned (ownerReferences) by every maintenance that drains the
pod, so the garbage collector removes it with the last of them. When no maintenance drains the pod
any more (the maintenance ends, is deleted, or stops selecting the pod) its intent is set to
Withdrawn.

What stays the drain's own, whichever way it asks: DaemonSet, mirror and finished pods are not
asked; a pod whose eviction would lose data without the maintenance's opt-in (`force`,
`deleteEmptyDirData`, as `kubectl drain` refuses) gets no request and is reported as blocking.
`evacuationTimeoutSeconds` does not apply: the responders' heartbeats (20 min) pace the hand-over.
A request that failed (`Failed=True`: no responder managed) is reported as blocking with its
message and is not retried by the controller; deleting it makes the next sync ask again.

Planning is pure (`plan_request`, `pod_state`); the writes are `create_request` and `patch_request`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apiclient import ApiError, KubeClient
from apiclient.resources import NODEMAINTENANCES
from controllers.nodemaintenance import api
from controllers.nodemaintenance.drain import (
    BLOCK_AWAITING_OWNER,
    BLOCK_TERMINATING,
    DrainOptions,
    is_targeted,
)
from controllers.nodemaintenance.status import BlockingPod, NodeProgress
from controllers.nodemaintenance.status import node_progress as condition_progress
from evictionapi import names, requests
from evictionapi.requester import new_request, request_name
from evictionapi.served import EvictionAPI

Obj = Mapping[str, Any]

REQUESTER = "nodemaintenance.aiokcm.io/drain"
# A pod whose EvictionRequest failed: no responder evicted it (a budget that never allows it, say).
BLOCK_REQUEST_FAILED = "EvictionRequestFailed"
# Why a maintenance in this mode cannot start without the API behind it.
GATE_OFF = (
    "spec.evictionAPI: EvictionRequest needs the EvictionRequestAPI feature gate of the controller "
    "manager; nothing is started until it is on or evictionAPI is PodCondition"
)
LABELS = {"app.kubernetes.io/managed-by": "aiokcm-nodemaintenance"}


def name_for(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return request_name(str(meta.get("name") or ""), str(meta.get("uid") or ""), REQUESTER)


def owner_reference(m: api.Maintenance) -> dict[str, Any]:
    """A plain ownerReference (no blockOwnerDeletion, which would need rights on the owner's finalizers)."""
    return {
        "apiVersion": NODEMAINTENANCES.api_version,
        "kind": NODEMAINTENANCES.kind,
        "name": m.name,
        "uid": m.uid,
    }


def owners_of(request: Obj | None) -> list[dict[str, Any]]:
    return [dict(o) for o in ((request or {}).get("metadata") or {}).get("ownerReferences") or []]


def wanted_owners(request: Obj | None, drainers: Sequence[api.Maintenance]) -> list[dict[str, Any]]:
    """The request's owners with every maintenance that drains the pod added (none removed: a
    maintenance that stops draining still owns its withdrawn request until it is deleted)."""
    owners = owners_of(request)
    known = {o.get("uid") for o in owners}
    return owners + [owner_reference(m) for m in drainers if m.uid not in known]


class RequestAction(enum.Enum):
    NONE = "none"  # not ours to ask for, nothing to withdraw
    CREATE = "create"  # ask: create the request
    REQUEST = "request"  # ask again: the request is there, Withdrawn
    ADOPT = "adopt"  # another maintenance drains the pod too: add it to the owners
    WAIT = "wait"  # asked; the responders are at work (or the request settled)
    WITHDRAW = "withdraw"  # asked, and no maintenance wants the pod gone any more
    BLOCK = "block"  # not asked: evicting it would lose data the maintenances did not allow to lose
    TERMINATING = "terminating"  # already being deleted


@dataclass(frozen=True, slots=True)
class RequestPlan:
    action: RequestAction
    reason: str = ""
    message: str = ""


def plan_request(
    pod: Obj, request: Obj | None, *, drainers: Sequence[api.Maintenance], options: DrainOptions
) -> RequestPlan:
    """What the drain does with one pod's EvictionRequest.

    `drainers` are the maintenances in this mode that drain the pod's node and select the pod
    (their options combined into `options`); empty when none does any more.
    """
    asking = request is not None and requests.wants_eviction(request)
    if not drainers or not is_targeted(pod):
        return RequestPlan(RequestAction.WITHDRAW if asking else RequestAction.NONE)
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return RequestPlan(RequestAction.TERMINATING)
    if request is None:
        refused = options.refusal(pod)
        if refused is not None:
            return RequestPlan(RequestAction.BLOCK, refused[0], refused[1])
        return RequestPlan(RequestAction.CREATE)
    if not asking:
        return RequestPlan(RequestAction.REQUEST)
    if len(wanted_owners(request, drainers)) != len(owners_of(request)):
        return RequestPlan(RequestAction.ADOPT)
    return RequestPlan(RequestAction.WAIT)


@dataclass(frozen=True, slots=True)
class PodState:
    """One pod of a draining node as the status counts it."""

    evacuating: bool = False  # a request is asking and has not failed
    reason: str = ""  # else why it is listed in blockingPods
    message: str = ""


def pod_state(pod: Obj, request: Obj | None, *, options: DrainOptions) -> PodState:
    """A targeted, selected pod still on its node: evacuating, waiting for its request, or blocked."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return PodState(reason=BLOCK_TERMINATING, message="waiting for the pod to terminate")
    if request is None:
        refused = options.refusal(pod)
        if refused is not None:
            return PodState(reason=refused[0], message=refused[1])
        return PodState(reason=BLOCK_AWAITING_OWNER, message="EvictionRequest not created yet")
    name = str((request.get("metadata") or {}).get("name") or "")
    if requests.failed(request):
        cond = requests.condition(request, names.CONDITION_FAILED) or {}
        why = str(cond.get("message") or cond.get("reason") or "no responder evicted the pod")
        return PodState(
            reason=BLOCK_REQUEST_FAILED,
            message=f"EvictionRequest {name} failed: {why} (delete it to ask again)",
        )
    if not requests.wants_eviction(request):
        return PodState(
            reason=BLOCK_AWAITING_OWNER, message=f"EvictionRequest {name} withdrawn, not asked again yet"
        )
    return PodState(evacuating=True)


def node_progress(
    m: api.Maintenance,
    *,
    node: Obj,
    pods: Iterable[Obj],
    request_of: Callable[[Obj], Obj | None],
    now: datetime,
    lease_holder: str | None = None,
) -> NodeProgress:
    """One node as `m` (in this mode) sees it: as `status.node_progress`, with each pod's request
    in place of its EvacuationRequest condition (a pod is evacuated once it is gone)."""
    if lease_holder is not None or not m.drain or m.invalid:
        return condition_progress(
            node=node,
            pods=pods,
            cordon=m.cordon,
            drain=m.drain,
            timeout=m.evacuation_timeout,
            now=now,
            lease_holder=lease_holder,
            invalid=m.invalid,
        )
    unschedulable = bool((node.get("spec") or {}).get("unschedulable", False))
    pending = evacuating = 0
    blocking: list[BlockingPod] = []
    for pod in pods:
        if not selected(pod, m.options):
            continue
        pending += 1
        state = pod_state(pod, request_of(pod), options=m.options)
        if state.evacuating:
            evacuating += 1
            continue
        meta = pod.get("metadata") or {}
        blocking.append(
            BlockingPod(
                str(meta.get("namespace", "")), str(meta.get("name", "")), state.reason, state.message
            )
        )
    phase = api.PHASE_DRAINED if pending == 0 and (unschedulable or not m.cordon) else api.PHASE_DRAINING
    blocking.sort(key=lambda b: (b.namespace, b.name))
    return NodeProgress(phase, pending, evacuating, tuple(blocking), unschedulable)


# -- writes ---------------------------------------------------------------------------------------


async def create_request(
    client: KubeClient, eviction_api: EvictionAPI, pod: Obj, drainers: Sequence[api.Maintenance]
) -> None:
    """Create the pod's request, owned by `drainers`; one that exists already (a cache behind) is fine."""
    body = new_request(eviction_api, pod, REQUESTER, labels=LABELS)
    body["metadata"]["ownerReferences"] = [owner_reference(m) for m in drainers]
    try:
        await client.create(eviction_api.requests, body, namespace=body["metadata"]["namespace"])
    except ApiError as exc:
        if not exc.already_exists:
            raise


async def patch_request(
    client: KubeClient,
    eviction_api: EvictionAPI,
    request: Obj,
    *,
    intent: str,
    owners: Sequence[Mapping[str, Any]] | None = None,
) -> None:
    """Set the intent (and the owners), guarded by the resourceVersion we planned on."""
    meta = request.get("metadata") or {}
    patch: dict[str, Any] = {
        "metadata": {"resourceVersion": meta.get("resourceVersion")},
        "spec": {"intent": intent},
    }
    if owners is not None:
        patch["metadata"]["ownerReferences"] = [dict(o) for o in owners]
    try:
        await client.patch(
            eviction_api.requests, str(meta.get("name")), patch, namespace=str(meta.get("namespace") or "")
        )
    except ApiError as exc:
        if not exc.not_found:
            raise


def request_for(lister: Any, pod: Obj) -> Obj | None:
    """The pod's request from the requests cache (None without one, or without the cache)."""
    if lister is None:
        return None
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    found: Obj | None = lister.get(name_for(pod), namespace)
    return found


def counts_as_requester(request: Obj) -> bool:
    """Requests this controller made (the only ones whose changes it looks at)."""
    return requests.requester_of(request) == REQUESTER


def selected(pod: Obj, options: DrainOptions) -> bool:
    return is_targeted(pod) and options.selects(pod)
