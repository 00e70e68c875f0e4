"""The ReplicaSet controller against the local API server, through real informers over HTTP.

No scheduler or kubelets run here: pods stay Pending unless a test binds them (`spec.nodeName` at
create) and writes their status through the status subresource, as a kubelet would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import PODS, REPLICASETS
from controllers import features
from controllers.common.controller_ref import get_controller_of
from controllers.common.pods import get_pod_condition
from controllers.context import ControllerContext, StaticGates
from controllers.replicaset import ReplicaSetController
from kubeutil.timestamps import format_time, utcnow
from tests.backends import cluster_on_backend
from tests.controllers.harness import HeldWatches, build, make_factory, running_controllers
from tests.support.objects import replicaset
from tests.support.waiting import eventually

NS = "default"
GATES = {features.DECLARATIVE_NODE_MAINTENANCE: True}


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """Nodes, but no kubelet to run a pod, nor (on the local backend) a scheduler to bind one: each
    test writes its pods' placement and status itself. The real plane's scheduler still binds an
    unassigned pod; bound, it stays Pending, which ranks as an unassigned one does against the
    Running pods these tests compare it with."""
    async with cluster_on_backend(request, nodes=3, scheduler=False, kubelets=False) as started:
        yield started


def rs_body(name: str, replicas: int) -> dict[str, Any]:
    return replicaset(
        name, replicas, namespace=NS, container="app", image="nginx", template_annotations={"team": "core"}
    )


async def active_pods(kube: KubeClient, app: str) -> list[dict[str, Any]]:
    pods = await kube.list_all(PODS, namespace=NS, label_selector=f"app={app}")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def scale(kube: KubeClient, name: str, replicas: int) -> None:
    await kube.patch(REPLICASETS, name, {"spec": {"replicas": replicas}}, namespace=NS)


async def make_pod(
    kube: KubeClient,
    name: str,
    app: str,
    *,
    node: str | None = None,
    ready: bool = False,
    cost: int | None = None,
) -> dict[str, Any]:
    """An orphan pod as if a kubelet ran it: bound to `node`, Running, optionally Ready."""
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": {"app": app}}
    if cost is not None:
        meta["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": str(cost)}
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx"}]}
    if node:
        spec["nodeName"] = node
    pod = await kube.create(
        PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}, namespace=NS
    )
    if node:
        status = {
            "phase": "Running",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": format_time(utcnow()),
                }
            ],
        }
        pod = await kube.patch(PODS, name, {"status": status}, namespace=NS, subresource="status")
    return pod


async def set_pod_condition(kube: KubeClient, name: str, cond: dict[str, Any]) -> None:
    await kube.patch(
        PODS,
        name,
        {"status": {"conditions": [cond]}},
        namespace=NS,
        subresource="status",
        patch_type="strategic",
    )


def evacuation_request(status: str = "True") -> dict[str, Any]:
    return {
        "type": "EvacuationRequest",
        "status": status,
        "reason": "NodeMaintenance",
        "message": "kernel upgrade",
        "lastTransitionTime": format_time(utcnow()),
    }


async def test_scale_up_then_down_with_status_and_events(kube: KubeClient) -> None:
    async with running_controllers(kube, ReplicaSetController) as h:
        rs = await kube.create(REPLICASETS, rs_body("web", 3), namespace=NS)
        pods = await eventually(lambda: _count(kube, "web", 3), "three pods")
        for pod in pods:
            assert get_controller_of(pod)["uid"] == rs["metadata"]["uid"]  # type: ignore[index]
            assert pod["metadata"]["generateName"] == "web-"
            assert pod["metadata"]["annotations"]["team"] == "core"

        async def status_is(replicas: int) -> bool:
            cur = await kube.get(REPLICASETS, "web", namespace=NS)
            st = cur.get("status") or {}
            return bool(
                st.get("replicas", 0) == replicas
                and st.get("observedGeneration") == cur["metadata"]["generation"]
            )

        await eventually(lambda: status_is(3), "status.replicas == 3")
        await scale(kube, "web", 1)
        await eventually(lambda: _count(kube, "web", 1), "one pod left")
        await eventually(lambda: status_is(1), "status.replicas == 1")
        assert h.events.reasons("web").count("SuccessfulCreate") == 3
        assert h.events.reasons("web").count("SuccessfulDelete") == 2


async def _count(kube: KubeClient, app: str, n: int) -> list[dict[str, Any]] | None:
    pods = await active_pods(kube, app)
    return pods if len(pods) == n else None


async def test_lagging_pod_watch_creates_no_extra_pods(kube: KubeClient) -> None:
    held = HeldWatches(kube, [PODS])
    async with running_controllers(kube, ReplicaSetController, informer_client=held):
        await kube.create(REPLICASETS, rs_body("lag", 5), namespace=NS)
        await eventually(lambda: _count(kube, "lag", 5), "five pods created")
        # The informer has not seen a single pod; poke the ReplicaSet so it syncs again and again.
        for i in range(5):
            await kube.patch(REPLICASETS, "lag", {"metadata": {"labels": {"poke": str(i)}}}, namespace=NS)

        async def rs_seen(i: int) -> bool:
            cur = await kube.get(REPLICASETS, "lag", namespace=NS)
            return (cur["metadata"].get("labels") or {}).get("poke") == str(i)

        await eventually(lambda: rs_seen(4), "last poke stored")
        held.release()
        await eventually(lambda: _status_field(kube, "lag", "replicas", 5), "status catches up")
        assert len(await active_pods(kube, "lag")) == 5


async def _status_field(kube: KubeClient, name: str, field: str, value: int) -> bool:
    cur = await kube.get(REPLICASETS, name, namespace=NS)
    return bool((cur.get("status") or {}).get(field, 0) == value)


async def test_adopts_matching_orphans_and_releases_pods_that_stop_matching(kube: KubeClient) -> None:
    await make_pod(kube, "orphan-a", "adopt")
    await make_pod(kube, "orphan-b", "adopt")
    async with running_controllers(kube, ReplicaSetController):
        rs = await kube.create(REPLICASETS, rs_body("adopt", 2), namespace=NS)
        uid = rs["metadata"]["uid"]

        async def adopted() -> bool:
            pods = await active_pods(kube, "adopt")
            return len(pods) == 2 and all((get_controller_of(p) or {}).get("uid") == uid for p in pods)

        await eventually(adopted, "both orphans adopted, none created")
        assert sorted(p["metadata"]["name"] for p in await active_pods(kube, "adopt")) == [
            "orphan-a",
            "orphan-b",
        ]

        await kube.patch(PODS, "orphan-a", {"metadata": {"labels": {"app": "elsewhere"}}}, namespace=NS)

        async def released() -> bool:
            pod = await kube.get(PODS, "orphan-a", namespace=NS)
            return get_controller_of(pod) is None

        await eventually(released, "orphan-a released")
        await eventually(lambda: _count(kube, "adopt", 2), "a replacement for the released pod")


async def test_scale_down_deletes_in_kubernetes_rank_order(kube: KubeClient) -> None:
    await make_pod(kube, "unassigned", "rank")
    await make_pod(kube, "not-ready", "rank", node="node-1")
    await make_pod(kube, "ready-cheap", "rank", node="node-1", ready=True, cost=-10)
    await make_pod(kube, "ready-dear", "rank", node="node-2", ready=True, cost=100)
    async with running_controllers(kube, ReplicaSetController):
        await kube.create(REPLICASETS, rs_body("rank", 4), namespace=NS)
        await eventually(lambda: _status_field(kube, "rank", "replicas", 4), "all four adopted")
        remaining = []
        for replicas in (3, 2, 1):
            await scale(kube, "rank", replicas)
            pods = await eventually(lambda r=replicas: _count(kube, "rank", r), f"{replicas} pods")  # type: ignore[misc]
            remaining.append(sorted(p["metadata"]["name"] for p in pods))
        assert remaining == [
            ["not-ready", "ready-cheap", "ready-dear"],
            ["ready-cheap", "ready-dear"],
            ["ready-dear"],
        ]


async def test_evacuation_flow(kube: KubeClient) -> None:
    await make_pod(kube, "evac-a", "evac", node="node-1", ready=True)
    await make_pod(kube, "evac-b", "evac", node="node-1", ready=True)
    await make_pod(kube, "evac-c", "evac")  # unassigned: what the ranking alone would delete first
    async with running_controllers(kube, ReplicaSetController, gates=GATES):
        await kube.create(REPLICASETS, rs_body("evac", 3), namespace=NS)
        await eventually(lambda: _status_field(kube, "evac", "replicas", 3), "three adopted")

        async def to_evacuate(n: int) -> bool:
            cur = await kube.get(REPLICASETS, "evac", namespace=NS)
            value = (cur["metadata"].get("annotations") or {}).get(
                "maintenance.aiokcm.io/replicas-to-evacuate"
            )
            return value == (str(n) if n else None)

        await set_pod_condition(kube, "evac-a", evacuation_request())
        await eventually(lambda: to_evacuate(1), "count 1 published")
        await set_pod_condition(kube, "evac-b", evacuation_request())
        await eventually(lambda: to_evacuate(2), "count 2 published")
        # The sync that published 1 had finished before the one that published 2 began: no answer yet.
        pod_a = await kube.get(PODS, "evac-a", namespace=NS)
        assert get_pod_condition(pod_a, "EvacuationInitiated") is None

        await kube.patch(
            REPLICASETS,
            "evac",
            {"metadata": {"annotations": {"deployment.kubernetes.io/evacuation-ready": "true"}}},
            namespace=NS,
        )

        async def answered(name: str) -> dict[str, Any] | None:
            pod = await kube.get(PODS, name, namespace=NS)
            cond = get_pod_condition(pod, "EvacuationInitiated")
            return pod if cond is not None and cond.get("status") == "True" else None

        pod_a = await eventually(lambda: answered("evac-a"), "evac-a answered")
        await eventually(lambda: answered("evac-b"), "evac-b answered")
        request = get_pod_condition(pod_a, "EvacuationRequest")
        assert request is not None and request["status"] == "True" and request["reason"] == "NodeMaintenance"
        assert get_pod_condition(pod_a, "Ready")["status"] == "True"  # type: ignore[index]

        await set_pod_condition(kube, "evac-b", evacuation_request("False"))
        await eventually(lambda: to_evacuate(1), "withdrawn request no longer counted")

        await scale(kube, "evac", 2)
        pods = await eventually(lambda: _count(kube, "evac", 2), "two pods")
        assert sorted(p["metadata"]["name"] for p in pods) == ["evac-b", "evac-c"]
        await eventually(lambda: to_evacuate(0), "count annotation removed")


async def test_without_the_gate_requests_are_ignored(kube: KubeClient) -> None:
    await make_pod(kube, "plain-a", "plain", node="node-1", ready=True)
    await make_pod(kube, "plain-b", "plain")
    async with running_controllers(kube, ReplicaSetController):
        await kube.create(REPLICASETS, rs_body("plain", 2), namespace=NS)
        await eventually(lambda: _status_field(kube, "plain", "replicas", 2), "two adopted")
        await set_pod_condition(kube, "plain-a", evacuation_request())
        await scale(kube, "plain", 1)
        pods = await eventually(lambda: _count(kube, "plain", 1), "one pod")
        assert [p["metadata"]["name"] for p in pods] == ["plain-a"]  # ranking alone: unassigned goes first
        cur = await kube.get(REPLICASETS, "plain", namespace=NS)
        assert "maintenance.aiokcm.io/replicas-to-evacuate" not in (cur["metadata"].get("annotations") or {})


pytestmark = [pytest.mark.usefixtures("cluster"), pytest.mark.backends("local", "real")]


async def test_with_evacuations_a_scale_is_one_status_write_that_counts_the_pods_it_created(
    kube: KubeClient,
) -> None:
    # With the DeclarativeNodeMaintenance gate, one sync creates the pods and writes a status that
    # already counts them: no second write is needed when the informer later delivers the new
    # pods. (Without it, as KCM, the status counts the pods the sync started from.)
    async with running_controllers(kube, ReplicaSetController, gates=GATES):
        await kube.create(REPLICASETS, rs_body("once", 1), namespace=NS)
        await eventually(lambda: _status_field(kube, "once", "replicas", 1), "one pod")
    await scale(kube, "once", 3)
    factory = make_factory(kube)
    controller = build(
        ReplicaSetController, ControllerContext(client=kube, informers=factory, gates=StaticGates(GATES))
    )
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        assert await factory.wait_for_cache_sync()
        await eventually(lambda: controller.rs_lister.get("once", NS)["spec"]["replicas"] == 3, "scale seen")  # type: ignore[index]
        await controller.sync(f"{NS}/once")
        tg.cancel_scope.cancel()
    rs = await kube.get(REPLICASETS, "once", namespace=NS)
    assert len(await active_pods(kube, "once")) == 3
    assert (
        rs["status"]["replicas"] == 3 and rs["status"]["observedGeneration"] == rs["metadata"]["generation"]
    )
