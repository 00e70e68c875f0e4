"""A team's own responder goes first; when it falls silent, aiokcm's surge takes the pod over.

A Deployment's pod template names a third-party responder at a priority above the surge's 10000.
An EvictionRequest for one of its pods makes that responder Active; it never answers, and 20
minutes later (a virtual clock) the evictionrequest controller interrupts it and hands the turn to
`surge.aiokcm.io/replicaset`, which aiokcm registers on every Eviction without the workload naming
it. The surge starts a replacement within `maxSurge`, the pod goes only once the replacement is
available, and the request ends `TargetEvicted`. Nobody ever sees the app below its replicas.

Both layouts of the surge machinery: aiokcm's own ReplicaSet and Deployment controllers
(`in-controller`), and beside KCM's (`beside-kcm`: aiokcm's two controllers without the gates play
KCM's, `replacement-surge` answers through the public API).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NODES, PODS
from controllers import features
from controllers.base import Controller
from controllers.context import ControllerContext
from controllers.deployment import DeploymentController
from controllers.evictionrequest import EvictionRequestController
from controllers.evictionrequest.config import EvictionRequestConfig
from controllers.evictionresponder import EvictionResponderController
from controllers.evictionresponder.registration import RESPONDER_NAME, RESPONDER_PRIORITY
from controllers.imperativeeviction import ImperativeEvictionResponderController
from controllers.replacementsurge import ReplacementSurgeController
from controllers.replicaset import ReplicaSetController
from evictionapi import names
from localcluster.demo import NS, App, deployment, pod_available
from tests.backends import cluster_on_backend
from tests.controllers.harness import ControllerFactory, build, running_controllers
from tests.e2e.test_drain_zero_downtime import AvailabilityWatch
from tests.support.evictionrequests import (
    REQUESTS,
    VirtualClock,
    eviction_of,
    eviction_request,
    install_eviction_api,
    nudge,
    states,
    wait_for_states,
)
from tests.support.surge import leftovers
from tests.support.waiting import eventually

Obj = dict[str, Any]
APP = App("web", 2)
TEAM = "cache.example.com/drainer"
TEAM_PRIORITY = 20000
REQUESTER = "ops.example.com/rotate"
IMPERATIVE = names.IMPERATIVE_EVICTOR
EVICTION_GATES = {features.EVICTION_REQUEST_API: True}
SURGE_GATES = {features.DECLARATIVE_NODE_MAINTENANCE: True, features.NODE_MAINTENANCE_DEPLOYMENT: True}


def _replacement_surge(ctx: ControllerContext) -> Controller:
    return ReplacementSurgeController(ctx, name="replacement-surge", workers=2)


# What surges in each layout, and the gates it needs besides the API's.
LAYOUTS: dict[str, tuple[tuple[ControllerFactory, ...], dict[str, bool]]] = {
    "in-controller": ((ReplicaSetController, DeploymentController), SURGE_GATES),
    # Without the gates aiokcm's two controllers answer nothing, as KCM's: replacement-surge does.
    "beside-kcm": ((ReplicaSetController, DeploymentController, _replacement_surge), {}),
}


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with cluster_on_backend(request, nodes=3, pod_start_delay=0.2, termination_cap=0.5) as c:
        yield c


def _eviction_controllers(clock: VirtualClock) -> list[ControllerFactory]:
    implicit = EvictionRequestConfig(implicit_responders=((RESPONDER_NAME, RESPONDER_PRIORITY),))

    def requests(ctx: ControllerContext) -> Controller:
        return build(EvictionRequestController, ctx, clock=clock, config=implicit)

    def responder(ctx: ControllerContext) -> Controller:
        return build(EvictionResponderController, ctx, clock=clock)

    def evictor(ctx: ControllerContext) -> Controller:
        return build(ImperativeEvictionResponderController, ctx, clock=clock)

    # One clock for all three, as one machine's: heartbeats are judged against start times.
    return [requests, responder, evictor]


def _with_team_responder(body: Obj) -> Obj:
    template = body["spec"]["template"]["metadata"]
    template.setdefault("annotations", {})[names.POD_RESPONDERS_ANNOTATION] = json.dumps(
        [{"name": TEAM, "priority": TEAM_PRIORITY}]
    )
    return body


async def _app_pods(kube: KubeClient) -> list[Obj]:
    return [
        p
        for p in await kube.list_all(PODS, namespace=NS)
        if (p["metadata"].get("labels") or {}).get("app") == APP.name
    ]


@pytest.mark.backends("local", "real")
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
async def test_a_silent_team_responder_hands_the_pod_to_the_surge(
    cluster: Any, kube: KubeClient, layout: str
) -> None:
    surge, gates = LAYOUTS[layout]
    clock = VirtualClock()
    await install_eviction_api(kube, namespace=NS)
    watch = AvailabilityWatch((APP,))
    async with (
        running_controllers(kube, *surge, *_eviction_controllers(clock), gates={**EVICTION_GATES, **gates}),
        anyio.create_task_group() as tg,
    ):
        await kube.create(DEPLOYMENTS, _with_team_responder(deployment(APP)), namespace=NS)

        async def settled() -> list[Obj] | None:
            pods = await _app_pods(kube)
            return pods if len(pods) == APP.replicas and all(pod_available(p) for p in pods) else None

        pods: list[Obj] = await eventually(settled, "the app available", timeout=30)
        target = pods[0]
        node = target["spec"]["nodeName"]
        await kube.patch(NODES, node, {"spec": {"unschedulable": True}})  # as a drain does
        await tg.start(lambda task_status: watch.run(kube, task_status=task_status))
        request = await kube.create(
            REQUESTS, eviction_request(target, REQUESTER, name="rotate-web"), namespace=NS
        )
        pod_name = target["metadata"]["name"]
        team_first = [
            (TEAM, TEAM_PRIORITY, names.STATE_ACTIVE),
            (RESPONDER_NAME, RESPONDER_PRIORITY, names.STATE_INACTIVE),
            (IMPERATIVE, names.IMPERATIVE_EVICTOR_PRIORITY, names.STATE_INACTIVE),
        ]
        eviction = await wait_for_states(kube, NS, pod_name, team_first)

        clock.advance(names.HEARTBEAT_TIMEOUT_SECONDS + 60)  # the team's responder never answered
        await nudge(kube, request, eviction)
        await wait_for_states(
            kube,
            NS,
            pod_name,
            [
                (TEAM, TEAM_PRIORITY, names.STATE_INTERRUPTED),
                (RESPONDER_NAME, RESPONDER_PRIORITY, names.STATE_ACTIVE),
                (IMPERATIVE, names.IMPERATIVE_EVICTOR_PRIORITY, names.STATE_INACTIVE),
            ],
        )

        async def evicted() -> Obj | None:
            found = await kube.get(REQUESTS, "rotate-web", namespace=NS)
            conds = {c["type"]: c for c in (found.get("status") or {}).get("conditions") or []}
            done = conds.get(names.CONDITION_TARGET_EVICTED, {}).get("status") == "True"
            return found if done else None

        await eventually(evicted, "the request TargetEvicted", timeout=60)

        async def replaced() -> bool:
            pods = await _app_pods(kube)
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            return (
                all(p["metadata"]["name"] != pod_name for p in pods)
                and len(live) == APP.replicas
                and all(pod_available(p) and p["spec"]["nodeName"] != node for p in live)
            )

        await eventually(replaced, "the app back at its replicas off the node", timeout=60)
        tg.cancel_scope.cancel()
    final = await eviction_of(kube, NS, pod_name)
    # The surge completed its turn (the pod went through it); the evictor never had one.
    assert states(final)[1:] == [
        (RESPONDER_NAME, RESPONDER_PRIORITY, names.STATE_COMPLETED),
        (IMPERATIVE, names.IMPERATIVE_EVICTOR_PRIORITY, names.STATE_INACTIVE),
    ], states(final)
    assert watch.least[APP.name] >= APP.replicas, watch.least
    assert not await leftovers(kube, NS)
