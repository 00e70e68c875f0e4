"""Control-plane faults on a real kube-apiserver, aiokcm against the real KCM.

Each scenario runs side by side (see `sides.py`): the same workload, the same fault at the same
moment, on a plane run by the real KCM and on one run by aiokcm. Each must end in KCM's final
state (pods per ReplicaSet, ReplicaSet status matching its pods), create no pod beyond the
minimum the change needs and the creates whose answer the fault cut (stored, never answered: the
manager's log names each pod it learned it created), and converge no later than 2 s after KCM
once the server is back (a comparison between the two sides of one run, not an absolute time,
won in one of three tries since both sides reconnect on jittered backoffs); a connection error
during the outage must never put a bearer token in aiokcm's log. `python -m bench.faults` prints the
recovery figures of both sides.

One pair of planes serves the module (started once, ~9 s a pair with its stop). Each try gets
what a new pair would give it: the world reset (`reset_world`), and the scheduler and KCM
restarted on both sides, so no client of the API server carries a reconnect backoff over from
the last try's outage (client-go's grows when outages come within two minutes of each other,
which would slow KCM's recovery and ease the comparison); aiokcm starts per try as before.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from apiclient import ApiError, KubeClient
from apiclient.config import build_api_client
from apiclient.resources import DEPLOYMENTS, PODS, REPLICASETS
from realcluster import ControlPlane, reset_world
from tests.backends import real_assets_or_skip
from tests.real.sides import Side, first_time, on_both, planes_side_by_side, sides_running

# One pair of control planes serves the module: keep its tests on one xdist worker where they run
# with others (`make test` runs them in a process of their own, the rest niced beside it: see the Makefile).
pytestmark = pytest.mark.xdist_group("faults")

NS = "default"
RECOVERY_SLACK = 2.0  # seconds aiokcm may take beyond KCM, measured in the same run
RECOVERY_TRIES = 3  # recovery is a draw of jittered backoffs on both sides: see the test


@pytest.fixture(scope="module")
def planes() -> Iterator[dict[str, ControlPlane]]:
    pair = planes_side_by_side(real_assets_or_skip())
    try:
        with ThreadPoolExecutor(len(pair)) as starting:
            list(starting.map(ControlPlane.start, pair.values()))
        yield pair
    finally:
        with ThreadPoolExecutor(len(pair)) as stopping:  # each waits out its scheduler's grace
            list(stopping.map(ControlPlane.stop, pair.values()))


async def _as_new(plane: ControlPlane) -> None:
    """The plane as a try finds a new one: etcd and kube-apiserver up (a failed try may have left
    one down), nothing left of earlier tries, and the scheduler and KCM fresh processes."""
    for component in ("etcd", "kube-apiserver"):
        if not plane.running(component):
            await anyio.to_thread.run_sync(plane.start_component, component)
    await anyio.to_thread.run_sync(lambda: plane.wait_ready(timeout=60))
    client = KubeClient(
        await build_api_client(kubeconfig=str(plane.kubeconfig("admin"))), qps=1000, burst=2000
    )
    try:
        await reset_world(client)
    finally:
        await client.close()
    for component in ("kube-scheduler", "kube-controller-manager"):
        await anyio.to_thread.run_sync(plane.restart, component)


@asynccontextmanager
async def fresh_sides(planes: dict[str, ControlPlane]) -> AsyncIterator[tuple[Side, Side]]:
    """Both sides as a new pair of planes would start them (see the module's docstring)."""
    async with anyio.create_task_group() as tg:
        for plane in planes.values():
            tg.start_soon(_as_new, plane)
    async with sides_running(planes) as pair:
        yield pair


def replicaset(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{"name": "app", "image": "pause:1"}],
                    "terminationGracePeriodSeconds": 0,
                },
            },
        },
    }


