"""Playing the EvictionRequest API's parts in tests: the requester, the responders, and the clock.

    await install_eviction_api(kube, namespace=NS)
    await kube.create(PODS, pod_with_responders("web", [("a.example.com/foo", 20000)]), namespace=NS)
    await kube.create(REQUESTS, eviction_request(pod, "ops.example.com/drain"), namespace=NS)
    eviction = await wait_for_states(kube, NS, "web", [(A, 20000, ACTIVE), (IMPERATIVE, 100, INACTIVE)])
    await report(kube, eviction, A, completed=True)      # what responder A writes when done

The API is aiokcm's CRDs (`lifecycle.aiokcm.io`): neither the embedded cluster nor the real tier's
kube-apiserver serves `lifecycle.k8s.io`. A pod names its responders in the
`lifecycle.aiokcm.io/eviction-responders` annotation, since neither server has
`spec.evictionResponders`.

A responder's report is a read-modify-write of its own `status.responders` entry, guarded by the
Eviction's resourceVersion: a custom resource has no strategic merge, so a merge patch would
replace the whole list and could drop what the controller wrote meanwhile.

`VirtualClock` is wall time plus an offset the test moves forward: the controllers built with it
and the responders reporting with it agree on "20 minutes later" without anyone waiting. Only
what reads the clock jumps; a controller's timers run on the event loop, so after a jump the test
nudges the objects (`nudge`) to have them looked at again.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import anyio

from apiclient import ApiError, KubeClient
from apiclient.resources import CUSTOMRESOURCEDEFINITIONS, PODS
from controller_manager.crds import eviction_api_crds, without_transition_rules
from evictionapi import names
from evictionapi.requests import (
    condition,
    requesters_of,
    responder_status,
    target_pod_of,
    target_responders_of,
)
from evictionapi.served import AIOKCM
from kubeutil.timestamps import format_time, utcnow
from tests.support.waiting import eventually

Obj = dict[str, Any]
Clock = Callable[[], datetime]

REQUESTS = AIOKCM.requests
EVICTIONS = AIOKCM.evictions
API_VERSION = f"{names.AIOKCM_GROUP}/{names.VERSION}"
IMPERATIVE = names.IMPERATIVE_EVICTOR
NUDGE_ANNOTATION = "test.aiokcm.io/nudge"


class VirtualClock:
    """Wall-clock time shifted by an offset that only grows: `advance(seconds)` jumps ahead."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return utcnow() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


# -- the API -------------------------------------------------------------------------------------


async def install_eviction_api(kube: KubeClient, *, namespace: str) -> None:
    """The CRDs installed and served, and `namespace` without Evictions or requests from before.

    The real tier keeps some CRDs from test to test, so objects of an earlier test may linger.
    """
    for crd in eviction_api_crds():
        try:
            await _create_crd(kube, crd)
        except ApiError as exc:
            if not exc.already_exists:
                raise

    async def served() -> bool:
        try:
            for res in (REQUESTS, EVICTIONS):
                await kube.list(res, namespace=namespace, limit=1)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True

    await eventually(served, "the EvictionRequest API to be served", timeout=60)
    for res in (REQUESTS, EVICTIONS):
        for obj in await kube.list_all(res, namespace=namespace):
            try:
                await kube.delete(res, obj["metadata"]["name"], namespace=namespace)
            except ApiError as exc:
                if not exc.not_found:
                    raise


async def _create_crd(kube: KubeClient, crd: Obj) -> None:
    """Create `crd`; on a server whose CEL has no `oldSelf` (v1.24), without the transition rules."""
    try:
        await kube.create(CUSTOMRESOURCEDEFINITIONS, crd)
    except ApiError as exc:
        if not (exc.invalid and "oldSelf" in exc.message):
            raise
        await kube.create(CUSTOMRESOURCEDEFINITIONS, without_transition_rules(crd))


# -- objects -------------------------------------------------------------------------------------


