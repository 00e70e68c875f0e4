"""KEP-4563 end to end: EvictionRequests, Evictions, responders and the imperative evictor.

Upstream's integration tests (`test/integration/evictionrequest/evictionrequest_test.go`, the
version with `lifecycle/v1alpha1`, `spec.requester` and prioritised responders) drive the
evictionrequest controller against kube-apiserver while the test plays the responders; these
tests do the same against aiokcm's CRDs, on the embedded cluster and on the real
kube-apiserver, with aiokcm's evictionrequest and imperative-eviction controllers running. Each
test names the upstream test whose expectations it carries; where upstream has no integration
test (the imperative evictor, heartbeat timeouts, garbage collection) it says where the
expected behaviour is written down.

The test plays third-party responders by writing their `status.responders` entries
(`report`), and plays time with a virtual clock handed to the evictionrequest controller.
Pods name their responders in the `lifecycle.aiokcm.io/eviction-responders` annotation (neither
server has `spec.evictionResponders`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.config import build_api_client
from apiclient.resources import PODDISRUPTIONBUDGETS, PODS
from controllers import features
from controllers.context import ControllerContext
from controllers.disruption import DisruptionController
from controllers.evictionrequest import EvictionRequestController
from controllers.imperativeeviction import ImperativeEvictionResponderController
from evictionapi import names
from evictionapi.requests import responder_status
from tests.backends import cluster_on_backend
from tests.controllers.harness import ControllerFactory, build, running_controllers
from tests.e2e.responder_example import Responder
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
    observed_generation,
    pod_with_responders,
    report,
    requesters,
    running_pod,
    set_intent,
    started_at,
    states,
    stays,
    wait_for_conditions,
    wait_for_states,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local", "real")

NS = "default"
GATES = {features.EVICTION_REQUEST_API: True}
A, B = "a.example.com/foo", "b.example.com/bar"
REQUESTER_1, REQUESTER_2 = "foo.example.com/1", "foo.example.com/2"
ACTIVE, INACTIVE = names.STATE_ACTIVE, names.STATE_INACTIVE
COMPLETED, CANCELED, INTERRUPTED = names.STATE_COMPLETED, names.STATE_CANCELED, names.STATE_INTERRUPTED
# Listed lowest priority first on the pod: the Eviction orders them itself.
TWO_RESPONDERS = [(B, 15000), (A, 20000)]

Obj = dict[str, Any]

# The evictor reports completionTime once the pod is gone; the evictionrequest controller gives the
# Active responder 5 s after the pod's deletion for that report (upstream's GracefulCompletionDelay)
# before calling it Interrupted.
EVICTOR_COMPLETES = "the evictor's completion, reported just after the pod left, must count"


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """One node is enough: pods are placed on it directly. Real tier: the full control plane, so
    KCM's garbage collector runs."""
    async with cluster_on_backend(request, nodes=1, pod_start_delay=0.2, termination_cap=0.5) as c:
        yield c


def eviction_controllers(clock: VirtualClock | None = None) -> list[ControllerFactory]:
    """The two controllers under test; with `clock`, the evictionrequest controller tells time by it
    (heartbeat deadlines, start times)."""
    if clock is None:
        return [EvictionRequestController, ImperativeEvictionResponderController]

    def with_clock(ctx: ControllerContext) -> EvictionRequestController:
        return build(EvictionRequestController, ctx, clock=clock)

    return [with_clock, ImperativeEvictionResponderController]


def owners(obj: Obj) -> list[tuple[str, str, str, str]]:
    return sorted(
        (r.get("apiVersion", ""), r.get("kind", ""), r.get("name", ""), r.get("uid", ""))
        for r in obj["metadata"].get("ownerReferences") or []
    )


def owned_by(*requests: Obj) -> list[tuple[str, str, str, str]]:
    return sorted((r["apiVersion"], r["kind"], r["metadata"]["name"], r["metadata"]["uid"]) for r in requests)


def target_evicted(obj: Obj | None) -> bool:
    return conditions(obj).get(names.CONDITION_TARGET_EVICTED, ("", ""))[0] == "True"