def deployment(name: str, replicas: int, image: str = "pause:1") -> dict[str, Any]:
    body = replicaset(name, replicas)
    body["kind"] = "Deployment"
    body["spec"]["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
    }
    body["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return body


async def live_pods(client: KubeClient, app: str) -> list[dict[str, Any]]:
    pods = await client.list_all(PODS, namespace=NS, label_selector=f"app={app}")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def replica_sets_settled(client: KubeClient, app: str) -> dict[str, tuple[int, int, int]] | None:
    """Per ReplicaSet (by image): (spec.replicas, status.replicas, live pods), once every one has
    exactly its wanted pods, a current status and no pending generation; else None."""
    pods = await live_pods(client, app)
    out: dict[str, tuple[int, int, int]] = {}
    for rs in await client.list_all(REPLICASETS, namespace=NS):
        uid = rs["metadata"]["uid"]
        owned = [
            p for p in pods if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
        ]
        want = int(rs["spec"].get("replicas", 1))
        status = rs.get("status") or {}
        if (
            len(owned) != want
            or int(status.get("replicas", 0)) != want
            or status.get("observedGeneration") != rs["metadata"]["generation"]
            or int(status.get("readyReplicas", 0)) != want
        ):
            return None
        image = rs["spec"]["template"]["spec"]["containers"][0]["image"]
        out[image] = (want, int(status.get("replicas", 0)), len(owned))
    return out or None


async def deployment_settled(client: KubeClient, app: str) -> dict[str, Any] | None:
    try:
        d = await client.get(DEPLOYMENTS, app, namespace=NS)
    except ApiError:
        return None
    st = d.get("status") or {}
    want = int(d["spec"]["replicas"])
    if (
        st.get("observedGeneration") != d["metadata"]["generation"]
        or st.get("updatedReplicas") != want
        or st.get("replicas") != want
        or st.get("availableReplicas") != want
    ):
        return None
    sets = await replica_sets_settled(client, app)
    if sets is None:
        return None
    return {"replicas": want, "updated": st.get("updatedReplicas"), "sets": sets}


@dataclass
class Scenario:
    name: str
    setup: Callable[[Side], Awaitable[None]]  # brings the workload to its starting point
    change: Callable[[Side], Awaitable[None]]  # the change the fault interrupts
    settled: Callable[[Side], Awaitable[Any]]  # the final state, or None while converging
    fault: str  # "kube-apiserver", "etcd" or "manager"
    minimum_creates: int  # pods the change needs created, at the least
    fault_after: float = 0.5
    down_for: float = 5.0


async def _scale_rs(side: Side, replicas: int) -> None:
    await side.client.patch(REPLICASETS, "web", {"spec": {"replicas": replicas}}, namespace=NS)


async def _create_rs(side: Side, replicas: int) -> None:
    await side.client.create(REPLICASETS, replicaset("web", replicas), namespace=NS)


async def _set_image(side: Side, image: str) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}
    await side.client.patch(DEPLOYMENTS, "web", patch, namespace=NS, patch_type="strategic")


async def _rs_settled(side: Side) -> Any:
    return await replica_sets_settled(side.client, "web")


async def _deploy_settled(side: Side) -> Any:
    return await deployment_settled(side.client, "web")


async def _create_deploy(side: Side) -> None:
    await side.client.create(DEPLOYMENTS, deployment("web", 10), namespace=NS)


SCENARIOS = [
    Scenario(
        "apiserver-killed-during-scale-up",
        lambda s: _create_rs(s, 0),
        lambda s: _scale_rs(s, 60),
        _rs_settled,
        "kube-apiserver",
        minimum_creates=60,
    ),
    Scenario(
        "apiserver-killed-during-scale-down",
        lambda s: _create_rs(s, 60),
        lambda s: _scale_rs(s, 5),
        _rs_settled,
        "kube-apiserver",
        minimum_creates=0,
    ),
    Scenario(
        "apiserver-killed-during-rollout",
        _create_deploy,
        lambda s: _set_image(s, "pause:2"),
        _deploy_settled,
        "kube-apiserver",
        minimum_creates=10,
    ),
    Scenario(
        "etcd-restarted-during-rollout",
        _create_deploy,
        lambda s: _set_image(s, "pause:2"),
        _deploy_settled,
        "etcd",
        minimum_creates=10,
    ),
    Scenario(
        "manager-killed-mid-rollout",
        _create_deploy,
        lambda s: _set_image(s, "pause:2"),
        _deploy_settled,
        "manager",
        minimum_creates=10,
        fault_after=1.0,
        down_for=2.0,
    ),
]


