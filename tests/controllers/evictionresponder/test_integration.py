"""The responder on the embedded cluster, in both layouts of the surge machinery.

`beside-kcm`: aiokcm's ReplicaSet and Deployment controllers with `NodeMaintenanceDeployment` off
play KCM's (they answer nothing) and `replacement-surge` answers through the public API, as on a
managed cluster. `in-controller`: aiokcm's own ReplicaSet and Deployment controllers with the gate
on surge themselves (the ReplicaSet controller answers requests only with `DeclarativeNodeMaintenance`
on too, so both gates are on, as in the drain's own tests). No evictionrequest controller runs: each test writes the Eviction's status
itself (the responder's turn, Active or Canceled), as that controller would.

Each test runs on the embedded cluster and on the real tier (kube-apiserver v1.24 with aiokcm's
CRDs and their CEL rules, `[real]`). The pod's node is cordoned first, as a drain does, so the replacement starts on another node; the
test that cancels cordons every node, so the replacement can never start and the surge is still
under way when the cancellation comes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest

from apiclient import ApiError, KubeClient
from apiclient.resources import DEPLOYMENTS, NODES, PODS
from controllers.base import Controller
from controllers.common.evacuation import EVACUATION_INITIATED, EVACUATION_REQUEST, REASON_EVICTION_REQUEST
from controllers.context import ControllerContext
from controllers.deployment import DeploymentController
from controllers.evictionresponder import EvictionResponderController
from controllers.evictionresponder.plan import MESSAGE_CANCELED, MESSAGE_DONE
from controllers.evictionresponder.registration import RESPONDER_NAME, RESPONDER_PRIORITY
from controllers.features import DECLARATIVE_NODE_MAINTENANCE, NODE_MAINTENANCE_DEPLOYMENT
from controllers.replacementsurge import ReplacementSurgeController
from controllers.replicaset import ReplicaSetController
from evictionapi import names
from kubeutil.timestamps import format_time, utcnow
from localcluster.demo import NS, App, deployment, pod_available
from tests.backends import cluster_on_backend
from tests.controllers.harness import running_controllers
from tests.e2e.test_drain_zero_downtime import AvailabilityWatch
from tests.support.evictionrequests import EVICTIONS, install_eviction_api
from tests.support.surge import leftovers
from tests.support.waiting import eventually

Obj = dict[str, Any]
APP = App("web", 2)


def _replacement_surge(ctx: ControllerContext) -> Controller:
    return ReplacementSurgeController(ctx, name="replacement-surge", workers=2)


LAYOUTS: dict[
    str, tuple[tuple[type[Controller] | Callable[[ControllerContext], Controller], ...], dict[str, bool]]
] = {
    "beside-kcm": ((ReplicaSetController, DeploymentController, _replacement_surge), {}),
    "in-controller": (
        (ReplicaSetController, DeploymentController),
        {DECLARATIVE_NODE_MAINTENANCE: True, NODE_MAINTENANCE_DEPLOYMENT: True},
    ),
}


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with cluster_on_backend(request, nodes=3, pod_start_delay=0.2, termination_cap=0.5) as c:
        yield c


def running(kube: KubeClient, layout: str) -> Any:
    surge, gates = LAYOUTS[layout]
    return running_controllers(kube, *surge, EvictionResponderController, gates=gates)


async def _app_pods(kube: KubeClient) -> list[Obj]:
    return [
        p
        for p in await kube.list_all(PODS, namespace=NS)
        if (p["metadata"].get("labels") or {}).get("app") == APP.name
    ]


async def _started(kube: KubeClient) -> list[Obj]:
    await kube.create(DEPLOYMENTS, deployment(APP), namespace=NS)

    async def settled() -> list[Obj] | None:
        pods = await _app_pods(kube)
        return pods if len(pods) == APP.replicas and all(pod_available(p) for p in pods) else None

    found: list[Obj] = await eventually(settled, "the app available", timeout=30)
    return found


async def _cordon(kube: KubeClient, *nodes: str) -> None:
    for node in nodes:
        await kube.patch(NODES, node, {"spec": {"unschedulable": True}})


async def _eviction(kube: KubeClient, pod: Obj, *, name: str = "ev-web") -> Obj:
    """An Eviction of `pod` with the surge responder Active and the imperative evictor after it."""
    meta = pod["metadata"]
    created = await kube.create(
        EVICTIONS,
        {
            "apiVersion": f"{names.AIOKCM_GROUP}/{names.VERSION}",
            "kind": names.EVICTION_KIND,
            "metadata": {"name": name},
            "spec": {"target": {"pod": {"name": meta["name"], "uid": meta["uid"]}}},
        },
        namespace=meta["namespace"],
    )
    created["status"] = {
        "observedGeneration": 1,
        "requesters": [{"name": "ops.example.com/drain", "intent": names.INTENT_EVICTION}],
        "targetResponders": [
            {"name": RESPONDER_NAME, "priority": RESPONDER_PRIORITY, "state": names.STATE_ACTIVE},
            {"name": names.IMPERATIVE_EVICTOR, "priority": 100, "state": names.STATE_INACTIVE},
        ],
        "responders": [
            {"name": RESPONDER_NAME, "startTime": format_time(utcnow())},
            {"name": names.IMPERATIVE_EVICTOR},
        ],
    }
    replaced: Obj = await kube.replace(EVICTIONS, created, namespace=meta["namespace"], subresource="status")
    return replaced


async def _set_state(kube: KubeClient, name: str, state: str) -> None:
    """As the evictionrequest controller would: read, change, write back; the responder may write
    its own entry in between (a heartbeat), so a conflict means read again."""
    for _ in range(20):
        current = await kube.get(EVICTIONS, name, namespace=NS)
        for target in current["status"]["targetResponders"]:
            if target["name"] == RESPONDER_NAME:
                target["state"] = state
        current["status"]["requesters"] = [
            {"name": "ops.example.com/drain", "intent": names.INTENT_WITHDRAWN}
        ]
        try:
            await kube.replace(EVICTIONS, current, namespace=NS, subresource="status")
            return
        except ApiError as exc:
            if not exc.conflict:
                raise
    raise AssertionError(f"could not set {name}'s state: conflicts all along")


async def _ours(kube: KubeClient, name: str = "ev-web") -> Obj:
    eviction = await kube.get(EVICTIONS, name, namespace=NS)
    entry: Obj = next(r for r in eviction["status"]["responders"] if r["name"] == RESPONDER_NAME)
    return entry


def _condition(pod: Obj, type_: str) -> Obj | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


@pytest.mark.backends("local", "real")
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
async def test_an_eviction_is_answered_by_a_replacement_available_before_the_pod_goes(
    cluster: Any, kube: KubeClient, layout: str
) -> None:
    await install_eviction_api(kube, namespace=NS)
    async with running(kube, layout):
        pods = await _started(kube)
        target = pods[0]
        await _cordon(kube, target["spec"]["nodeName"])
        watch = AvailabilityWatch((APP,))
        messages: list[str] = []
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: watch.run(kube, task_status=task_status))
            await _eviction(kube, target)

            async def completed() -> Obj | None:
                entry = await _ours(kube)
                if entry.get("message") and entry["message"] not in messages:
                    messages.append(entry["message"])
                return entry if entry.get("completionTime") else None

            entry = await eventually(completed, "the responder's completion", timeout=60)
            tg.cancel_scope.cancel()
        assert entry["message"] == MESSAGE_DONE, messages
        assert entry.get("heartbeatTime")
        assert any(m.startswith("surging a replacement") for m in messages), messages
        assert watch.least[APP.name] >= APP.replicas  # the replacement was available before the pod went
        now = await _app_pods(kube)
        assert target["metadata"]["uid"] not in {p["metadata"]["uid"] for p in now if pod_available(p)}
        assert (await kube.get(DEPLOYMENTS, APP.name, namespace=NS))["spec"]["replicas"] == APP.replicas
        if layout == "beside-kcm":
            await eventually(lambda: _clean(kube), "no copy or deletion cost left", timeout=10)


async def _clean(kube: KubeClient) -> bool:
    return await leftovers(kube, NS) == []


@pytest.mark.backends("local", "real")
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
async def test_a_canceled_eviction_withdraws_the_request_and_the_surge_is_undone(
    cluster: Any, kube: KubeClient, layout: str
) -> None:
    await install_eviction_api(kube, namespace=NS)
    async with running(kube, layout):
        pods = await _started(kube)
        original = {p["metadata"]["uid"] for p in pods}
        target = pods[0]
        await _cordon(kube, *[n["metadata"]["name"] for n in await kube.list_all(NODES)])
        await _eviction(kube, target)

        async def surging() -> bool:
            pod = await kube.get(PODS, target["metadata"]["name"], namespace=NS)
            request, answer = _condition(pod, EVACUATION_REQUEST), _condition(pod, EVACUATION_INITIATED)
            started = len(await _app_pods(kube)) > APP.replicas
            return (
                request is not None
                and request.get("reason") == REASON_EVICTION_REQUEST
                and answer is not None
                and answer["status"] == "True"
                and started
                and str((await _ours(kube)).get("message", "")).startswith("surging a replacement")
            )

        await eventually(surging, "our request answered and a replacement pending", timeout=30)
        await _set_state(kube, "ev-web", names.STATE_CANCELED)

        async def undone() -> bool:
            pod = await kube.get(PODS, target["metadata"]["name"], namespace=NS)
            alive = {
                p["metadata"]["uid"]
                for p in await _app_pods(kube)
                if not p["metadata"].get("deletionTimestamp")
            }
            return _condition(pod, EVACUATION_REQUEST) is None and alive == original

        await eventually(undone, "the request withdrawn and the replacement gone", timeout=30)
        entry = await _ours(kube)
        assert entry["message"] == MESSAGE_CANCELED
        assert not entry.get("completionTime")
        if layout == "beside-kcm":
            await eventually(lambda: _clean(kube), "no copy or deletion cost left", timeout=10)
        assert (await kube.get(DEPLOYMENTS, APP.name, namespace=NS))["spec"]["replicas"] == APP.replicas


@pytest.mark.backends("local", "real")
async def test_a_pod_without_a_replicaset_is_handed_over_at_once(cluster: Any, kube: KubeClient) -> None:
    await install_eviction_api(kube, namespace=NS)
    async with running(kube, "beside-kcm"):
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "lonely", "labels": {"app": "lonely"}},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
        }
        pod = await kube.create(PODS, body, namespace=NS)
        await _eviction(kube, pod, name="ev-lonely")

        async def completed() -> Obj | None:
            entry = await _ours(kube, "ev-lonely")
            return entry if entry.get("completionTime") else None

        entry = await eventually(completed, "the responder's completion", timeout=20)
        assert "no ReplicaSet" in entry["message"] and "next responder" in entry["message"]
        after = await kube.get(PODS, "lonely", namespace=NS)
        assert _condition(after, EVACUATION_REQUEST) is None
        assert not after["metadata"].get("deletionTimestamp")