async def pod_gone(kube: KubeClient, name: str) -> bool:
    return await kube.get_or_none(PODS, name, namespace=NS) is None


async def pod_untouched(kube: KubeClient, pod: Obj) -> bool:
    now = await kube.get_or_none(PODS, pod["metadata"]["name"], namespace=NS)
    return (
        now is not None
        and now["metadata"]["uid"] == pod["metadata"]["uid"]
        and not now["metadata"].get("deletionTimestamp")
    )


def responders_named(eviction: Obj) -> set[str]:
    return {str(e.get("name")) for e in (eviction.get("status") or {}).get("responders") or []}


async def evicted_in_the_end(kube: KubeClient, eviction: Obj, requests: Sequence[Obj]) -> Obj:
    """Pod gone; Eviction and every request say TargetEvicted (upstream's `evictedConditions`)."""
    pod = eviction["spec"]["target"]["pod"]["name"]
    await eventually(lambda: pod_gone(kube, pod), f"pod {pod} evicted and gone")
    name = eviction["metadata"]["name"]
    done: Obj = await eventually(
        lambda: _when_evicted(kube, EVICTIONS, name), "TargetEvicted on the Eviction"
    )
    # Deleted through the Eviction API: PodDeleted, or PodTerminal if the kubelet's final
    # status was seen before the deletion.
    assert conditions(done) in (
        evicted_because(names.REASON_POD_DELETED),
        evicted_because(names.REASON_POD_TERMINAL),
    ), conditions(done)
    for request in requests:
        copied = await eventually(
            lambda r=request: _when_evicted(kube, REQUESTS, r["metadata"]["name"]),
            "TargetEvicted copied to the request",
        )
        assert conditions(copied) == conditions(done)
    return done


async def _when_evicted(kube: KubeClient, res: Any, name: str) -> Obj | None:
    obj = await kube.get(res, name, namespace=NS)
    return obj if target_evicted(obj) else None


async def _when(kube: KubeClient, pod: str, check: Any) -> Obj | None:
    eviction = await eviction_of(kube, NS, pod)
    return eviction if eviction is not None and check(eviction) else None


async def eviction_when(kube: KubeClient, pod: str, check: Any, what: str) -> Obj:
    """The pod's Eviction once `check` holds for it; on a timeout, what it looked like last."""
    try:
        found: Obj = await eventually(lambda: _when(kube, pod, check), what)
    except AssertionError as exc:
        last = await eviction_of(kube, NS, pod)
        seen = (
            None
            if last is None
            else {
                "labels": last["metadata"].get("labels"),
                "owners": owners(last),
                "status": last.get("status"),
            }
        )
        raise AssertionError(f"{exc}; the Eviction now: {seen}") from None
    return found


# -- (a) -----------------------------------------------------------------------------------------