async def run_side(side: Side, scenario: Scenario) -> dict[str, Any]:
    """The scenario on one side: final state, seconds from the server's return to convergence,
    pods created by the change."""
    await scenario.setup(side)
    start_state = await first_time(lambda: _truthy(scenario.settled(side)), timeout=90)
    del start_state
    before = await side.pod_names(NS)
    since = time.time()
    await scenario.change(side)
    await anyio.sleep(scenario.fault_after)
    if scenario.fault == "manager":
        await side.kill_manager()
        await anyio.sleep(scenario.down_for)
        back = time.monotonic()
        await side.start_manager()
    else:
        await side.kill_component(scenario.fault)
        await anyio.sleep(scenario.down_for)
        await side.start_component(scenario.fault)
        back = time.monotonic()
    converged = await first_time(lambda: _truthy(scenario.settled(side)), timeout=60)
    await anyio.sleep(2.0)  # let anything extra show up, and the audit log catch up
    after = await side.pod_names(NS)
    stored = side.pod_creates(since=since, before=before, after=after)
    unanswered = 0
    if side.name == "aiokcm":
        unanswered = side.pods_created_unanswered(side.pods_stored(since=since, before=before, after=after))
    return {
        "state": await scenario.settled(side),
        "recovery": converged - back,
        "creates": stored,
        "unanswered": unanswered,
    }


async def _truthy(result: Awaitable[Any]) -> bool:
    return bool(await result)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_fault_ends_in_kcms_state_as_fast_as_kcm(
    planes: dict[str, ControlPlane], scenario: Scenario
) -> None:
    """Every try must end in KCM's state with no extra pod (beyond a cut create's) and no token logged. The recovery times
    are one draw each of two jittered reconnect backoffs (client-go's, up to twice the step on
    either side: after a 5 s outage, 3.2 to 6.4 s), so one try can lose by chance; aiokcm must come
    within the slack in one of `RECOVERY_TRIES` tries, and a loss in all of them fails."""
    recoveries: list[tuple[float, float]] = []
    for _ in range(RECOVERY_TRIES):
        async with fresh_sides(planes) as (kcm, aiokcm):
            results = await on_both(kcm, aiokcm, lambda side: run_side(side, scenario))
            output = aiokcm.manager_output()
        want, got = results["kcm"], results["aiokcm"]
        assert got["state"] == want["state"], (
            f"{scenario.name}: aiokcm ended in {got['state']}, KCM in {want['state']}"
        )
        # A create whose answer the fault cut is counted failed, as KCM counts it, and may be
        # made again before the relist shows the first; every other pod beyond the change's is extra.
        # A fault cuts the creates in flight, never most of a change's: more says the log lost its names.
        assert 2 * got["unanswered"] <= got["creates"], got
        allowed = scenario.minimum_creates + got["unanswered"]
        assert scenario.minimum_creates <= got["creates"] <= allowed, (
            f"{scenario.name}: aiokcm created {got['creates']} pods, the change needs {scenario.minimum_creates} "
            f"and {got['unanswered']} of its creates lost their answer (KCM created {want['creates']})"
        )
        for token in aiokcm.plane.tokens().values():
            assert token not in output, f"{scenario.name}: a bearer token reached aiokcm's log"
        recoveries.append((got["recovery"], want["recovery"]))
        if got["recovery"] <= want["recovery"] + RECOVERY_SLACK:
            return
    tries = ", ".join(f"aiokcm {mine:.1f} s / KCM {theirs:.1f} s" for mine, theirs in recoveries)
    pytest.fail(
        f"{scenario.name}: aiokcm converged more than {RECOVERY_SLACK:g} s after KCM once the server "
        f"was back, in every try: {tries}"
    )
