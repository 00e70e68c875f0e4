"""The webhook's controller on a living local cluster: `review` answers from the caches, the
workers write (and withdraw) the `EvictionSurge` request, a surge out of time is reported once.

`review` is called as the webhook server calls it, with an AdmissionReview body; the ReplicaSet
and Deployment controllers answer the request and surge as they answer a NodeMaintenance's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NODES, PODS
from controllers import features
from controllers.common.evacuation import EVACUATION_REQUEST
from controllers.context import ControllerContext
from controllers.deployment import DeploymentController
from controllers.evictionsurge import EvictionSurgeController
from controllers.evictionsurge.config import EvictionSurgeConfig
from controllers.evictionsurge.decision import REASON_EVICTION_SURGE
from controllers.evictionsurge.sync import EVENT_REQUESTED, EVENT_TIMED_OUT, EVENT_WITHDRAWN
from controllers.replicaset import ReplicaSetController
from localcluster.demo import NS, App, deployment, pod_available
from tests.controllers.harness import Harness, build, running_controllers
from tests.support.waiting import eventually

GATES = {
    features.DECLARATIVE_NODE_MAINTENANCE: True,
    features.NODE_MAINTENANCE_DEPLOYMENT: True,
    features.EVICTION_SURGE: True,
}


def review(name: str, *, dry_run: bool = False, uid: str = "u-1") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "operation": "CREATE",
            "namespace": NS,
            "name": name,
            "subResource": "eviction",
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "dryRun": dry_run,
            "object": {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": NS},
            },
        },
    }


def surge_controller(harness: Harness) -> EvictionSurgeController:
    return next(c for c in harness.controllers if isinstance(c, EvictionSurgeController))


async def app_pods(kube: KubeClient) -> list[dict[str, Any]]:
    return [
        p
        for p in await kube.list_all(PODS, namespace=NS)
        if (p["metadata"].get("labels") or {}).get("app") == "web"
    ]


def our_request(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == EVACUATION_REQUEST and cond.get("reason") == REASON_EVICTION_SURGE:
            return cond  # type: ignore[no-any-return]
    return None


async def one_ready_pod(kube: KubeClient, controller: EvictionSurgeController) -> dict[str, Any]:
    await kube.create(DEPLOYMENTS, deployment(App("web", 1)), namespace=NS)

    async def ready() -> dict[str, Any] | None:
        pods = await app_pods(kube)
        if len(pods) != 1 or not pod_available(pods[0]):
            return None
        cached = controller.pod_lister.get(pods[0]["metadata"]["name"], NS)
        rs = controller.facts(NS, pods[0]["metadata"]["name"], dry_run=False).replica_set
        # The Deployment controller has marked its ReplicaSet, and our caches have seen it all.
        marked = rs is not None and "deployment.kubernetes.io/evacuation-ready" in (
            rs["metadata"].get("annotations") or {}
        )
        return pods[0] if cached is not None and pod_available(cached) and marked else None

    found: dict[str, Any] = await eventually(
        ready, "one available pod of web, its ReplicaSet marked", timeout=30
    )
    return found


async def test_held_back_until_the_replacement_is_available_then_let_through(kube: KubeClient) -> None:
    async with running_controllers(
        kube, ReplicaSetController, DeploymentController, EvictionSurgeController, gates=GATES
    ) as h:
        surge = surge_controller(h)
        pod = await one_ready_pod(kube, surge)
        name = pod["metadata"]["name"]
        dry = surge.review(review(name, dry_run=True))
        assert dry["response"] == {"uid": "u-1", "allowed": True}
        answer = surge.review(review(name, uid="u-2"))["response"]
        assert answer["uid"] == "u-2" and answer["allowed"] is False
        assert answer["status"]["code"] == 429 and answer["status"]["reason"] == "TooManyRequests"
        assert f"a replacement for pod {NS}/{name} is being started" in answer["status"]["message"]

        async def requested() -> bool:
            return our_request(await kube.get(PODS, name, namespace=NS)) is not None

        await eventually(requested, "the EvictionSurge request written by a worker", timeout=10)
        assert EVENT_REQUESTED in h.events.reasons(name)

        async def let_through_or_gone() -> bool:
            # A drainer retrying: allowed once a replacement serves, or the old pod is gone already.
            if surge.pod_lister.get(name, NS) is None:
                return True
            return bool(surge.review(review(name))["response"]["allowed"])

        await eventually(
            let_through_or_gone, "the retry let through once the replacement is available", timeout=30
        )
        others = [p for p in await app_pods(kube) if p["metadata"]["name"] != name]
        assert any(pod_available(p) for p in others)


async def test_request_withdrawn_when_evictions_stop_and_timeout_reported_once(kube: KubeClient) -> None:
    def make_surge(ctx: ControllerContext) -> EvictionSurgeController:
        return build(
            EvictionSurgeController, ctx, config=EvictionSurgeConfig(retry_window=1.5, surge_timeout=0.5)
        )

    async with running_controllers(
        kube, ReplicaSetController, DeploymentController, make_surge, gates=GATES
    ) as h:
        surge = surge_controller(h)
        pod = await one_ready_pod(kube, surge)
        name = pod["metadata"]["name"]
        # No room anywhere: the replacement stays Pending, the surge cannot finish.
        for node in await kube.list_all(NODES):
            await kube.patch(NODES, node["metadata"]["name"], {"spec": {"unschedulable": True}})
        assert surge.review(review(name))["response"]["allowed"] is False

        async def requested_in_cache() -> bool:
            cached = surge.pod_lister.get(name, NS)
            return cached is not None and our_request(cached) is not None

        await eventually(requested_in_cache, "the request written and seen", timeout=10)

        async def let_through() -> bool:
            return bool(surge.review(review(name))["response"]["allowed"])

        # Past the bound the eviction is no longer held back: the PDB decides, and an event says so.
        await eventually(let_through, "the eviction let through once the surge ran out of time", timeout=10)
        answer = surge.review(review(name))["response"]
        assert "PodDisruptionBudget decides" in answer["warnings"][0]
        await eventually(lambda: EVENT_TIMED_OUT in h.events.reasons(name), "the timed-out event", timeout=10)

        # The drainer goes away: the request is withdrawn after the window, and told once.
        async def withdrawn() -> bool:
            return our_request(await kube.get(PODS, name, namespace=NS)) is None

        await eventually(withdrawn, "the request withdrawn once no eviction is retried", timeout=10)
        assert h.events.reasons(name).count(EVENT_WITHDRAWN) == 1
        assert h.events.reasons(name).count(EVENT_TIMED_OUT) == 1


async def test_pods_nobody_answers_for_are_never_held(kube: KubeClient) -> None:
    bare = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare", "namespace": NS},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }
    async with running_controllers(
        kube, ReplicaSetController, DeploymentController, EvictionSurgeController, gates=GATES
    ) as h:
        surge = surge_controller(h)
        await kube.create(PODS, bare, namespace=NS)

        async def cached_ready() -> bool:
            cached = surge.pod_lister.get("bare", NS)
            return cached is not None and pod_available(cached)

        await eventually(cached_ready, "the bare pod ready in the cache", timeout=30)
        assert surge.review(review("bare"))["response"]["allowed"] is True
        assert surge.review(review("no-such-pod"))["response"]["allowed"] is True
        assert our_request(await kube.get(PODS, "bare", namespace=NS)) is None


async def test_a_request_found_at_start_is_withdrawn_when_no_eviction_comes(kube: KubeClient) -> None:
    """After a restart nothing remembers the drainer: a request left behind gets a fresh window."""
    from datetime import UTC, datetime

    from controllers.evictionsurge.requests import request_evacuation

    async with running_controllers(kube, ReplicaSetController, DeploymentController, gates=GATES):
        await kube.create(DEPLOYMENTS, deployment(App("web", 1)), namespace=NS)

        async def ready() -> dict[str, Any] | None:
            pods = await app_pods(kube)
            return pods[0] if len(pods) == 1 and pod_available(pods[0]) else None

        pod = await eventually(ready, "web's pod available", timeout=30)
        await request_evacuation(kube, pod, message="left by a manager that stopped", now=datetime.now(UTC))

    def make_surge(ctx: ControllerContext) -> EvictionSurgeController:
        return build(EvictionSurgeController, ctx, config=EvictionSurgeConfig(retry_window=1.0))

    async with running_controllers(kube, make_surge, gates=GATES) as h:
        name = pod["metadata"]["name"]

        async def withdrawn() -> bool:
            return our_request(await kube.get(PODS, name, namespace=NS)) is None

        await eventually(withdrawn, "the leftover request withdrawn after a window", timeout=10)
        assert h.events.reasons(name) == [EVENT_WITHDRAWN]
