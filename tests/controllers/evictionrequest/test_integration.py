"""The evictionrequest controller against the embedded cluster: registration, responders taking
turns (a virtual clock for the 20-minute heartbeat timeout), cancellation, the pod's deletion,
validation, and the garbage collection of Evictions through their owners."""

from __future__ import annotations

from typing import Any

import pytest

from apiclient import KubeClient
from apiclient.resources import PODS
from controllers import features
from controllers.context import ControllerContext
from controllers.evictionrequest import EvictionRequestController
from controllers.evictionrequest.progression import HEARTBEAT_TIMEOUT
from evictionapi import names
from tests.controllers.harness import build, running_controllers
from tests.support.evictionrequests import (
    AWAITING,
    EVICTIONS,
    IMPERATIVE,
    REQUESTS,
    VirtualClock,
    conditions,
    evicted_because,
    eviction_of,
    eviction_request,
    failed_because,
    install_eviction_api,
    nudge,
    pod_with_responders,
    report,
    requesters,
    running_pod,
    set_intent,
    states,
    wait_for_conditions,
    wait_for_states,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local", "real")

NS = "default"
GATES = {features.EVICTION_REQUEST_API: True}
A = "a.example.com/drainer"
REQUESTER = "ops.example.com/drain"
ACTIVE, INACTIVE = names.STATE_ACTIVE, names.STATE_INACTIVE


def controller_with(clock: VirtualClock) -> Any:
    def make(ctx: ControllerContext) -> EvictionRequestController:
        return build(EvictionRequestController, ctx, clock=clock)

    return make


async def test_responders_take_turns_until_none_is_left(kube: KubeClient) -> None:
    await install_eviction_api(kube, namespace=NS)
    clock = VirtualClock()
    pod = await running_pod(kube, NS, pod_with_responders("er-turns", [(A, 20000)]))
    request = await kube.create(REQUESTS, eviction_request(pod, REQUESTER), namespace=NS)
    async with running_controllers(kube, controller_with(clock), gates=GATES) as h:
        eviction = await wait_for_states(
            kube, NS, "er-turns", [(A, 20000, ACTIVE), (IMPERATIVE, 100, INACTIVE)]
        )
        assert eviction["metadata"]["name"] == "pod-1-er-turns"
        assert requesters(eviction) == {REQUESTER: names.INTENT_EVICTION}

        async def labelled_and_owned() -> bool:
            current = await kube.get(EVICTIONS, eviction["metadata"]["name"], namespace=NS)
            owners = [(r["kind"], r["name"]) for r in current["metadata"].get("ownerReferences") or ()]
            return current["metadata"].get("labels") == {
                REQUESTER: names.ROLE_REQUESTER, A: names.ROLE_RESPONDER, IMPERATIVE: names.ROLE_RESPONDER,
            } and owners == [("EvictionRequest", request["metadata"]["name"])]  # fmt: skip

        await eventually(labelled_and_owned, "participant labels and the request as owner")
        await wait_for_conditions(kube, REQUESTS, NS, request["metadata"]["name"], AWAITING)

        # A reports completion without evicting: the default evictor goes Active next.
        await report(kube, eviction, A, clock=clock, completed=True)
        eviction = await wait_for_states(
            kube, NS, "er-turns", [(A, 20000, names.STATE_COMPLETED), (IMPERATIVE, 100, ACTIVE)]
        )
        # The evictor never heartbeats (nothing runs it here): 20 minutes later it is Interrupted.
        clock.advance(HEARTBEAT_TIMEOUT + 1)
        await nudge(kube, eviction)
        final = failed_because(names.REASON_NO_FURTHER_RESPONDER)
        done = await wait_for_conditions(kube, EVICTIONS, NS, eviction["metadata"]["name"], final)
        assert states(done) == [(A, 20000, names.STATE_COMPLETED), (IMPERATIVE, 100, names.STATE_INTERRUPTED)]
        # The request still wants the eviction: as upstream, a new Eviction starts over.
        retry = await wait_for_states(kube, NS, "er-turns", [(A, 20000, ACTIVE), (IMPERATIVE, 100, INACTIVE)])
        assert retry["metadata"]["name"] == "pod-2-er-turns"
        assert "ResponderInterrupted" in h.events.reasons(eviction["metadata"]["name"])


async def test_withdrawn_requests_cancel_and_deleted_ones_collect_the_eviction(kube: KubeClient) -> None:
    await install_eviction_api(kube, namespace=NS)
    pod = await running_pod(kube, NS, pod_with_responders("er-cancel", [(A, 20000)]))
    first = await kube.create(REQUESTS, eviction_request(pod, REQUESTER), namespace=NS)
    second = await kube.create(REQUESTS, eviction_request(pod, "other.example.com/x"), namespace=NS)
    async with running_controllers(kube, controller_with(VirtualClock()), gates=GATES):
        eviction = await wait_for_states(
            kube, NS, "er-cancel", [(A, 20000, ACTIVE), (IMPERATIVE, 100, INACTIVE)]
        )

        async def owned_by_both() -> bool:
            current = await kube.get(EVICTIONS, eviction["metadata"]["name"], namespace=NS)
            return len(current["metadata"].get("ownerReferences") or ()) == 2

        await eventually(owned_by_both, "both requests as owners")
        await set_intent(kube, first, names.INTENT_WITHDRAWN)
        await kube.delete(REQUESTS, second["metadata"]["name"], namespace=NS)
        await wait_for_states(
            kube, NS, "er-cancel", [(A, 20000, names.STATE_CANCELED), (IMPERATIVE, 100, INACTIVE)]
        )
        canceled = failed_because(names.REASON_CANCELED_DUE_TO_NO_REQUESTERS)
        done = await wait_for_conditions(kube, EVICTIONS, NS, eviction["metadata"]["name"], canceled)
        assert requesters(done) == {
            REQUESTER: names.INTENT_WITHDRAWN,
            "other.example.com/x": names.INTENT_WITHDRAWN,
        }

        # The last request gone, the garbage collector removes the Eviction.
        await kube.delete(REQUESTS, first["metadata"]["name"], namespace=NS)

        async def collected() -> bool:
            return await eviction_of(kube, NS, "er-cancel") is None

        # The real KCM's garbage collector looks for new resource types every 30 s (its discovery
        # sync), so on a plane where this test installed the CRDs it may not watch Evictions yet.
        await eventually(collected, "the Eviction collected with its last request", timeout=60)


async def test_a_deleted_pod_is_reported_evicted(kube: KubeClient) -> None:
    await install_eviction_api(kube, namespace=NS)
    pod = await running_pod(kube, NS, pod_with_responders("er-gone"))
    request = await kube.create(REQUESTS, eviction_request(pod, REQUESTER), namespace=NS)
    async with running_controllers(kube, controller_with(VirtualClock()), gates=GATES):
        eviction = await wait_for_states(kube, NS, "er-gone", [(IMPERATIVE, 100, ACTIVE)])
        await kube.delete(PODS, "er-gone", namespace=NS, grace_period_seconds=0)
        gone = evicted_because(names.REASON_POD_DELETED)
        await wait_for_conditions(kube, EVICTIONS, NS, eviction["metadata"]["name"], gone)
        await wait_for_conditions(kube, REQUESTS, NS, request["metadata"]["name"], gone)


@pytest.mark.parametrize(
    ("uid", "message"),
    [
        (
            "00000000-0000-4000-8000-000000000000",
            "Target pod UID mismatch: expected 00000000-0000-4000-8000-000000000000, got {uid}.",
        ),
        (None, "Target pod not found."),
    ],
)
async def test_an_invalid_request_fails_without_an_eviction(
    kube: KubeClient, uid: str | None, message: str
) -> None:
    await install_eviction_api(kube, namespace=NS)
    pod = await running_pod(kube, NS, pod_with_responders("er-invalid"))
    body = eviction_request(pod, REQUESTER)
    if uid is None:
        body["spec"]["target"]["pod"]["name"] = "er-nobody"
    else:
        body["spec"]["target"]["pod"]["uid"] = uid
    request = await kube.create(REQUESTS, body, namespace=NS)
    async with running_controllers(kube, controller_with(VirtualClock()), gates=GATES):
        invalid = failed_because(names.REASON_EVICTION_INVALID)
        done = await wait_for_conditions(kube, REQUESTS, NS, request["metadata"]["name"], invalid)
        failed = next(c for c in done["status"]["conditions"] if c["type"] == names.CONDITION_FAILED)
        assert failed["message"] == message.format(uid=pod["metadata"]["uid"])
        assert conditions(done) == invalid
        assert await eviction_of(kube, NS, "er-invalid") is None
        assert await eviction_of(kube, NS, "er-nobody") is None