async def test_two_responders_then_the_imperative_evictor(kube: KubeClient) -> None:
    """Upstream `TestEvictionRequestEvictionProcess` ("should evict - pod deletion"): responders
    run one at a time by priority, each Active until it reports completion; the Eviction's
    labels, owner, requesters and conditions, copied to the request. Upstream's test deletes the
    pod itself; here the last responder, the imperative evictor, does it through the Eviction API.
    """
    await install_eviction_api(kube, namespace=NS)
    pod = await running_pod(kube, NS, pod_with_responders("web", TWO_RESPONDERS))
    async with running_controllers(kube, *eviction_controllers(), gates=GATES):
        request = await kube.create(REQUESTS, eviction_request(pod, REQUESTER_1, name="web-1"), namespace=NS)
        await wait_for_conditions(kube, REQUESTS, NS, "web-1", AWAITING, generation=1)

        a_active = [(A, 20000, ACTIVE), (B, 15000, INACTIVE), (IMPERATIVE, 100, INACTIVE)]
        labels = {
            REQUESTER_1: names.ROLE_REQUESTER,
            A: names.ROLE_RESPONDER,
            B: names.ROLE_RESPONDER,
            IMPERATIVE: names.ROLE_RESPONDER,
        }
        eviction = await eviction_when(
            kube,
            "web",
            lambda e: (
                states(e) == a_active
                and e["metadata"].get("labels") == labels
                and owners(e) == owned_by(request)
                and requesters(e) == {REQUESTER_1: names.INTENT_EVICTION}
                and started_at(e, A)
                and conditions(e) == AWAITING
            ),
            "A Active and started; labels, owner and requester set; the Eviction awaiting",
        )
        assert eviction["spec"] == {"target": {"pod": {"name": "web", "uid": pod["metadata"]["uid"]}}}
        assert responders_named(eviction) >= {A, B, IMPERATIVE}
        assert observed_generation(eviction) == 1

        await report(kube, eviction, A)
        await report(kube, eviction, A, completed=True)
        eviction = await wait_for_states(
            kube, NS, "web", [(A, 20000, COMPLETED), (B, 15000, ACTIVE), (IMPERATIVE, 100, INACTIVE)]
        )
        eviction = await eviction_when(kube, "web", lambda e: started_at(e, B), "B started")
        assert conditions(eviction) == AWAITING
        assert await pod_untouched(kube, pod)

        await report(kube, eviction, B)
        await report(kube, eviction, B, completed=True)
        done = await evicted_in_the_end(kube, eviction, [request])
        assert states(done) == [(A, 20000, COMPLETED), (B, 15000, COMPLETED), (IMPERATIVE, 100, COMPLETED)], (
            EVICTOR_COMPLETES
        )
        assert started_at(done, IMPERATIVE)


# -- (b) -----------------------------------------------------------------------------------------


async def budget(kube: KubeClient, allowed: int) -> Obj | None:
    pdb = await kube.get(PODDISRUPTIONBUDGETS, "solo", namespace=NS)
    status = pdb.get("status") or {}
    current = status.get("observedGeneration") == pdb["metadata"]["generation"]
    return pdb if current and status.get("disruptionsAllowed") == allowed else None


async def test_imperative_eviction_waits_for_the_disruption_budget(kube: KubeClient) -> None:
    """The imperative evictor meets a PodDisruptionBudget: it says so in its message, keeps the
    pod, tries again with a backoff, and evicts once the budget allows.

    Upstream has no integration test of the imperative responder (its sync is a stub in the
    version with these types); the behaviour is the API's documentation of
    `EvictionStatus.targetResponders` ("This call may not succeed due to PodDisruptionBudgets
    ... It will update the responder message and try again with a backoff"), and the final
    conditions are `TestEvictionRequestEvictionProcess`'s. aiokcm's disruption controller keeps
    the budget's status (KCM's is replaced by it on the real tier too). The budget is relaxed
    as soon as the first refusal is reported, so the only real wait is the evictor's first retry,
    5 s later: its backoff is a delayed requeue on the event loop's clock, which a virtual
    wall clock cannot shorten.
    """
    await install_eviction_api(kube, namespace=NS)
    pod = await running_pod(kube, NS, pod_with_responders("solo"))
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "solo"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "solo"}}},
    }
    await kube.create(PODDISRUPTIONBUDGETS, pdb, namespace=NS)
    controllers = [DisruptionController, *eviction_controllers()]
    async with running_controllers(kube, *controllers, gates=GATES):
        await eventually(lambda: budget(kube, 0), "the budget to allow no disruption")
        request = await kube.create(REQUESTS, eviction_request(pod, REQUESTER_1, name="solo-1"), namespace=NS)
        await wait_for_states(kube, NS, "solo", [(IMPERATIVE, 100, ACTIVE)])

        def refused(eviction: Obj) -> bool:
            message = str((responder_status(eviction, IMPERATIVE) or {}).get("message") or "")
            return "disruption budget" in message.lower()

        blocked = await eviction_when(kube, "solo", refused, "the evictor to report the budget's refusal")
        assert conditions(blocked) == AWAITING
        assert await pod_untouched(kube, pod)

        await kube.patch(PODDISRUPTIONBUDGETS, "solo", {"spec": {"minAvailable": 0}}, namespace=NS)
        await eventually(lambda: budget(kube, 1), "the budget to allow one disruption")
        done = await evicted_in_the_end(kube, blocked, [request])
        assert states(done) == [(IMPERATIVE, 100, COMPLETED)], EVICTOR_COMPLETES