def pod_with_responders(
    name: str,
    responders: Sequence[tuple[str, int]] = (),
    *,
    node: str = "node-1",
    labels: Mapping[str, str] | None = None,
) -> Obj:
    """A pod on `node` whose eviction responders are `(name, priority)` pairs, in the annotation."""
    metadata: Obj = {"name": name, "labels": dict(labels or {"app": name})}
    if responders:
        listed = [{"name": r, "priority": p} for r, p in responders]
        metadata["annotations"] = {names.POD_RESPONDERS_ANNOTATION: json.dumps(listed)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}],
        },
    }


def eviction_request(
    pod: Mapping[str, Any], requester: str, *, name: str | None = None, intent: str = names.INTENT_EVICTION
) -> Obj:
    """An EvictionRequest for `pod` (its name and uid) by `requester`."""
    meta = pod["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": names.EVICTION_REQUEST_KIND,
        "metadata": {"name": name} if name else {"generateName": "er-"},
        "spec": {
            "target": {"pod": {"name": meta["name"], "uid": meta["uid"]}},
            "requester": requester,
            "intent": intent,
        },
    }


async def set_intent(kube: KubeClient, request: Mapping[str, Any], intent: str) -> Obj:
    meta = request["metadata"]
    return await kube.patch(REQUESTS, meta["name"], {"spec": {"intent": intent}}, namespace=meta["namespace"])


async def running_pod(kube: KubeClient, namespace: str, body: Obj) -> Obj:
    """Create `body` and wait until its kubelet reports it Ready."""
    await kube.create(PODS, body, namespace=namespace)
    name = body["metadata"]["name"]

    async def ready() -> Obj | None:
        pod = await kube.get(PODS, name, namespace=namespace)
        conditions = (pod.get("status") or {}).get("conditions") or []
        return pod if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else None

    found: Obj = await eventually(ready, f"pod {name} Ready")
    return found


# -- reading -------------------------------------------------------------------------------------


async def eviction_of(kube: KubeClient, namespace: str, pod: str) -> Obj | None:
    """The newest Eviction whose target is pod `pod` (the name only says so informally)."""
    mine = [
        e
        for e in await kube.list_all(EVICTIONS, namespace=namespace)
        if (target_pod_of(e) or ("", ""))[0] == pod
    ]
    mine.sort(key=lambda e: (e["metadata"].get("creationTimestamp") or "", e["metadata"]["name"]))
    return mine[-1] if mine else None


def states(eviction: Mapping[str, Any] | None) -> list[tuple[str, int, str]]:
    """`status.targetResponders` as `(name, priority, state)` triples, in the order given."""
    return [
        (str(t.get("name")), int(t.get("priority") or 0), str(t.get("state")))
        for t in target_responders_of(eviction)
    ]


def requesters(eviction: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(r.get("name")): str(r.get("intent")) for r in requesters_of(eviction)}


def conditions(obj: Mapping[str, Any] | None) -> dict[str, tuple[str, str]]:
    """The Failed and TargetEvicted conditions as `type -> (status, reason)`."""
    found: dict[str, tuple[str, str]] = {}
    for type_ in (names.CONDITION_FAILED, names.CONDITION_TARGET_EVICTED):
        cond = condition(obj, type_)
        if cond is not None:
            found[type_] = (str(cond.get("status")), str(cond.get("reason")))
    return found


def observed_generation(obj: Mapping[str, Any] | None) -> int:
    return int(((obj or {}).get("status") or {}).get("observedGeneration") or 0)


AWAITING = {
    names.CONDITION_FAILED: ("False", names.REASON_AWAITING_EVICTION),
    names.CONDITION_TARGET_EVICTED: ("False", names.REASON_AWAITING_EVICTION),
}


def failed_because(reason: str) -> dict[str, tuple[str, str]]:
    """Upstream's `failedConditions`: Failed True for `reason`, TargetEvicted False EvictionFailed."""
    return {
        names.CONDITION_FAILED: ("True", reason),
        names.CONDITION_TARGET_EVICTED: ("False", names.REASON_EVICTION_FAILED),
    }


def evicted_because(reason: str) -> dict[str, tuple[str, str]]:
    """Upstream's `evictedConditions`: Failed False Succeeded, TargetEvicted True for `reason`."""
    return {
        names.CONDITION_FAILED: ("False", names.REASON_SUCCEEDED),
        names.CONDITION_TARGET_EVICTED: ("True", reason),
    }


