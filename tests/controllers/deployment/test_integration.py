"""The Deployment controller with the ReplicaSet controller against the local API server.

Pods are bound and made Ready by `FakeKubelet` (the local cluster has no scheduler or kubelets
yet); everything else is the real thing: informers over HTTP, the two controllers, the API
server's validation, defaulting and patch semantics.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NODES, PODS, REPLICASETS
from controllers import features
from controllers.common.controller_ref import get_controller_of
from controllers.common.pods import is_pod_ready, is_terminating
from controllers.context import ControllerContext, StaticGates
from controllers.deployment import DeploymentController
from controllers.deployment.util import POD_TEMPLATE_HASH_LABEL, REVISION_ANNOTATION, compute_hash
from controllers.replicaset import ReplicaSetController
from kubeutil.conditions import get_condition
from tests.controllers.deployment.fakekubelet import AvailabilitySampler, FakeKubelet
from tests.controllers.harness import (
    Harness,
    RecordingEvents,
    build,
    make_factory,
    running_controllers,
)
from tests.support.waiting import eventually

NS = "default"
GATES = {features.DECLARATIVE_NODE_MAINTENANCE: True, features.NODE_MAINTENANCE_DEPLOYMENT: True}
BROKEN = "broken:latest"

pytestmark = pytest.mark.usefixtures("cluster")


def deployment_body(
    name: str,
    replicas: int,
    *,
    image: str = "nginx:1",
    strategy: dict[str, Any] | None = None,
    extra_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
            "strategy": strategy
            or {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            **(extra_spec or {}),
        },
    }


@asynccontextmanager
async def running(
    kube: KubeClient, *, gates: dict[str, bool] | None = None
) -> AsyncIterator[tuple[Harness, FakeKubelet]]:
    kubelet = FakeKubelet(kube, NS, broken_images=frozenset({BROKEN}))
    async with running_controllers(
        kube, DeploymentController, ReplicaSetController, gates=gates or GATES
    ) as h:
        async with anyio.create_task_group() as tg:
            tg.start_soon(kubelet.run)
            try:
                yield h, kubelet
            finally:
                tg.cancel_scope.cancel()


async def get_d(kube: KubeClient, name: str) -> dict[str, Any]:
    return await kube.get(DEPLOYMENTS, name, namespace=NS)


async def replica_sets(kube: KubeClient, name: str) -> list[dict[str, Any]]:
    rss = await kube.list_all(REPLICASETS, namespace=NS, label_selector=f"app={name}")
    return sorted(
        rss, key=lambda rs: int(rs["metadata"].get("annotations", {}).get(REVISION_ANNOTATION, "0"))
    )


async def live_pods(kube: KubeClient, name: str) -> list[dict[str, Any]]:
    pods = await kube.list_all(PODS, namespace=NS, label_selector=f"app={name}")
    return [p for p in pods if not is_terminating(p)]


async def rollout_complete(kube: KubeClient, name: str) -> bool:
    """What `kubectl rollout status` checks."""
    d = await get_d(kube, name)
    st = d.get("status") or {}
    want = d["spec"]["replicas"]
    return bool(
        st.get("observedGeneration", 0) >= d["metadata"]["generation"]
        and st.get("updatedReplicas") == want
        and st.get("replicas") == want
        and st.get("availableReplicas") == want
    )


async def set_image(kube: KubeClient, name: str, image: str) -> None:
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}
    await kube.patch(DEPLOYMENTS, name, patch, namespace=NS, patch_type="strategic")


def progressing_reason(d: dict[str, Any]) -> str | None:
    cond = get_condition(d.get("status"), "Progressing")
    return None if cond is None else str(cond.get("reason"))


# -- rollouts ------------------------------------------------------------------------------


async def test_rolling_update_replaces_every_pod_and_records_revisions(kube: KubeClient) -> None:
    async with running(kube):
        await kube.create(
            DEPLOYMENTS, deployment_body("web", 3, extra_spec={"progressDeadlineSeconds": 600}), namespace=NS
        )
        await eventually(lambda: rollout_complete(kube, "web"), "first rollout")
        first = (await replica_sets(kube, "web"))[0]
        pod_hash = first["metadata"]["labels"][POD_TEMPLATE_HASH_LABEL]
        assert first["metadata"]["name"] == f"web-{pod_hash}"
        assert first["spec"]["selector"]["matchLabels"][POD_TEMPLATE_HASH_LABEL] == pod_hash
        assert get_controller_of(first)["name"] == "web"  # type: ignore[index]

        await set_image(kube, "web", "nginx:2")
        await eventually(lambda: rollout_complete(kube, "web"), "second rollout")
        rss = await replica_sets(kube, "web")
        assert [rs["metadata"]["annotations"][REVISION_ANNOTATION] for rs in rss] == ["1", "2"]
        assert [rs["spec"]["replicas"] for rs in rss] == [0, 3]
        pods = await live_pods(kube, "web")
        assert {p["spec"]["containers"][0]["image"] for p in pods} == {"nginx:2"}
        d = await get_d(kube, "web")
        assert d["metadata"]["annotations"][REVISION_ANNOTATION] == "2"
        assert progressing_reason(d) == "NewReplicaSetAvailable"
        avail = get_condition(d["status"], "Available")
        assert avail is not None and avail["status"] == "True"


async def test_recreate_never_runs_two_versions_at_once(kube: KubeClient) -> None:
    seen_mixed = False

    async def watch_versions() -> None:
        nonlocal seen_mixed
        while True:
            images = {
                p["spec"]["containers"][0]["image"]
                for p in await kube.list_all(PODS, namespace=NS, label_selector="app=rec")
            }
            seen_mixed = seen_mixed or len(images) > 1
            await anyio.sleep(0.005)

    async with running(kube):
        await kube.create(DEPLOYMENTS, deployment_body("rec", 2, strategy={"type": "Recreate"}), namespace=NS)
        await eventually(lambda: rollout_complete(kube, "rec"), "first rollout")
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_versions)
            await set_image(kube, "rec", "nginx:2")
            await eventually(lambda: rollout_complete(kube, "rec"), "recreate rollout")
            tg.cancel_scope.cancel()
    assert not seen_mixed
    assert {p["spec"]["containers"][0]["image"] for p in await live_pods(kube, "rec")} == {"nginx:2"}


async def test_scaling_in_the_middle_of_a_rollout_is_proportional(kube: KubeClient) -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}
    async with running(kube):
        await kube.create(DEPLOYMENTS, deployment_body("prop", 10, strategy=strategy), namespace=NS)
        await eventually(lambda: rollout_complete(kube, "prop"), "first rollout")
        await set_image(kube, "prop", BROKEN)  # new pods never become ready: the rollout stalls

        async def sizes() -> list[int]:
            return [rs["spec"]["replicas"] for rs in await replica_sets(kube, "prop")]

        await eventually(lambda: _equals(sizes(), [8, 5]), "rollout stalled at 8 old / 5 new")
        await kube.patch(DEPLOYMENTS, "prop", {"spec": {"replicas": 20}}, namespace=NS)
        # 13 -> 23 (20 + surge 3), spread 8:5 -> 14:9 as KCM's GetProportion does.
        await eventually(lambda: _equals(sizes(), [14, 9]), "proportional scale-up")
        await anyio.sleep(0.5)
        assert await sizes() == [14, 9]


async def _equals(value: Any, want: Any) -> bool:
    return bool(await value == want)


async def test_progress_deadline_exceeded_when_rollout_stalls(kube: KubeClient) -> None:
    async with running(kube):
        body = deployment_body("slow", 2, extra_spec={"progressDeadlineSeconds": 2})
        await kube.create(DEPLOYMENTS, body, namespace=NS)
        await eventually(lambda: rollout_complete(kube, "slow"), "first rollout")
        await set_image(kube, "slow", BROKEN)

        async def timed_out() -> bool:
            return progressing_reason(await get_d(kube, "slow")) == "ProgressDeadlineExceeded"

        await eventually(timed_out, "ProgressDeadlineExceeded", timeout=30)
        cond = get_condition((await get_d(kube, "slow"))["status"], "Progressing")
        assert cond is not None and cond["status"] == "False"
        # The old pods keep serving: maxUnavailable 0 never let them go.
        assert (
            len(
                [p for p in await live_pods(kube, "slow") if p["spec"]["containers"][0]["image"] == "nginx:1"]
            )
            == 2
        )


async def test_pause_holds_the_rollout_and_resume_continues(kube: KubeClient) -> None:
    async with running(kube):
        await kube.create(
            DEPLOYMENTS, deployment_body("pz", 2, extra_spec={"progressDeadlineSeconds": 600}), namespace=NS
        )
        await eventually(lambda: rollout_complete(kube, "pz"), "first rollout")
        await kube.patch(DEPLOYMENTS, "pz", {"spec": {"paused": True}}, namespace=NS)
        await eventually(lambda: _reason_is(kube, "pz", "DeploymentPaused"), "paused condition")
        await set_image(kube, "pz", "nginx:2")
        # Scaling still works while paused; no new ReplicaSet appears.
        await kube.patch(DEPLOYMENTS, "pz", {"spec": {"replicas": 3}}, namespace=NS)
        await eventually(lambda: _pod_count(kube, "pz", 3), "scaled while paused")
        assert len(await replica_sets(kube, "pz")) == 1
        await kube.patch(DEPLOYMENTS, "pz", {"spec": {"paused": False}}, namespace=NS)
        await eventually(lambda: rollout_complete(kube, "pz"), "rollout after resume")
        assert {p["spec"]["containers"][0]["image"] for p in await live_pods(kube, "pz")} == {"nginx:2"}
        assert len(await replica_sets(kube, "pz")) == 2


async def _reason_is(kube: KubeClient, name: str, reason: str) -> bool:
    return progressing_reason(await get_d(kube, name)) == reason


async def _pod_count(kube: KubeClient, name: str, n: int) -> bool:
    pods = await live_pods(kube, name)
    return len(pods) == n and all(get_condition(p.get("status"), "Ready") for p in pods)


async def test_rollback_annotation_restores_previous_template(kube: KubeClient) -> None:
    async with running(kube):
        await kube.create(DEPLOYMENTS, deployment_body("rb", 2), namespace=NS)
        await eventually(lambda: rollout_complete(kube, "rb"), "first rollout")
        await set_image(kube, "rb", "nginx:2")
        await eventually(lambda: rollout_complete(kube, "rb"), "second rollout")
        patch = {"metadata": {"annotations": {"deprecated.deployment.rollback.to": "0"}}}
        await kube.patch(DEPLOYMENTS, "rb", patch, namespace=NS)

        async def back_on_v1() -> bool:
            d = await get_d(kube, "rb")
            return d["spec"]["template"]["spec"]["containers"][0][
                "image"
            ] == "nginx:1" and await rollout_complete(kube, "rb")

        await eventually(back_on_v1, "rolled back to nginx:1")
        d = await get_d(kube, "rb")
        assert "deprecated.deployment.rollback.to" not in d["metadata"].get("annotations", {})
        assert POD_TEMPLATE_HASH_LABEL not in d["spec"]["template"]["metadata"]["labels"]
        rss = await replica_sets(kube, "rb")
        # The first ReplicaSet is reused and becomes revision 3, remembering it was revision 1.
        assert len(rss) == 2
        newest = rss[-1]
        assert newest["metadata"]["annotations"][REVISION_ANNOTATION] == "3"
        assert newest["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
        assert {p["spec"]["containers"][0]["image"] for p in await live_pods(kube, "rb")} == {"nginx:1"}


async def test_old_replica_sets_beyond_history_limit_are_deleted(kube: KubeClient) -> None:
    async with running(kube):
        await kube.create(
            DEPLOYMENTS, deployment_body("hist", 1, extra_spec={"revisionHistoryLimit": 1}), namespace=NS
        )
        for version in (1, 2, 3, 4):
            if version > 1:
                await set_image(kube, "hist", f"nginx:{version}")
            await eventually(lambda: rollout_complete(kube, "hist"), f"rollout {version}")

        async def two_left() -> bool:
            return len(await replica_sets(kube, "hist")) == 2

        await eventually(two_left, "history trimmed to one old ReplicaSet")
        revisions = [
            rs["metadata"]["annotations"][REVISION_ANNOTATION] for rs in await replica_sets(kube, "hist")
        ]
        assert revisions == ["3", "4"]


# -- evacuation by surge -------------------------------------------------------------------


async def cordon(kube: KubeClient, node: str) -> None:
    await kube.patch(NODES, node, {"spec": {"unschedulable": True}})


async def request_evacuation(kube: KubeClient, pod: str, *, status: str = "True") -> None:
    cond = {
        "type": "EvacuationRequest",
        "status": status,
        "reason": "NodeMaintenance",
        "message": "kernel upgrade",
    }
    await kube.patch(
        PODS,
        pod,
        {"status": {"conditions": [cond]}},
        namespace=NS,
        subresource="status",
        patch_type="strategic",
    )


async def pods_on(kube: KubeClient, name: str, node: str) -> list[dict[str, Any]]:
    return [p for p in await live_pods(kube, name) if p["spec"].get("nodeName") == node]


async def evacuate_node(kube: KubeClient, name: str, node: str) -> list[str]:
    await cordon(kube, node)
    requested = [p["metadata"]["name"] for p in await pods_on(kube, name, node)]
    for pod in requested:
        await request_evacuation(kube, pod)
    return requested


async def rs_marked(kube: KubeClient, name: str) -> bool:
    rss = [rs for rs in await replica_sets(kube, name) if rs["spec"]["replicas"] > 0]
    return bool(rss) and all(
        rs["metadata"].get("annotations", {}).get("deployment.kubernetes.io/evacuation-ready") == "true"
        for rs in rss
    )


@pytest.mark.parametrize("replicas", [1, 3])
async def test_evacuation_moves_pods_off_the_node_without_losing_availability(
    kube: KubeClient, replicas: int
) -> None:
    # 25% surge rounds up to 1; 25% unavailable rounds down to 0: availability must never dip.
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    sampler = AvailabilitySampler(kube, NS, "evac")
    async with running(kube) as (h, _kubelet):
        await kube.create(DEPLOYMENTS, deployment_body("evac", replicas, strategy=strategy), namespace=NS)
        await eventually(lambda: rollout_complete(kube, "evac"), "rollout")
        await eventually(lambda: rs_marked(kube, "evac"), "evacuation-ready mark")
        node = (await live_pods(kube, "evac"))[0]["spec"]["nodeName"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler.run)
            await eventually(lambda: sampler.samples > 0, "first sample")
            requested = await evacuate_node(kube, "evac", node)
            assert requested

            async def evacuated() -> bool:
                if await pods_on(kube, "evac", node):
                    return False
                rss = await replica_sets(kube, "evac")
                return rss[-1]["spec"]["replicas"] == replicas and await rollout_complete(kube, "evac")

            await eventually(evacuated, f"no pod left on {node}", timeout=40)
            tg.cancel_scope.cancel()
        # Moved by surging and releasing, once per requested pod (surge budget 1), not by a rollout:
        # each step is one scale of the one ReplicaSet, announced as KCM announces a scale.
        scaled = [
            e.message for e in h.events.events if e.object_name == "evac" and e.reason == "ScalingReplicaSet"
        ]
        ups = [m for m in scaled if m.startswith("Scaled up") and not m.endswith(f" to {replicas}")]
        downs = [m for m in scaled if m.startswith("Scaled down")]
        assert len(ups) == len(requested) and len(downs) == len(requested), scaled
        assert len({m.split()[4] for m in scaled}) == 1  # one ReplicaSet throughout: no rollout
        assert not [r for r in h.events.reasons("evac") if r.startswith("Evacuation")]  # no events KCM lacks
        assert sampler.minimum is not None and sampler.minimum >= replicas  # replicas - maxUnavailable(0)
        assert sampler.minimum > 0
        assert len(await live_pods(kube, "evac")) == replicas
        d = await get_d(kube, "evac")
        assert "maintenance.aiokcm.io/replicas-to-evacuate" not in d["metadata"].get("annotations", {})


async def test_all_requested_pods_of_an_app_are_replaced_in_one_step_within_max_surge(
    kube: KubeClient,
) -> None:
    # Three pods asked to leave and a surge budget of three: one scale of the ReplicaSet from 3 to
    # 6 creates the three replacements together, instead of one replacement at a time.
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 0}}
    async with running(kube):
        await kube.create(DEPLOYMENTS, deployment_body("all3", 3, strategy=strategy), namespace=NS)
        await eventually(lambda: rollout_complete(kube, "all3"), "rollout")
        await eventually(lambda: rs_marked(kube, "all3"), "evacuation-ready mark")
    # The controllers are stopped while the drain asks, so they find all three requests at once.
    requested = [p["metadata"]["name"] for p in await live_pods(kube, "all3")]
    for name in requested:
        await request_evacuation(kube, name)
    sampler = AvailabilitySampler(kube, NS, "all3")
    async with running(kube) as (h, _kubelet):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler.run)
            await eventually(lambda: sampler.samples > 0, "first sample")

            async def moved() -> bool:
                names = {p["metadata"]["name"] for p in await live_pods(kube, "all3")}
                return len(names) == 3 and not names & set(requested)

            await eventually(moved, "three replacements, no requested pod left", timeout=40)
            tg.cancel_scope.cancel()
        scaled = [
            e.message for e in h.events.events if e.object_name == "all3" and e.reason == "ScalingReplicaSet"
        ]
        assert [m for m in scaled if m.startswith("Scaled up")] == [scaled[0]]
        assert scaled[0].endswith(" to 6"), scaled
        creates = [e for e in h.events.events if e.reason == "SuccessfulCreate"]
        assert len(creates) == 3
    assert sampler.minimum is not None and sampler.minimum >= 3


async def test_requests_arriving_mid_surge_are_replaced_without_waiting_for_the_first(
    kube: KubeClient,
) -> None:
    # A drain asks pod by pod: the surge for the first request is topped up for the next ones at
    # once, not after the first replacement became available.
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 0}}
    async with running(kube) as (_h, kubelet):
        await kube.create(DEPLOYMENTS, deployment_body("topup", 3, strategy=strategy), namespace=NS)
        await eventually(lambda: rollout_complete(kube, "topup"), "rollout")
        await eventually(lambda: rs_marked(kube, "topup"), "evacuation-ready mark")
        requested = [p["metadata"]["name"] for p in await live_pods(kube, "topup")]
        kubelet.hold_readiness = True  # no replacement becomes available yet
        await request_evacuation(kube, requested[0])

        async def spec_is(n: int) -> bool:
            return bool((await replica_sets(kube, "topup"))[-1]["spec"]["replicas"] == n)

        await eventually(lambda: spec_is(4), "surge for the first request")
        for name in requested[1:]:
            await request_evacuation(kube, name)
        await eventually(lambda: spec_is(6), "surge topped up while the first replacement is not ready")
        assert len(await live_pods(kube, "topup")) <= 6  # within maxSurge
        kubelet.hold_readiness = False

        async def moved() -> bool:
            names = {p["metadata"]["name"] for p in await live_pods(kube, "topup")}
            return len(names) == 3 and not names & set(requested)

        await eventually(moved, "requested pods replaced", timeout=40)


async def test_one_sync_writes_the_status_and_the_evacuation_count_together(
    kube: KubeClient, cluster: Any
) -> None:
    # A sync that finds both its status and its evacuation count out of date writes them in one
    # `/status` write, not one write for the count and another for the status.
    async with running(kube):
        await kube.create(DEPLOYMENTS, deployment_body("once", 1), namespace=NS)
        await eventually(lambda: rollout_complete(kube, "once"), "rollout")
        await eventually(lambda: rs_marked(kube, "once"), "evacuation-ready mark")
    rs = (await replica_sets(kube, "once"))[-1]
    count = {"metadata": {"annotations": {"maintenance.aiokcm.io/replicas-to-evacuate": "1"}}}
    await kube.patch(REPLICASETS, rs["metadata"]["name"], count, namespace=NS)
    stale = {"status": {"availableReplicas": 0, "readyReplicas": 0, "unavailableReplicas": 1}}
    await kube.patch(DEPLOYMENTS, "once", stale, namespace=NS, subresource="status")
    factory = make_factory(kube)
    ctx = ControllerContext(
        client=kube, informers=factory, events=RecordingEvents(), gates=StaticGates(GATES)
    )
    controller = build(DeploymentController, ctx)
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        assert await factory.wait_for_cache_sync()
        start = anyio.current_time()
        await controller.sync(f"{NS}/once")
        tg.cancel_scope.cancel()
    writes = [w for w in cluster.requests.since(start) if w.resource == "deployments/status"]
    assert len(writes) == 1, writes
    d = await get_d(kube, "once")
    assert d["metadata"]["annotations"]["maintenance.aiokcm.io/replicas-to-evacuate"] == "1"
    assert d["status"]["availableReplicas"] == 1


async def test_withdrawing_the_request_mid_surge_scales_back(kube: KubeClient) -> None:
    sampler = AvailabilitySampler(kube, NS, "wd")
    async with running(kube) as (_h, kubelet):
        await kube.create(DEPLOYMENTS, deployment_body("wd", 3), namespace=NS)
        await eventually(lambda: rollout_complete(kube, "wd"), "rollout")
        await eventually(lambda: rs_marked(kube, "wd"), "evacuation-ready mark")
        node = (await live_pods(kube, "wd"))[0]["spec"]["nodeName"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler.run)
            await eventually(lambda: sampler.samples > 0, "first sample")
            kubelet.hold_readiness = True  # the surge pod will not become ready yet
            requested = await evacuate_node(kube, "wd", node)

            async def surged() -> bool:
                rss = await replica_sets(kube, "wd")
                return rss[-1]["spec"]["replicas"] == 4 and len(await live_pods(kube, "wd")) == 4

            await eventually(surged, "surge to 4")

            async def published() -> bool:
                ann = (await get_d(kube, "wd"))["metadata"].get("annotations", {})
                return bool(ann.get("maintenance.aiokcm.io/replicas-to-evacuate") == str(len(requested)))

            await eventually(published, "total published on the Deployment")
            for pod in requested:
                await request_evacuation(kube, pod, status="False")

            async def scaled_back() -> bool:
                rss = await replica_sets(kube, "wd")
                return rss[-1]["spec"]["replicas"] == 3 and len(await live_pods(kube, "wd")) == 3

            await eventually(scaled_back, "surge removed")
            kubelet.hold_readiness = False
            await eventually(lambda: rollout_complete(kube, "wd"), "settled")
            tg.cancel_scope.cancel()
        assert sampler.minimum is not None and sampler.minimum >= 3
        # The withdrawn pods stayed where they were.
        assert {p["metadata"]["name"] for p in await pods_on(kube, "wd", node)} == set(requested)


async def test_recreate_and_zero_surge_deployments_are_not_marked(kube: KubeClient) -> None:
    async with running(kube):
        await kube.create(DEPLOYMENTS, deployment_body("rc", 1, strategy={"type": "Recreate"}), namespace=NS)
        zero = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
        await kube.create(DEPLOYMENTS, deployment_body("zs", 1, strategy=zero), namespace=NS)
        surge = deployment_body("ok", 1)
        await kube.create(DEPLOYMENTS, surge, namespace=NS)
        for name in ("rc", "zs", "ok"):
            await eventually(lambda name=name: rollout_complete(kube, name), f"{name} rollout")  # type: ignore[misc]
        await eventually(lambda: rs_marked(kube, "ok"), "surging Deployment marked")
        assert not await rs_marked(kube, "rc")
        assert not await rs_marked(kube, "zs")
        # Turning surge off removes the mark.
        await kube.patch(DEPLOYMENTS, "ok", {"spec": {"strategy": zero}}, namespace=NS, patch_type="merge")

        async def unmarked() -> bool:
            return not await rs_marked(kube, "ok")

        await eventually(unmarked, "mark removed")


async def test_user_scale_down_during_evacuation_removes_requested_pods_first(kube: KubeClient) -> None:
    async with running(kube) as (_h, kubelet):
        await kube.create(DEPLOYMENTS, deployment_body("sc", 3), namespace=NS)
        await eventually(lambda: rollout_complete(kube, "sc"), "rollout")
        await eventually(lambda: rs_marked(kube, "sc"), "evacuation-ready mark")
        node = (await live_pods(kube, "sc"))[0]["spec"]["nodeName"]
        kubelet.hold_readiness = True
        requested = await evacuate_node(kube, "sc", node)
        await eventually(lambda: _pod_total(kube, "sc", 4), "surge to 4")
        await kube.patch(DEPLOYMENTS, "sc", {"spec": {"replicas": 1}}, namespace=NS)

        async def down_to_one() -> bool:
            pods = await live_pods(kube, "sc")
            return len(pods) == 1 and not any(p["metadata"]["name"] in requested for p in pods)

        await eventually(down_to_one, "scaled down, requested pods gone first")
        kubelet.hold_readiness = False
        await eventually(lambda: rollout_complete(kube, "sc"), "settled at 1")
        assert not await pods_on(kube, "sc", node)


async def _pod_total(kube: KubeClient, name: str, n: int) -> bool:
    return len(await live_pods(kube, name)) == n


async def test_rollout_started_during_evacuation_absorbs_the_surge(kube: KubeClient) -> None:
    sampler = AvailabilitySampler(kube, NS, "ro")
    async with running(kube) as (_h, kubelet):
        await kube.create(DEPLOYMENTS, deployment_body("ro", 3), namespace=NS)
        await eventually(lambda: rollout_complete(kube, "ro"), "rollout")
        await eventually(lambda: rs_marked(kube, "ro"), "evacuation-ready mark")
        node = (await live_pods(kube, "ro"))[0]["spec"]["nodeName"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler.run)
            await eventually(lambda: sampler.samples > 0, "first sample")
            kubelet.hold_readiness = True
            await evacuate_node(kube, "ro", node)
            await eventually(lambda: _pod_total(kube, "ro", 4), "surge to 4")
            await set_image(kube, "ro", "nginx:2")
            kubelet.hold_readiness = False

            async def done() -> bool:
                pods = await live_pods(kube, "ro")
                return (
                    await rollout_complete(kube, "ro")
                    and len(pods) == 3
                    and {p["spec"]["containers"][0]["image"] for p in pods} == {"nginx:2"}
                    and not any(p["spec"].get("nodeName") == node for p in pods)
                )

            await eventually(done, "rollout finished off the cordoned node", timeout=40)
            tg.cancel_scope.cancel()
        assert sampler.minimum is not None and sampler.minimum >= 3


async def test_paused_deployment_still_evacuates(kube: KubeClient) -> None:
    sampler = AvailabilitySampler(kube, NS, "pe")
    async with running(kube):
        await kube.create(DEPLOYMENTS, deployment_body("pe", 1), namespace=NS)
        await eventually(lambda: rollout_complete(kube, "pe"), "rollout")
        await kube.patch(DEPLOYMENTS, "pe", {"spec": {"paused": True}}, namespace=NS)
        await eventually(lambda: rs_marked(kube, "pe"), "evacuation-ready mark")
        node = (await live_pods(kube, "pe"))[0]["spec"]["nodeName"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler.run)
            await eventually(lambda: sampler.samples > 0, "first sample")
            await evacuate_node(kube, "pe", node)

            async def moved() -> bool:
                pods = await live_pods(kube, "pe")
                return (
                    len(pods) == 1 and pods[0]["spec"].get("nodeName") != node and bool(is_pod_ready(pods[0]))
                )

            await eventually(moved, "pod moved while paused", timeout=40)
            tg.cancel_scope.cancel()
        assert sampler.minimum is not None and sampler.minimum >= 1


async def kubectl(cluster: Any, *args: str) -> str:
    result = await anyio.run_process(
        ["kubectl", "--kubeconfig", cluster.kubeconfig_path, "-n", NS, *args], check=False
    )
    out = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, out
    return out


@pytest.mark.kubectl
async def test_kubectl_rollout_undo_and_status(kube: KubeClient, cluster: Any) -> None:
    async with running(kube):
        await kube.create(DEPLOYMENTS, deployment_body("kc", 2), namespace=NS)
        out = await kubectl(cluster, "rollout", "status", "deployment/kc", "--timeout=30s")
        assert "successfully rolled out" in out
        await set_image(kube, "kc", "nginx:2")
        await kubectl(cluster, "rollout", "status", "deployment/kc", "--timeout=30s")
        history = await kubectl(cluster, "rollout", "history", "deployment/kc")
        assert "1" in history and "2" in history
        await kubectl(cluster, "rollout", "undo", "deployment/kc")
        out = await kubectl(cluster, "rollout", "status", "deployment/kc", "--timeout=30s")
        assert "successfully rolled out" in out
        d = await get_d(kube, "kc")
        assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
        assert d["metadata"]["annotations"][REVISION_ANNOTATION] == "3"
        assert {p["spec"]["containers"][0]["image"] for p in await live_pods(kube, "kc")} == {"nginx:1"}


async def test_hash_collision_bumps_collision_count_and_picks_another_name(kube: KubeClient) -> None:
    created = await kube.create(DEPLOYMENTS, deployment_body("col", 1), namespace=NS)
    squatted = f"col-{compute_hash(created['spec']['template'], None)}"
    squatter = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": squatted, "namespace": NS, "labels": {"app": "other"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "other"}},
            "template": {
                "metadata": {"labels": {"app": "other"}},
                "spec": {"containers": [{"name": "x", "image": "x"}]},
            },
        },
    }
    await kube.create(REPLICASETS, squatter, namespace=NS)
    async with running(kube):
        await eventually(lambda: rollout_complete(kube, "col"), "rollout despite the collision")
        d = await get_d(kube, "col")
        assert d["status"].get("collisionCount") == 1
        (rs,) = await replica_sets(kube, "col")
        assert rs["metadata"]["name"] == f"col-{compute_hash(d['spec']['template'], 1)}"
        assert rs["metadata"]["name"] != squatted
        untouched = await kube.get(REPLICASETS, squatted, namespace=NS)
        assert get_controller_of(untouched) is None