# -- (c) -----------------------------------------------------------------------------------------


async def test_one_requester_withdraws_then_the_other_cancels(kube: KubeClient) -> None:
    """Upstream `TestEvictionRequestEvictionProcess` ("should cancel eviction, and allow for
    triggering it again via different eviction request"), with both requesters at once: while one
    requester still wants the eviction a withdrawal changes only its own intent; when the last
    withdraws, the Active responder is Canceled (Completed ones stay Completed and Inactive ones
    never run, upstream's `matchResponderState(Completed, Canceled, Inactive)`) and the Eviction
    Fails with CanceledDueToNoRequesters, copied to both requests. The pod stays.
    """
    await install_eviction_api(kube, namespace=NS)
    pod = await running_pod(kube, NS, pod_with_responders("web", TWO_RESPONDERS))
    async with running_controllers(kube, *eviction_controllers(), gates=GATES):
        first = await kube.create(REQUESTS, eviction_request(pod, REQUESTER_1, name="web-1"), namespace=NS)
        second = await kube.create(REQUESTS, eviction_request(pod, REQUESTER_2, name="web-2"), namespace=NS)

        both = {REQUESTER_1: names.INTENT_EVICTION, REQUESTER_2: names.INTENT_EVICTION}

        def two_requesters(e: Obj) -> bool:
            labels = e["metadata"].get("labels") or {}
            return bool(
                requesters(e) == both
                and started_at(e, A)
                and labels.get(REQUESTER_1) == labels.get(REQUESTER_2) == names.ROLE_REQUESTER
                and owners(e) == owned_by(first, second)
            )

        eviction = await eviction_when(
            kube, "web", two_requesters, "both requesters on the Eviction (labels, owners), A started"
        )
        await report(kube, eviction, A, completed=True)
        awaiting_b = [(A, 20000, COMPLETED), (B, 15000, ACTIVE), (IMPERATIVE, 100, INACTIVE)]
        eviction = await wait_for_states(kube, NS, "web", awaiting_b)
        await report(kube, eviction, B)

        await set_intent(kube, first, names.INTENT_WITHDRAWN)
        one_left = {REQUESTER_1: names.INTENT_WITHDRAWN, REQUESTER_2: names.INTENT_EVICTION}
        await eviction_when(kube, "web", lambda e: requesters(e) == one_left, "requester 1 withdrawn")
        await wait_for_conditions(kube, REQUESTS, NS, "web-1", AWAITING, generation=2)

        async def still_going() -> bool:
            eviction = await eviction_of(kube, NS, "web")
            return states(eviction) == awaiting_b and conditions(eviction) == AWAITING

        await stays(still_going, "B Active with one requester left")

        await set_intent(kube, second, names.INTENT_WITHDRAWN)
        eviction = await wait_for_states(
            kube, NS, "web", [(A, 20000, COMPLETED), (B, 15000, CANCELED), (IMPERATIVE, 100, INACTIVE)]
        )
        canceled = failed_because(names.REASON_CANCELED_DUE_TO_NO_REQUESTERS)
        name = eviction["metadata"]["name"]
        await wait_for_conditions(kube, EVICTIONS, NS, name, canceled, generation=1)
        for request in ("web-1", "web-2"):
            await wait_for_conditions(kube, REQUESTS, NS, request, canceled, generation=2)
        assert requesters(await kube.get(EVICTIONS, name, namespace=NS)) == {
            REQUESTER_1: names.INTENT_WITHDRAWN,
            REQUESTER_2: names.INTENT_WITHDRAWN,
        }
        assert await pod_untouched(kube, pod)


# -- (d) -----------------------------------------------------------------------------------------