async def wait_for_states(
    kube: KubeClient,
    namespace: str,
    pod: str,
    expected: Sequence[tuple[str, int, str]],
    *,
    timeout: float = 20.0,
) -> Obj:
    """The pod's Eviction once its target responders are exactly `expected`."""

    async def reached() -> Obj | None:
        eviction = await eviction_of(kube, namespace, pod)
        return eviction if states(eviction) == list(expected) else None

    async def last() -> list[tuple[str, int, str]]:
        return states(await eviction_of(kube, namespace, pod))

    try:
        found: Obj = await eventually(reached, f"responders {expected}", timeout=timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; responders now {await last()}") from None
    return found


async def wait_for_conditions(
    kube: KubeClient,
    res: Any,
    namespace: str,
    name: str,
    expected: Mapping[str, tuple[str, str]],
    *,
    generation: int | None = None,
    timeout: float = 20.0,
) -> Obj:
    """The object once its Failed/TargetEvicted conditions (and observedGeneration) are `expected`."""

    async def reached() -> Obj | None:
        obj = await kube.get(res, name, namespace=namespace)
        if conditions(obj) != dict(expected):
            return None
        if generation is not None and observed_generation(obj) != generation:
            return None
        return obj

    try:
        found: Obj = await eventually(
            reached, f"{res.kind} {name} conditions {dict(expected)}", timeout=timeout
        )
    except AssertionError as exc:
        obj = await kube.get(res, name, namespace=namespace)
        raise AssertionError(
            f"{exc}; now {conditions(obj)} at observedGeneration {observed_generation(obj)}"
        ) from None
    return found


async def stays(check: Callable[[], Any], what: str, *, seconds: float = 0.5) -> None:
    """`check` holds for `seconds`: for a state the controllers must not leave."""
    with anyio.move_on_after(seconds):
        while True:
            result = check()
            if not (await result if inspect.isawaitable(result) else result):
                raise AssertionError(f"no longer {what}")
            await anyio.sleep(0.05)


# -- the responders' side ------------------------------------------------------------------------


async def report(
    kube: KubeClient,
    eviction: Mapping[str, Any],
    responder: str,
    *,
    clock: Clock = utcnow,
    completed: bool = False,
    message: str | None = None,
) -> Obj:
    """What responder `responder` writes while Active: a heartbeat, an expected completion time,
    a message, and with `completed` its completion time (upstream's `markResponderUpdate`)."""
    meta = eviction["metadata"]
    for _ in range(20):
        current = await kube.get(EVICTIONS, meta["name"], namespace=meta["namespace"])
        status = current.setdefault("status", {})
        entries = status.setdefault("responders", [])
        entry = next((e for e in entries if e.get("name") == responder), None)
        if entry is None:
            entry = {"name": responder}
            entries.append(entry)
        now = clock()
        entry["heartbeatTime"] = format_time(now)
        entry["expectedCompletionTime"] = format_time(now + timedelta(hours=1))
        entry["message"] = message if message is not None else responder
        if completed:
            entry["completionTime"] = format_time(now)
        try:
            replaced: Obj = await kube.replace(
                EVICTIONS, current, namespace=meta["namespace"], subresource="status"
            )
            return replaced
        except ApiError as exc:
            if not exc.conflict:
                raise
    raise AssertionError(f"{responder} could not report on {meta['name']}: conflicts all along")


async def nudge(kube: KubeClient, *objects: Mapping[str, Any]) -> None:
    """Touch an annotation on each object: an update event, so the controllers look again."""
    for obj in objects:
        meta = obj["metadata"]
        res = REQUESTS if obj.get("kind") == names.EVICTION_REQUEST_KIND else EVICTIONS
        patch = {"metadata": {"annotations": {NUDGE_ANNOTATION: str(anyio.current_time())}}}
        await kube.patch(res, meta["name"], patch, namespace=meta["namespace"])


def started_at(eviction: Mapping[str, Any] | None, responder: str) -> str | None:
    entry = responder_status(eviction, responder)
    return None if entry is None else entry.get("startTime")
