"""A drain through EvictionRequests has zero downtime on the real control plane, in both layouts.

The README demo's apps (`solo`: 1 replica behind a PDB `minAvailable: 1`; `web`: 3 replicas; both
`maxSurge: 1, maxUnavailable: 0`) start on the node to drain, the hardest layout. A NodeMaintenance
with `evictionAPI: EvictionRequest` asks for every pod through an EvictionRequest (requester
`nodemaintenance.aiokcm.io/drain`); aiokcm's evictionrequest controller lists the surge responder
(`surge.aiokcm.io/replicaset`, priority 10000, registered implicitly as the manager does) before
the imperative evictor, and the surge responder has the pod replaced elsewhere first:

- beside the stock kube-controller-manager (`real_stock_plane`, every KCM controller running, as
  on a managed cluster), the replacement surge answers through the public API;
- replacing KCM's ReplicaSet, Deployment and disruption controllers (`real_plane`, whose KCM runs
  without them), aiokcm's own controllers surge in-controller.

`aiokcm evict` (the real entry point, a separate process with the cluster's kubeconfig) does the
same for one pod. Each case watches the pods event by event (`PodLog`): no app ever has fewer
available pods than its replicas, so `solo` is never at zero.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NODEMAINTENANCES, NODES, PODDISRUPTIONBUDGETS, PODS
from controller_manager.evict_cli import DEFAULT_REQUESTER
from controllers.base import Controller
from controllers.common.evacuation import EVACUATION_REQUEST
from controllers.common.pods import get_pod_condition
from controllers.context import ControllerContext
from controllers.deployment import DeploymentController
from controllers.disruption import DisruptionController
from controllers.evictionrequest import EvictionRequestController
from controllers.evictionrequest.config import EvictionRequestConfig
from controllers.evictionresponder import EvictionResponderController
from controllers.evictionresponder.registration import RESPONDER_NAME, RESPONDER_PRIORITY
from controllers.features import (
    DECLARATIVE_NODE_MAINTENANCE,
    EVICTION_REQUEST_API,
    NODE_MAINTENANCE_DEPLOYMENT,
)
from controllers.imperativeeviction import ImperativeEvictionResponderController
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.config import NodeMaintenanceConfig
from controllers.nodemaintenance.evictionrequests import REQUESTER
from controllers.replacementsurge import ReplacementSurgeController
from controllers.replicaset import ReplicaSetController
from evictionapi import names, requests
from localcluster.demo import APPS, NS, App, ensure_crd, pod_available
from realcluster import RealCluster
from tests.controllers.harness import running_controllers
from tests.real.test_surge_beside_stock_kcm import (
    PodLog,
    no_leftovers,
    nothing_left_on,
    place_on,
    uncordon_all_but,
    wait_drained,
)
from tests.support.evictionrequests import EVICTIONS, REQUESTS, install_eviction_api, states
from tests.support.objects import node_maintenance
from tests.support.sessionplanes import SESSION_PLANE
from tests.support.waiting import eventually

GATES = {DECLARATIVE_NODE_MAINTENANCE: True, NODE_MAINTENANCE_DEPLOYMENT: True, EVICTION_REQUEST_API: True}
TARGET = "node-1"
# What the manager gives the evictionrequest controller when `eviction-responder` runs.
IMPLICIT_SURGE = EvictionRequestConfig(implicit_responders=((RESPONDER_NAME, RESPONDER_PRIORITY),))
EVICTION_API_CONTROLLERS = (
    EvictionRequestController,
    ImperativeEvictionResponderController,
    EvictionResponderController,
)


def _replacement_surge(ctx: ControllerContext) -> Controller:
    return ReplacementSurgeController(ctx, name="replacement-surge", workers=2)


@dataclass(frozen=True)
class Layout:
    """A control plane (the session fixture's name) and the aiokcm controllers run beside it."""

    plane: str
    # Whether the surge makes labelled copies for the ReplicaSet to adopt (the public-API surge)
    # rather than scaling the ReplicaSet itself (in-controller).
    labels_copies: bool
    controllers: tuple[type[Controller] | Callable[[ControllerContext], Controller], ...]
    configs: tuple[object, ...]


# The managed-cluster layout: KCM runs everything; aiokcm the drain and the public-API surge.
BESIDE_STOCK_KCM = Layout(
    "real_stock_plane",
    True,
    (NodeMaintenanceController, _replacement_surge, *EVICTION_API_CONTROLLERS),
    (NodeMaintenanceConfig(surge_answers=True, bare_replicasets_answer=True), IMPLICIT_SURGE),
)
# aiokcm in place of KCM's ReplicaSet, Deployment and disruption controllers, surging in-controller.
REPLACING_KCM = Layout(
    "real_plane",
    False,
    (
        ReplicaSetController,
        DeploymentController,
        DisruptionController,
        NodeMaintenanceController,
        *EVICTION_API_CONTROLLERS,
    ),
    (NodeMaintenanceConfig(surge_answers=True, bare_replicasets_answer=False), IMPLICIT_SURGE),
)
# The stock-KCM control plane is one per session: its tests stay on one xdist worker.
LAYOUTS = [
    pytest.param(
        BESIDE_STOCK_KCM, id="beside-stock-kcm", marks=(pytest.mark.xdist_group("stock-kcm"), SESSION_PLANE)
    ),
    pytest.param(REPLACING_KCM, id="replacing-kcm", marks=SESSION_PLANE),
]


@pytest.fixture
async def cluster(request: pytest.FixtureRequest, layout: Layout) -> AsyncIterator[RealCluster]:
    plane = request.getfixturevalue(layout.plane)
    async with RealCluster(plane, nodes=4, pod_start_delay=0.2, termination_cap=0.5) as real:
        yield real


@pytest.fixture
async def kube(cluster: RealCluster) -> AsyncIterator[KubeClient]:
    client = await cluster.client()
    try:
        await ensure_crd(client)
        await install_eviction_api(client, namespace=NS)
        yield client
    finally:
        await client.close()


def aiokcm(kube: KubeClient, layout: Layout) -> Any:
    return running_controllers(kube, *layout.controllers, gates=GATES, configs=layout.configs)


async def demo_apps_on(kube: KubeClient, node: str, apps: tuple[App, ...] = APPS) -> None:
    """The apps available with every pod on `node`, the other nodes schedulable again, and the
    budgets computed (so an eviction of `solo`'s only pod would be refused)."""
    await place_on(kube, {node}, apps)
    await uncordon_all_but(kube, set())

    async def budgets_computed() -> bool:
        for app in apps:
            if app.pdb_min_available is None:
                continue
            status = (await kube.get(PODDISRUPTIONBUDGETS, app.name, namespace=NS)).get("status") or {}
            if status.get("currentHealthy") != app.replicas or status.get("disruptionsAllowed") != 0:
                return False
        return True

    await eventually(budgets_computed, "the budgets computed (no disruption allowed)", timeout=30)


def assert_never_below_replicas(log: PodLog, apps: tuple[App, ...] = APPS) -> None:
    for app in apps:
        assert log.least[app.name] >= app.replicas, (
            f"{app.name} dropped to {log.least[app.name]} available pods (replicas {app.replicas}); "
            f"least per app: {log.least}"
        )


def assert_bounded_surge(log: PodLog, apps: tuple[App, ...] = APPS) -> None:
    """Never more pods than `maxSurge` allows (plus, beside KCM, the adopted copy's moment before
    KCM deletes the departing pod)."""
    for app in apps:
        assert log.most[app.name] <= app.replicas + app.max_surge + 1, log.most


async def no_evacuation_marks(kube: KubeClient, apps: tuple[App, ...] = APPS) -> None:
    """No pod left asked to leave (the responder's `EvacuationRequest`), no Deployment resized."""
    pods = await kube.list_all(PODS, namespace=NS)
    marked = [p["metadata"]["name"] for p in pods if get_pod_condition(p, EVACUATION_REQUEST) is not None]
    assert not marked, f"pods still carrying {EVACUATION_REQUEST}: {marked}"
    for app in apps:
        spec = (await kube.get(DEPLOYMENTS, app.name, namespace=NS))["spec"]
        assert spec["replicas"] == app.replicas, (app.name, spec["replicas"])


def surge_completed(eviction: dict[str, Any]) -> bool:
    """The surge responder did the eviction: Completed, the imperative evictor never called on."""
    by_name = {name: state for name, _, state in states(eviction)}
    return by_name.get(RESPONDER_NAME) == names.STATE_COMPLETED and by_name.get(names.IMPERATIVE_EVICTOR) in (
        names.STATE_INACTIVE,
        None,
    )


async def evicted_by_the_surge(kube: KubeClient, requester: str, pods: set[str]) -> None:
    """Every request of `requester` reports TargetEvicted, one per pod in `pods`, and each pod's
    Eviction was completed by the surge responder."""
    mine: list[dict[str, Any]] = []

    async def settled() -> bool:
        mine[:] = [
            r for r in await kube.list_all(REQUESTS, namespace=NS) if requests.requester_of(r) == requester
        ]
        return len(mine) == len(pods) and all(requests.target_evicted(r) for r in mine)

    try:
        await eventually(settled, f"{requester}'s requests TargetEvicted", timeout=20)
    except AssertionError:
        raise AssertionError(
            f"requests of {requester}: {[(r['metadata']['name'], requests.conditions_of(r)) for r in mine]}"
        ) from None
    assert {(requests.target_pod_of(r) or ("", ""))[0] for r in mine} == pods
    evictions = {
        (requests.target_pod_of(e) or ("", ""))[0]: e for e in await kube.list_all(EVICTIONS, namespace=NS)
    }
    for pod in pods:
        eviction = evictions.get(pod)
        assert eviction is not None, f"no Eviction of {pod}"
        assert surge_completed(eviction), (pod, states(eviction))


async def app_pods_on(kube: KubeClient, node: str) -> set[str]:
    app_names = {a.name for a in APPS}
    return {
        p["metadata"]["name"]
        for p in await kube.list_all(PODS, namespace=NS)
        if (p["metadata"].get("labels") or {}).get("app") in app_names and p["spec"].get("nodeName") == node
    }


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_a_node_maintenance_drain_through_eviction_requests_has_zero_downtime(
    layout: Layout, cluster: RealCluster, kube: KubeClient
) -> None:
    async with aiokcm(kube, layout), anyio.create_task_group() as tg:
        await demo_apps_on(kube, TARGET)
        drained_pods = await app_pods_on(kube, TARGET)
        log = PodLog(APPS)
        await tg.start(lambda task_status: log.run(kube, task_status=task_status))
        nm = node_maintenance("er-drain", [TARGET], drain=True, timeout=None, evictionAPI="EvictionRequest")
        await kube.create(NODEMAINTENANCES, nm)
        await wait_drained(kube, "er-drain", timeout=60)
        await eventually(lambda: nothing_left_on(kube, TARGET, APPS), "every app off the node", timeout=30)
        await evicted_by_the_surge(kube, REQUESTER, drained_pods)
        tg.cancel_scope.cancel()
    assert log.events >= 2 * len(drained_pods), f"the watch saw too little of the drain ({log.events} events)"
    assert_never_below_replicas(log)
    assert_bounded_surge(log)
    if layout.labels_copies:
        assert len(log.copies) == len(drained_pods), (log.copies, drained_pods)
    assert await app_pods_on(kube, TARGET) == set()
    await no_leftovers(kube)
    await no_evacuation_marks(kube)


async def aiokcm_evict(cluster: RealCluster, pod: str, *, timeout: str) -> tuple[int, str, str]:
    """The real command, in its own process, with the cluster's kubeconfig."""
    argv = ["evict", pod, "-n", NS, "--kubeconfig", cluster.kubeconfig_path, "--timeout", timeout]
    done = await anyio.run_process([sys.executable, "-m", "controller_manager", *argv], check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


# Where the replacement may start: `elsewhere`, the pod's node cordoned first (an operator moving
# pods off a node one by one); `own-node`, every other node cordoned, so it starts beside the pod.
# A pod-level eviction does not empty its node, so a replacement beside the pod is as good as one
# elsewhere, in both layouts (beside KCM the replacement surge accepts its copy there too).
ELSEWHERE, OWN_NODE = "elsewhere", "own-node"
EVICT_CASES = [
    pytest.param(
        BESIDE_STOCK_KCM,
        ELSEWHERE,
        id="beside-stock-kcm-elsewhere",
        marks=(pytest.mark.xdist_group("stock-kcm"), SESSION_PLANE),
    ),
    pytest.param(REPLACING_KCM, ELSEWHERE, id="replacing-kcm-elsewhere", marks=SESSION_PLANE),
    pytest.param(REPLACING_KCM, OWN_NODE, id="replacing-kcm-own-node", marks=SESSION_PLANE),
    pytest.param(
        BESIDE_STOCK_KCM,
        OWN_NODE,
        id="beside-stock-kcm-own-node",
        marks=(pytest.mark.xdist_group("stock-kcm"), SESSION_PLANE),
    ),
]


@pytest.mark.parametrize(("layout", "room"), EVICT_CASES)
async def test_aiokcm_evict_replaces_one_pod_with_zero_downtime(
    layout: Layout, room: str, cluster: RealCluster, kube: KubeClient
) -> None:
    solo = APPS[0]
    async with aiokcm(kube, layout), anyio.create_task_group() as tg:
        await demo_apps_on(kube, TARGET, (solo,))
        if room == ELSEWHERE:
            await kube.patch(NODES, TARGET, {"spec": {"unschedulable": True}})
        else:
            for node in await kube.list_all(NODES):
                if node["metadata"]["name"] != TARGET:
                    await kube.patch(NODES, node["metadata"]["name"], {"spec": {"unschedulable": True}})
        (pod,) = await app_pods_on(kube, TARGET)
        log = PodLog((solo,))
        await tg.start(lambda task_status: log.run(kube, task_status=task_status))
        code, out, err = await aiokcm_evict(cluster, pod, timeout="15s")
        assert code == 0, (out, err)
        assert out.splitlines()[-1] == f"evicted: {NS}/{pod}", out

        async def replaced() -> bool:
            pods = [
                p
                for p in await kube.list_all(PODS, namespace=NS)
                if (p["metadata"].get("labels") or {}).get("app") == solo.name
            ]
            names_ = {p["metadata"]["name"] for p in pods}
            return pod not in names_ and sum(1 for p in pods if pod_available(p)) == solo.replicas

        await eventually(replaced, f"{pod} replaced", timeout=30)
        await evicted_by_the_surge(kube, DEFAULT_REQUESTER, {pod})
        tg.cancel_scope.cancel()
    assert_never_below_replicas(log, (solo,))
    assert_bounded_surge(log, (solo,))
    if layout.labels_copies:
        assert len(log.copies) == 1, log.copies
    await no_leftovers(kube)
    await no_evacuation_marks(kube, (solo,))