async def test_silent_responder_is_interrupted_and_the_next_takes_over(kube: KubeClient) -> None:
    """Upstream `TestComputeResponderProgression` ("reschedule resync according to the heartbeat
    time", "interrupt the first after the heartbeat has elapsed and activate the second one"),
    which upstream tests with a fake clock only below the API: an Active responder that has not
    heartbeated for 20 minutes is Interrupted and the next one becomes Active. The clock jumps;
    a heartbeat moves the deadline, so 19 minutes after it the responder keeps its turn.
    """
    clock = VirtualClock()
    await install_eviction_api(kube, namespace=NS)
    pod = await running_pod(kube, NS, pod_with_responders("web", TWO_RESPONDERS))
    async with running_controllers(kube, *eviction_controllers(clock), gates=GATES):
        request = await kube.create(REQUESTS, eviction_request(pod, REQUESTER_1, name="web-1"), namespace=NS)
        eviction = await eviction_when(kube, "web", lambda e: started_at(e, A), "A started")
        a_active = [(A, 20000, ACTIVE), (B, 15000, INACTIVE), (IMPERATIVE, 100, INACTIVE)]
        assert states(eviction) == a_active

        clock.advance(5 * 60)
        await report(kube, eviction, A, clock=clock)  # A's last word
        clock.advance(names.HEARTBEAT_TIMEOUT_SECONDS - 60)  # 24 min after start, 19 after the heartbeat
        await nudge(kube, request, eviction)

        async def a_keeps_its_turn() -> bool:
            return states(await eviction_of(kube, NS, "web")) == a_active

        await stays(a_keeps_its_turn, "A Active 19 minutes after its heartbeat")

        clock.advance(2 * 60)  # 21 min after the heartbeat
        jumped = clock()
        await nudge(kube, request, eviction)
        eviction = await wait_for_states(
            kube, NS, "web", [(A, 20000, INTERRUPTED), (B, 15000, ACTIVE), (IMPERATIVE, 100, INACTIVE)]
        )
        eviction = await eviction_when(kube, "web", lambda e: started_at(e, B), "B started")
        b_started = started_at(eviction, B)
        assert b_started is not None and b_started >= jumped.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert conditions(eviction) == AWAITING
        assert await pod_untouched(kube, pod)


# -- (e) -----------------------------------------------------------------------------------------


async def test_request_for_a_replaced_pod_is_invalid(kube: KubeClient) -> None:
    """Upstream `TestEvictionRequestValidation` ("pod UID mismatch"): the request names a pod
    whose name now belongs to another pod (deleted and made again), so it Fails with
    EvictionInvalid and the new pod is left alone; the conditions stand when the request changes
    (withdrawn: observedGeneration 2, same conditions).
    """
    await install_eviction_api(kube, namespace=NS)
    old = await running_pod(kube, NS, pod_with_responders("web", [(A, 20000)]))
    await kube.delete(PODS, "web", namespace=NS, grace_period_seconds=0)
    await eventually(lambda: pod_gone(kube, "web"), "the old pod gone")
    new = await running_pod(kube, NS, pod_with_responders("web", [(A, 20000)]))
    assert new["metadata"]["uid"] != old["metadata"]["uid"]

    async with running_controllers(kube, *eviction_controllers(), gates=GATES):
        request = await kube.create(REQUESTS, eviction_request(old, REQUESTER_1, name="web-1"), namespace=NS)
        invalid = failed_because(names.REASON_EVICTION_INVALID)
        await wait_for_conditions(kube, REQUESTS, NS, "web-1", invalid, generation=1)
        assert await pod_untouched(kube, new)

        await set_intent(kube, request, names.INTENT_WITHDRAWN)
        await wait_for_conditions(kube, REQUESTS, NS, "web-1", invalid, generation=2)

        async def unchanged() -> bool:
            obj = await kube.get(REQUESTS, "web-1", namespace=NS)
            return conditions(obj) == invalid and observed_generation(obj) == 2

        await stays(unchanged, "the request's conditions")
        assert await pod_untouched(kube, new)


# -- (f) -----------------------------------------------------------------------------------------


