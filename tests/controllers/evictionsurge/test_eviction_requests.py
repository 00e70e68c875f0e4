"""The webhook in the EvictionRequest mode on the embedded cluster, the whole chain running.

aiokcm's ReplicaSet and Deployment controllers surge in-controller (gates DeclarativeNodeMaintenance,
NodeMaintenanceDeployment, EvictionRequestAPI, EvictionSurge); the evictionrequest controller makes
the pod's Eviction with the surge responder registered implicitly (priority 10000) before the
imperative evictor; the surge responder marks the pod and the Deployment surges. `review` is
called as the webhook server calls it, each call a drainer's retry.

The retry window runs on a virtual clock given to the webhook's controller only: the test moves
it past the window and has the pod looked at again, instead of waiting for a minute.
"""

from __future__ import annotations

from typing import Any

import anyio

from apiclient import ApiError, KubeClient
from apiclient.resources import NODES, PODS
from controllers import features
from controllers.context import ControllerContext
from controllers.deployment import DeploymentController
from controllers.evictionrequest import EvictionRequestController
from controllers.evictionrequest.config import EvictionRequestConfig
from controllers.evictionresponder import EvictionResponderController
from controllers.evictionresponder.registration import RESPONDER_NAME, RESPONDER_PRIORITY
from controllers.evictionsurge import EvictionSurgeController
from controllers.evictionsurge.config import REQUESTS_EVICTION_REQUEST, EvictionSurgeConfig
from controllers.evictionsurge.evictionrequests import REQUESTER, name_for
from controllers.evictionsurge.sync import EVENT_REQUESTED, EVENT_WITHDRAWN
from controllers.replicaset import ReplicaSetController
from evictionapi import names
from localcluster.demo import NS, App, pod_available
from tests.controllers.evictionsurge.test_controller import app_pods, one_ready_pod, review, surge_controller
from tests.controllers.harness import build, running_controllers
from tests.e2e.test_drain_zero_downtime import AvailabilityWatch
from tests.support.evictionrequests import (
    REQUESTS,
    VirtualClock,
    eviction_of,
    install_eviction_api,
    requesters,
)
from tests.support.waiting import eventually

Obj = dict[str, Any]
GATES = {
    features.DECLARATIVE_NODE_MAINTENANCE: True,
    features.NODE_MAINTENANCE_DEPLOYMENT: True,
    features.EVICTION_REQUEST_API: True,
    features.EVICTION_SURGE: True,
}
IMPLICIT = EvictionRequestConfig(implicit_responders=((RESPONDER_NAME, RESPONDER_PRIORITY),))


def running(kube: KubeClient, clock: VirtualClock | None = None, **config: Any) -> Any:
    def make_surge(ctx: ControllerContext) -> EvictionSurgeController:
        cfg = EvictionSurgeConfig(requests=REQUESTS_EVICTION_REQUEST, **config)
        if clock is None:
            return build(EvictionSurgeController, ctx, config=cfg)
        return build(EvictionSurgeController, ctx, config=cfg, clock=clock)

    return running_controllers(
        kube,
        ReplicaSetController,
        DeploymentController,
        EvictionRequestController,
        EvictionResponderController,
        make_surge,
        gates=GATES,
        configs=[IMPLICIT],
    )


async def our_request(kube: KubeClient, pod: Obj) -> Obj | None:
    try:
        found: Obj = await kube.get(REQUESTS, name_for(pod), namespace=NS)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise
    return found


