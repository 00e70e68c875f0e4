"""The imperative evictor against an API server: upstream's integration tables, on a virtual clock.

Ported from kubernetes/kubernetes `test/integration/imperativeevictionresponder/
imperativeevictionresponder_test.go` at 127a4dea56311defa100d12e4416bbbf3c5b4b77
(TestResponderSkipProcessing, TestResponderEviction, TestThirdPartyTerminationDetection); each
case's id names the upstream test and case. As upstream's test, each case plays the
evictionrequest controller itself: it creates the Eviction and writes its status (the evictor
Active, observed, its responder entry started).

Time: the controller reads an injected `VirtualClock`. Where upstream waits out the backoff
(5 s, then 10 s), the test moves the clock and enqueues the Eviction, which is what the queue's
delayed requeue does when the backoff runs out; the queue's own timers still run on real time
and find nothing due, so they write nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest

from apiclient import ApiError, KubeClient
from apiclient.resources import DAEMONSETS, PODDISRUPTIONBUDGETS, PODS
from controllers import features
from controllers.imperativeeviction import ImperativeEvictionResponderController, plan
from controllers.imperativeeviction.sync import REASON_COMPLETED, REASON_EVICTED, REASON_EVICTION_FAILED
from evictionapi import names
from kubeutil.timestamps import format_time
from tests.controllers.harness import Harness, build, running_controllers
from tests.support.evictionrequests import (
    API_VERSION,
    EVICTIONS,
    VirtualClock,
    install_eviction_api,
    pod_with_responders,
    running_pod,
    stays,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local", "real")

NS = "default"
EVICTOR = names.IMPERATIVE_EVICTOR
GATES = {features.EVICTION_REQUEST_API: True}
FINALIZER = "eviction-responder.example.com/test"
EVICTION_FAILED_1 = "pod deletion via the /eviction subresource failed (attempts=1)"
EVICTION_FAILED_2 = "pod deletion via the /eviction subresource failed (attempts=2)"
TERMINATING = (
    "pod has been been marked for deletion via the /eviction subresource and is being terminated gracefully"
)

Obj = dict[str, Any]
StatusFor = Callable[[VirtualClock], Obj]


@pytest.fixture(autouse=True)
async def api(kube: KubeClient) -> None:
    await install_eviction_api(kube, namespace=NS)


def running(clock: VirtualClock) -> Callable[[Any], ImperativeEvictionResponderController]:
    return lambda ctx: build(ImperativeEvictionResponderController, ctx, clock=clock)


# -- objects (upstream's mkValidEviction, mkValidActiveEvictionStatus) -----------------------------


def eviction_for(pod: Mapping[str, Any], role: str | None = names.ROLE_RESPONDER) -> Obj:
    meta = pod["metadata"]
    labels = {"app": "bar", EVICTOR: role} if role else {}
    return {
        "apiVersion": API_VERSION,
        "kind": names.EVICTION_KIND,
        "metadata": {"name": f"{meta['name']}-eviction", "labels": labels},
        "spec": {"target": {"pod": {"name": meta["name"], "uid": meta["uid"]}}},
    }


def active_status(
    clock: VirtualClock,
    state: str = names.STATE_ACTIVE,
    *,
    observed: int | None = 1,
    conditions: tuple[Obj, ...] = (),
) -> Obj:
    status: Obj = {
        "targetResponders": [{"name": EVICTOR, "priority": 100, "state": state}],
        "responders": [{"name": EVICTOR, "startTime": format_time(clock())}],
    }
    if observed is not None:
        status["observedGeneration"] = observed
    if conditions:
        status["conditions"] = list(conditions)
    return status


def condition(clock: VirtualClock, type_: str, reason: str) -> Obj:
    return {
        "type": type_, "status": "True", "observedGeneration": 1, "reason": reason, "message": "message",
        "lastTransitionTime": format_time(clock()),
    }  # fmt: skip


async def create_eviction(kube: KubeClient, body: Obj, status: Obj) -> Obj:
    """Create the Eviction, then write its status as the evictionrequest controller would."""
    created = await kube.create(EVICTIONS, body, namespace=NS)
    created["status"] = status
    updated: Obj = await kube.replace(EVICTIONS, created, namespace=NS, subresource="status")
    return updated


async def evictor_entry(kube: KubeClient, eviction: Mapping[str, Any]) -> Obj:
    current = await kube.get(EVICTIONS, eviction["metadata"]["name"], namespace=NS)
    for entry in (current.get("status") or {}).get("responders") or []:
        if entry.get("name") == EVICTOR:
            return dict(entry)
    return {}


async def wait_for_entry(kube: KubeClient, eviction: Obj, check: Callable[[Obj], bool], what: str) -> Obj:
    async def reached() -> Obj | None:
        entry = await evictor_entry(kube, eviction)
        return entry if check(entry) else None

    try:
        found: Obj = await eventually(reached, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the entry is {await evictor_entry(kube, eviction)}") from None
    return found


class RecordingClient:
    """The test's client, counting `/eviction` calls and keeping the evictor's status writes."""

    def __init__(self, inner: KubeClient) -> None:
        self._inner = inner
        self.writes: list[Any] = []
        self.evictions = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def evict(self, *args: Any, **kwargs: Any) -> Any:
        self.evictions += 1
        return await self._inner.evict(*args, **kwargs)

    async def patch(self, res: Any, name: str, body: Any, **kwargs: Any) -> Any:
        if res == EVICTIONS and kwargs.get("subresource") == "status":
            self.writes.append(body)
        return await self._inner.patch(res, name, body, **kwargs)

    def messages(self) -> list[str]:
        """The message of each status write, in order (the `replace` op's entry)."""
        return [str(op["value"].get("message")) for ops in self.writes for op in ops if op["op"] == "replace"]


def nudge(h: Harness, eviction: Mapping[str, Any]) -> None:
    """What the queue's delayed requeue does when its time comes."""
    h.controllers[0].enqueue(f"{NS}/{eviction['metadata']['name']}")


async def delete_quietly(kube: KubeClient, res: Any, name: str) -> None:
    try:
        await kube.delete(res, name, namespace=NS)
    except ApiError as exc:
        if not exc.not_found:
            raise


# -- TestResponderSkipProcessing -------------------------------------------------------------------


def _inactive_behind_another(clock: VirtualClock) -> Obj:
    return {
        "observedGeneration": 1,
        "targetResponders": [
            {"name": "foo/bar", "priority": 1000, "state": names.STATE_ACTIVE},
            {"name": EVICTOR, "priority": 100, "state": names.STATE_INACTIVE},
        ],
        "responders": [{"name": "foo/bar", "startTime": format_time(clock())}, {"name": EVICTOR}],
    }


def _completed(clock: VirtualClock) -> Obj:
    return {
        "observedGeneration": 1,
        "targetResponders": [{"name": EVICTOR, "priority": 100, "state": names.STATE_ACTIVE}],
        "responders": [{
            "name": EVICTOR, "startTime": format_time(clock()),
            "completionTime": format_time(clock() + timedelta(seconds=1)),
        }],
    }  # fmt: skip


SKIP_CASES = [
    pytest.param(None, lambda c: active_status(c), False,
                 id="TestResponderSkipProcessing/should skip processing for a non-annotated eviction"),
    pytest.param(names.ROLE_REQUESTER, lambda c: active_status(c), False,
                 id="TestResponderSkipProcessing/should skip processing for incorrectly annotated eviction"),
    pytest.param(names.ROLE_RESPONDER, lambda c: active_status(c, observed=None), False,
                 id="TestResponderSkipProcessing/should skip processing for non observed eviction"),
    pytest.param(names.ROLE_RESPONDER, lambda c: active_status(c, names.STATE_INACTIVE, conditions=(
        condition(c, names.CONDITION_FAILED, names.REASON_EVICTION_INVALID),)), False,
                 id="TestResponderSkipProcessing/should skip processing for failed eviction"),
    pytest.param(names.ROLE_RESPONDER, lambda c: active_status(c, names.STATE_INACTIVE, conditions=(
        condition(c, names.CONDITION_TARGET_EVICTED, names.REASON_POD_DELETED),)), False,
                 id="TestResponderSkipProcessing/should skip processing for evicted eviction"),
    pytest.param(names.ROLE_RESPONDER, _inactive_behind_another, False,
                 id="TestResponderSkipProcessing/should skip processing for inactive eviction"),
    pytest.param(names.ROLE_RESPONDER, _completed, True,
                 id="TestResponderSkipProcessing/should skip processing for eviction with completionTime"),
    pytest.param(names.ROLE_RESPONDER, lambda c: active_status(c, names.STATE_INTERRUPTED), False,
                 id="an Interrupted evictor does nothing"),
    pytest.param(names.ROLE_RESPONDER, lambda c: active_status(c, names.STATE_CANCELED), False,
                 id="a Canceled evictor does nothing"),
]  # fmt: skip


@pytest.mark.parametrize(("role", "status_for", "completed"), SKIP_CASES)
async def test_skip_processing(
    kube: KubeClient, role: str | None, status_for: StatusFor, completed: bool
) -> None:
    clock = VirtualClock()
    pod = await running_pod(kube, NS, pod_with_responders("skip"))
    async with running_controllers(kube, running(clock), gates=GATES) as h:
        eviction = await create_eviction(kube, eviction_for(pod, role), status_for(clock))

        async def untouched() -> bool:
            entry = await evictor_entry(kube, eviction)
            return (
                "heartbeatTime" not in entry and "expectedCompletionTime" not in entry
                and "message" not in entry and ("completionTime" in entry) is completed
            )  # fmt: skip

        await stays(untouched, "untouched by the evictor", seconds=1.5)
        assert (await kube.get(PODS, "skip", namespace=NS))["metadata"].get("deletionTimestamp") is None
        assert h.events.reasons() == []


# -- TestResponderEviction -------------------------------------------------------------------------


async def disruption_budget(kube: KubeClient, app: str) -> None:
    """minAvailable 1 over the one pod, with the status the disruption controller would give it (no
    disruption allowed): neither test cluster runs that controller, as upstream's does not."""
    pdb = await kube.create(PODDISRUPTIONBUDGETS, {
        "metadata": {"name": "test-pdb"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    }, namespace=NS)  # fmt: skip
    pdb["status"] = {
        "observedGeneration": pdb["metadata"].get("generation", 1), "currentHealthy": 1, "desiredHealthy": 1,
        "disruptionsAllowed": 0, "expectedPods": 1,
    }  # fmt: skip
    await kube.replace(PODDISRUPTIONBUDGETS, pdb, namespace=NS, subresource="status")


@pytest.mark.parametrize(
    ("with_pdb", "cancel"),
    [
        pytest.param(False, False, id="TestResponderEviction/normal eviction"),
        pytest.param(True, False, id="TestResponderEviction/pdb stalls eviction"),
        pytest.param(True, True, id="TestResponderEviction/pdb stalls eviction and cancels eviction"),
    ],
)
async def test_eviction(kube: KubeClient, with_pdb: bool, cancel: bool) -> None:
    clock = VirtualClock()
    await delete_quietly(kube, PODDISRUPTIONBUDGETS, "test-pdb")
    body = pod_with_responders("evictee", labels={"app": "test-responder"})
    body["metadata"]["finalizers"] = [FINALIZER]  # it stays, terminating, until the test lets it go
    body["spec"]["terminationGracePeriodSeconds"] = 30
    pod = await running_pod(kube, NS, body)
    client = RecordingClient(kube)
    try:
        async with running_controllers(client, running(clock), gates=GATES) as h:  # type: ignore[arg-type]
            if with_pdb:
                await disruption_budget(kube, "test-responder")
            eviction = await create_eviction(kube, eviction_for(pod), active_status(clock))
            if with_pdb:
                await _stalled_then_allowed(kube, h, clock, eviction, cancel=cancel)
                if cancel:
                    return
            # The pod finishes (the local kubelet gives it at most 2 s; as upstream's test, the
            # test ends it where the kubelet leaves it terminating): its Eviction is done.
            await wait_for_entry(
                kube, eviction, lambda e: TERMINATING in str(e.get("message")) or bool(e.get("completionTime")),
                "the pod evicted and terminating",
            )  # fmt: skip
            current = await kube.get(PODS, "evictee", namespace=NS)
            if current["status"].get("phase") not in ("Succeeded", "Failed"):
                await kube.patch(PODS, "evictee", {"status": {"phase": "Succeeded"}}, namespace=NS,
                                 subresource="status")  # fmt: skip
            done = await wait_for_entry(
                kube, eviction, lambda e: bool(e.get("completionTime")), "completionTime"
            )
            assert '"evictee" pod has been deleted and fully terminated (pod phase=' in done["message"]
            assert done["expectedCompletionTime"] and done["heartbeatTime"] and done["startTime"]
            deleted = await kube.get(PODS, "evictee", namespace=NS)
            assert deleted["metadata"].get("deletionTimestamp")
            # What it reported on the way: the eviction, then the pod terminating (never evicted again).
            messages = client.messages()
            evicted_at = messages.index(plan.evicted_message("evictee"))
            terminating = [m for m in messages[evicted_at:] if TERMINATING in m]
            assert terminating == [f'"evictee" {TERMINATING}'], messages
            assert client.evictions == (3 if with_pdb and not cancel else 1)
            assert h.events.reasons(eviction["metadata"]["name"])[-2:] == [REASON_EVICTED, REASON_COMPLETED]
    finally:
        await delete_quietly(kube, PODDISRUPTIONBUDGETS, "test-pdb")
        try:
            await kube.patch(PODS, "evictee", {"metadata": {"finalizers": None}}, namespace=NS)
        except ApiError as exc:
            if not exc.not_found:
                raise
        await delete_quietly(kube, PODS, "evictee")


async def _stalled_then_allowed(
    kube: KubeClient, h: Harness, clock: VirtualClock, eviction: Obj, *, cancel: bool
) -> None:
    """The budget refuses: attempt 1, a 5 s backoff; then attempt 2 (10 s), or a cancellation."""
    first = await wait_for_entry(
        kube, eviction, lambda e: EVICTION_FAILED_1 in str(e.get("message")), "the first refusal reported"
    )
    assert first.get("startTime") and first.get("heartbeatTime")
    assert "expectedCompletionTime" not in first and "completionTime" not in first
    assert "disruption budget" in first["message"]
    assert REASON_EVICTION_FAILED in h.events.reasons(eviction["metadata"]["name"])

    # Before the backoff ran out nothing is tried again, whatever wakes the Eviction.
    nudge(h, eviction)
    clock.advance(4)
    nudge(h, eviction)
    await stays(
        lambda: _message_has(kube, eviction, EVICTION_FAILED_1),
        "at the first attempt within 5 s",
        seconds=0.5,
    )

    if cancel:
        current = await kube.get(EVICTIONS, eviction["metadata"]["name"], namespace=NS)
        current["status"]["targetResponders"][0]["state"] = names.STATE_CANCELED
        current["status"]["conditions"] = [
            condition(clock, names.CONDITION_FAILED, names.REASON_CANCELED_DUE_TO_NO_REQUESTERS)
        ]
        await kube.replace(EVICTIONS, current, namespace=NS, subresource="status")
        # The evictor reads the cancellation from its cache: the budget goes only once the cache
        # has it, or a wake-up in between would find the pod evictable and the Eviction active.
        cached = h.factory.informer(h.controllers[0].evictions).store  # type: ignore[attr-defined]
        key = f"{NS}/{eviction['metadata']['name']}"

        def canceled_in_cache() -> bool:
            obj = cached.get(key) or {}
            return names.STATE_CANCELED in str((obj.get("status") or {}).get("targetResponders"))

        await eventually(canceled_in_cache, "the cancellation in the evictor's cache")
        await kube.delete(PODDISRUPTIONBUDGETS, "test-pdb", namespace=NS)
        for _ in range(3):  # the backoff runs out, again and again: a Canceled evictor does nothing
            clock.advance(10)
            nudge(h, eviction)
        await stays(
            lambda: _message_has(kube, eviction, EVICTION_FAILED_1), "canceled at attempt 1", seconds=1.5
        )
        assert (await kube.get(PODS, "evictee", namespace=NS))["metadata"].get("deletionTimestamp") is None
        return

    clock.advance(1)  # 5 s after the first attempt
    nudge(h, eviction)
    second = await wait_for_entry(
        kube, eviction, lambda e: EVICTION_FAILED_2 in str(e.get("message")), "the second refusal reported"
    )
    assert "completionTime" not in second
    await kube.delete(PODDISRUPTIONBUDGETS, "test-pdb", namespace=NS)
    clock.advance(9)
    nudge(h, eviction)
    await stays(
        lambda: _message_has(kube, eviction, EVICTION_FAILED_2), "at attempt 2 within 10 s", seconds=0.5
    )
    clock.advance(1)  # 10 s after the second attempt: the budget is gone, the eviction goes through
    nudge(h, eviction)


async def _message_has(kube: KubeClient, eviction: Obj, text: str) -> bool:
    return text in str((await evictor_entry(kube, eviction)).get("message"))


# -- TestThirdPartyTerminationDetection ------------------------------------------------------------


@pytest.mark.parametrize(
    ("create_pod", "expected"),
    [
        pytest.param(False, '"gone" pod has been deleted and fully terminated',
                     id="TestThirdPartyTerminationDetection/pod deleted"),
        pytest.param(True, '"gone" pod has been fully terminated (pod phase="Failed")',
                     id="TestThirdPartyTerminationDetection/pod terminated"),
    ],
)  # fmt: skip
async def test_third_party_termination(kube: KubeClient, create_pod: bool, expected: str) -> None:
    clock = VirtualClock()
    body = pod_with_responders("gone")
    await delete_quietly(kube, PODS, "gone")
    if create_pod:
        pod = await running_pod(kube, NS, body)
        await kube.patch(PODS, "gone", {"status": {"phase": "Failed"}}, namespace=NS, subresource="status")
    else:
        pod = {"metadata": {"name": "gone", "uid": "ef3f28c5-176a-41ec-a0f9-d069cad9e0ff"}}
    try:
        async with running_controllers(kube, running(clock), gates=GATES) as h:
            eviction = await create_eviction(kube, eviction_for(pod), active_status(clock))
            done = await wait_for_entry(
                kube, eviction, lambda e: bool(e.get("completionTime")), "completionTime"
            )
            assert done["message"].startswith(expected)
            assert done["heartbeatTime"] and done["expectedCompletionTime"] and done["startTime"]
            assert h.events.reasons(eviction["metadata"]["name"]) == [REASON_COMPLETED]
    finally:
        await delete_quietly(kube, PODS, "gone")


# -- beyond upstream's tables ----------------------------------------------------------------------


async def test_a_daemonset_pod_is_left_alone_and_the_reason_reported(kube: KubeClient) -> None:
    """A decision beyond upstream: the DaemonSet would put its pod straight back, so the evictor
    completes without calling `/eviction`, saying why; the pod keeps running."""
    clock = VirtualClock()
    labels = {"app": "agent"}
    await kube.create(DAEMONSETS, {
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.9"}],
        }}},
    }, namespace=NS)  # fmt: skip
    try:

        async def a_pod() -> Obj | None:
            pods = await kube.list_all(PODS, namespace=NS, label_selector="app=agent")
            return next((p for p in pods if not p["metadata"].get("deletionTimestamp")), None)

        pod = await eventually(a_pod, "a pod of the DaemonSet")
        async with running_controllers(kube, running(clock), gates=GATES) as h:
            eviction = await create_eviction(kube, eviction_for(pod), active_status(clock))
            done = await wait_for_entry(
                kube, eviction, lambda e: bool(e.get("completionTime")), "completionTime"
            )
            assert 'managed by DaemonSet "agent"' in done["message"], done
            assert REASON_EVICTED not in h.events.reasons(eviction["metadata"]["name"])
        still = await kube.get(PODS, pod["metadata"]["name"], namespace=NS)
        assert still["metadata"]["uid"] == pod["metadata"]["uid"]
        assert not still["metadata"].get("deletionTimestamp")
    finally:
        await delete_quietly(kube, DAEMONSETS, "agent")