async def test_eviction_collected_after_its_last_request_is_deleted(kube: KubeClient, cluster: Any) -> None:
    """The API's documentation of `Eviction` ("Once all EvictionRequest corresponding to this
    Eviction .spec.target have been removed, this Eviction object will eventually be garbage
    collected") through the owner references upstream's `TestEvictionRequestEvictionProcess`
    expects (one per request): deleting one request counts as its withdrawal and keeps the
    Eviction; deleting the last leaves it to the garbage collector (the embedded cluster's,
    which follows owner references between custom resources; on the real tier KCM's).
    """
    await install_eviction_api(kube, namespace=NS)
    pod = await running_pod(kube, NS, pod_with_responders("web", [(A, 20000)]))
    async with running_controllers(kube, *eviction_controllers(), gates=GATES):
        first = await kube.create(REQUESTS, eviction_request(pod, REQUESTER_1, name="web-1"), namespace=NS)
        second = await kube.create(REQUESTS, eviction_request(pod, REQUESTER_2, name="web-2"), namespace=NS)
        both = {REQUESTER_1: names.INTENT_EVICTION, REQUESTER_2: names.INTENT_EVICTION}
        eviction = await eviction_when(
            kube,
            "web",
            lambda e: owners(e) == owned_by(first, second) and requesters(e) == both,
            "the Eviction owned by both requests, and both in its status",
        )
        name = eviction["metadata"]["name"]

        # Deleted once the Eviction has recorded it: a request deleted before the controller
        # ever wrote it down (and whose owner reference the garbage collector has already
        # dropped) leaves nothing to count as withdrawn.
        await kube.delete(REQUESTS, "web-1", namespace=NS)
        one_left = {REQUESTER_1: names.INTENT_WITHDRAWN, REQUESTER_2: names.INTENT_EVICTION}
        await eviction_when(
            kube, "web", lambda e: requesters(e) == one_left, "the deleted request counted as withdrawn"
        )

        async def kept() -> bool:
            return await kube.get_or_none(EVICTIONS, name, namespace=NS) is not None

        await stays(kept, "the Eviction while a request remains", seconds=1.0)

        await kube.delete(REQUESTS, "web-2", namespace=NS)

        async def collected() -> bool:
            return await kube.get_or_none(EVICTIONS, name, namespace=NS) is None

        # KCM's collector learns new resources from discovery every 30 s.
        await eventually(collected, "the Eviction garbage-collected", timeout=90)
        assert await pod_untouched(kube, pod)


# -- the example responder ------------------------------------------------------------------------


async def test_example_responder_works_before_the_pod_is_evicted(kube: KubeClient, cluster: Any) -> None:
    """`responder_example.Responder` (quoted in the README) against the CRDs through
    kubernetes_asyncio: it sees its turn, heartbeats while working, reports completion, and then
    the imperative evictor evicts the pod. Upstream `TestEvictionRequestEvictionProcess`'s flow
    with a responder process instead of the test's writes.
    """
    drainer = "example.com/cache-drainer"
    await install_eviction_api(kube, namespace=NS)
    pod = await running_pod(kube, NS, pod_with_responders("cache", [(drainer, 20000)]))
    worked: list[str] = []

    async def drain_cache(eviction: Obj) -> None:
        worked.append(eviction["spec"]["target"]["pod"]["name"])
        await anyio.sleep(0.5)  # a few heartbeats' worth

    api = await build_api_client(kubeconfig=cluster.kubeconfig_path)
    async with api, running_controllers(kube, *eviction_controllers(), gates=GATES):
        responder = Responder(api, drainer, NS, drain_cache, heartbeat_seconds=0.1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(responder.run)
            request = await kube.create(
                REQUESTS, eviction_request(pod, REQUESTER_1, name="cache-1"), namespace=NS
            )
            eviction = await eventually(lambda: eviction_of(kube, NS, "cache"), "the pod's Eviction")
            done = await evicted_in_the_end(kube, eviction, [request])
            tg.cancel_scope.cancel()
    assert worked == ["cache"]
    assert states(done) == [(drainer, 20000, COMPLETED), (IMPERATIVE, 100, COMPLETED)], EVICTOR_COMPLETES
    entry = responder_status(done, drainer) or {}
    assert entry.get("message") == "done" and entry.get("completionTime") and entry.get("heartbeatTime")