async def test_a_refused_eviction_becomes_an_eviction_request_and_the_pod_is_replaced_without_downtime(
    kube: KubeClient,
) -> None:
    await install_eviction_api(kube, namespace=NS)
    watch = AvailabilityWatch((App("web", 1),))
    async with running(kube) as h, anyio.create_task_group() as tg:
        surge = surge_controller(h)
        pod = await one_ready_pod(kube, surge)
        await tg.start(watch.run, kube)
        name = pod["metadata"]["name"]
        request_name = name_for(pod)

        answer = surge.review(review(name, uid="u-1"))["response"]
        assert answer["allowed"] is False and answer["status"]["code"] == 429
        assert f"kubectl get evictionrequest -n {NS} {request_name}" in answer["status"]["message"]

        request: Obj = await eventually(
            lambda: our_request(kube, pod), "the webhook's EvictionRequest", timeout=10
        )
        assert request["spec"]["requester"] == REQUESTER
        assert request["spec"]["intent"] == names.INTENT_EVICTION
        assert request["spec"]["target"] == {"pod": {"name": name, "uid": pod["metadata"]["uid"]}}
        assert request["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
        assert EVENT_REQUESTED in h.events.reasons(name)

        # A retry while the request is cached and under way: the same request, named again.
        async def named_again() -> bool:
            response = surge.review(review(name, uid="u-2"))["response"]
            return response["allowed"] or request_name in response["status"]["message"]

        await eventually(named_again, "the retry denied naming the same request", timeout=10)

        async def let_through_or_gone() -> bool:
            # The drainer retrying: allowed once a replacement serves, or the old pod is gone already.
            if surge.pod_lister.get(name, NS) is None:
                return True
            return bool(surge.review(review(name, uid="u-3"))["response"]["allowed"])

        await eventually(
            let_through_or_gone, "the retry let through once the replacement is available", timeout=60
        )
        others = [p for p in await app_pods(kube) if p["metadata"]["name"] != name]
        assert any(pod_available(p) for p in others)
        assert [r["metadata"]["name"] for r in await kube.list_all(REQUESTS, namespace=NS)] == [request_name]
        eviction = await eviction_of(kube, NS, name)
        assert eviction is not None and requesters(eviction) == {REQUESTER: names.INTENT_EVICTION}
        tg.cancel_scope.cancel()
    assert watch.least["web"] >= 1, f"web went down to {watch.least['web']} available"


async def test_withdrawn_when_no_eviction_is_retried_within_the_window_and_asked_again_after(
    kube: KubeClient,
) -> None:
    await install_eviction_api(kube, namespace=NS)
    clock = VirtualClock()
    async with running(kube, clock) as h:
        surge = surge_controller(h)
        pod = await one_ready_pod(kube, surge)
        name = pod["metadata"]["name"]
        key = f"{NS}/{name}"
        # No room anywhere: the replacement stays Pending, the surge cannot finish.
        for node in await kube.list_all(NODES):
            await kube.patch(NODES, node["metadata"]["name"], {"spec": {"unschedulable": True}})
        assert surge.review(review(name))["response"]["allowed"] is False

        async def asking() -> bool:
            request = await our_request(kube, pod)
            return request is not None and request["spec"]["intent"] == names.INTENT_EVICTION

        await eventually(asking, "the request created", timeout=10)

        async def marked() -> bool:
            got = await kube.get(PODS, name, namespace=NS)
            return any(c.get("type") == "EvacuationRequest" for c in got["status"].get("conditions") or [])

        await eventually(marked, "the surge responder's mark on the pod", timeout=20)
        assert surge.review(review(name))["response"]["allowed"] is False

        # The drainer goes away: a window later (virtual) the request is withdrawn.
        clock.advance(61)
        surge.enqueue(key)

        async def withdrawn() -> bool:
            request = await our_request(kube, pod)
            return request is not None and request["spec"]["intent"] == names.INTENT_WITHDRAWN

        await eventually(withdrawn, "the request withdrawn once no eviction is retried", timeout=10)
        assert h.events.reasons(name).count(EVENT_WITHDRAWN) == 1

        async def canceled() -> bool:
            return requesters(await eviction_of(kube, NS, name)) == {REQUESTER: names.INTENT_WITHDRAWN}

        await eventually(canceled, "the Eviction told the requester withdrew", timeout=10)

        # The drainer comes back: once the responder has taken its mark back, the same request asks again.
        async def asked_again() -> bool:
            surge.review(review(name))
            return await asking()

        await eventually(asked_again, "the withdrawn request asked again by a new eviction", timeout=20)
        assert [r["metadata"]["name"] for r in await kube.list_all(REQUESTS, namespace=NS)] == [name_for(pod)]
