"""The EvictionRequest mode (`--eviction-surge-requests=EvictionRequest`): the webhook as a requester.

Instead of writing the pod's `EvacuationRequest` condition itself, the webhook creates an
EvictionRequest (KEP-4563) for a pod whose eviction it holds back, with requester
`eviction-surge.aiokcm.io/webhook`; the pod's eviction responders then move it, aiokcm's surge
responder (`surge.aiokcm.io/replicaset`, priority 10000) first, which asks the surge machinery for
the same replacement the condition would have. The denial names the request, so whoever runs the
drain can `kubectl get evictionrequest` it.

One request per pod and requester, named from the pod's name, UID and the requester
(`evictionapi.requester.request_name`): a retried eviction, or the webhook after a restart, finds
the request it made rather than making a second. The request is owned by its pod (an
ownerReference, no blockOwnerDeletion), so the garbage collector removes it with the pod.

Withdrawal sets `spec.intent: Withdrawn` rather than deleting: it is the API's own way to say the
eviction is no longer wanted, the Eviction records this requester as withdrawn (so whoever reads it
sees why it was canceled), the name the denial gave still answers `kubectl get`, and the next held
back eviction of the same pod asks again by setting the intent back to `Eviction`.

`plan` is pure; the writes are `create_request` and `set_intent`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from apiclient import ApiError, KubeClient
from evictionapi import requests
from evictionapi.requester import new_request, request_name
from evictionapi.served import EvictionAPI

Obj = Mapping[str, Any]

REQUESTER: Final = "eviction-surge.aiokcm.io/webhook"
LABELS: Final = {"app.kubernetes.io/managed-by": "aiokcm-eviction-surge"}


def name_for(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return request_name(str(meta.get("name") or ""), str(meta.get("uid") or ""), REQUESTER)


def is_ours(request: Obj | None) -> bool:
    return request is not None and requests.requester_of(request) == REQUESTER


def asking(request: Obj | None) -> bool:
    """Our request exists and still asks for the eviction."""
    return is_ours(request) and requests.wants_eviction(request)


def pod_owner(pod: Obj) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": str(meta.get("name") or ""),
        "uid": str(meta.get("uid") or ""),
    }


class Step(enum.Enum):
    NONE = "none"  # nothing asked, nothing to ask
    CREATE = "create"  # ask: create the request
    REQUEST = "request"  # ask again: the request is there, Withdrawn
    FOLLOW = "follow"  # asked; evictions are still being retried
    WITHDRAW = "withdraw"  # asked, and no eviction was retried within the window


@dataclass(frozen=True, slots=True)
class Plan:
    step: Step
    # FOLLOW: seconds until the retry window closes, unless an eviction comes first.
    wait: float | None = None


def plan(
    request: Obj | None,
    *,
    wanted: bool,
    others_asking: bool,
    last: datetime | None,
    asked: datetime | None,
    started: datetime,
    now: datetime,
    retry_window: float,
) -> Plan:
    """What to do with an available pod's request.

    `wanted`: a held back eviction asked for the request since the last sync; `others_asking`:
    an evacuation someone else asked for is under way (then the webhook asks for nothing, as in
    the condition mode); `last`: the last eviction of the pod seen; `asked`: when this process
    last created or re-asked the request (a restart starts the window anew from `started`).
    """
    if asking(request):
        seen = max(t for t in (last, asked, started) if t is not None)
        idle = (now - seen).total_seconds()
        if idle >= retry_window:
            return Plan(Step.WITHDRAW)
        return Plan(Step.FOLLOW, retry_window - idle)
    if not wanted or others_asking or last is None:
        return Plan(Step.NONE)
    if (now - last).total_seconds() >= retry_window:
        return Plan(Step.NONE)  # the drainer has gone away since
    return Plan(Step.CREATE if request is None else Step.REQUEST)


# -- writes ---------------------------------------------------------------------------------------


async def create_request(client: KubeClient, api: EvictionAPI, pod: Obj) -> None:
    """Create the pod's request; one that exists already (a cache behind) is fine: the next sync
    sees it and sets its intent if it must."""
    body = new_request(api, pod, REQUESTER, labels=LABELS, owner=pod_owner(pod))
    try:
        await client.create(api.requests, body, namespace=body["metadata"]["namespace"])
    except ApiError as exc:
        if not exc.already_exists:
            raise


async def set_intent(client: KubeClient, api: EvictionAPI, request: Obj, intent: str) -> None:
    """Set the intent, guarded by the resourceVersion we planned on (a conflict retries the sync)."""
    meta = request.get("metadata") or {}
    patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "spec": {"intent": intent}}
    try:
        await client.patch(
            api.requests, str(meta.get("name")), patch, namespace=str(meta.get("namespace") or "")
        )
    except ApiError as exc:
        if not exc.not_found:
            raise
