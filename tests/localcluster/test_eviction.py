"""The pods/eviction subresource against PodDisruptionBudgets, as the real API server answers."""

from __future__ import annotations

from typing import Any

import pytest

from apiclient import ApiError, KubeClient
from apiclient import resources as R
from tests.localcluster.living import (
    condition,
    is_ready,
    living_cluster,
    pods,
    replicaset_with_pods,
)
from tests.support.waiting import eventually, holds


async def _pdb(
    kube: KubeClient,
    name: str,
    selector: dict[str, str],
    *,
    allowed: int,
    healthy: int = 3,
    desired: int = 3,
    lag: bool = False,
    policy: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minAvailable": desired, "selector": {"matchLabels": selector}}
    if policy:
        spec["unhealthyPodEvictionPolicy"] = policy
    pdb = await kube.create(
        R.PODDISRUPTIONBUDGETS, {"metadata": {"name": name}, "spec": spec}, namespace="default"
    )
    generation = pdb["metadata"].get("generation", 1)
    status = {
        "observedGeneration": generation - 1 if lag else generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": 3,
    }
    return await kube.patch(
        R.PODDISRUPTIONBUDGETS, name, {"status": status}, namespace="default", subresource="status"
    )


async def _ready_set(kube: KubeClient, name: str = "web", replicas: int = 3) -> list[str]:
    _, names = await replicaset_with_pods(kube, name, replicas)
    await eventually(
        lambda: holds(
            pods(kube, selector=f"app={name}"),
            lambda ps: len(ps) == replicas and all(is_ready(p) for p in ps),
        ),
        "len(ps) == replicas and all(is_ready(p) for p in ps)",
    )
    return names


async def test_eviction_without_a_budget_marks_and_deletes_the_pod() -> None:
    async with living_cluster(nodes=3) as (_, kube):
        names = await _ready_set(kube)
        # The kubelet ends an evicted pod at once on the fast clock: a finalizer keeps it to be read.
        held = {"metadata": {"finalizers": ["test.aiokcm.io/read-first"]}}
        await kube.patch(R.PODS, names[0], held, namespace="default")
        await kube.evict("default", names[0])
        pod = await kube.get(R.PODS, names[0], namespace="default")
        cond = condition(pod, "DisruptionTarget")
        assert cond is not None and cond["reason"] == "EvictionByEvictionAPI" and cond["status"] == "True"
        assert pod["metadata"]["deletionTimestamp"]
        await kube.patch(R.PODS, names[0], {"metadata": {"finalizers": None}}, namespace="default")
        await eventually(
            lambda: holds(pods(kube, selector="app=web"), lambda ps: len(ps) == 2), "len(ps) == 2"
        )


async def test_a_budget_with_no_disruptions_allowed_refuses_with_429() -> None:
    async with living_cluster(nodes=3) as (_, kube):
        names = await _ready_set(kube)
        await _pdb(kube, "web", {"app": "web"}, allowed=0)
        with pytest.raises(ApiError) as caught:
            await kube.evict("default", names[0])
        err = caught.value
        assert err.too_many_requests and err.reason == "TooManyRequests"
        assert err.message == "Cannot evict pod as it would violate the pod's disruption budget."
        assert err.details["causes"] == [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget web needs 3 healthy pods and has 3 currently",
            }
        ]
        pod = await kube.get(R.PODS, names[0], namespace="default")
        assert "deletionTimestamp" not in pod["metadata"] and condition(pod, "DisruptionTarget") is None


async def test_an_allowed_eviction_spends_the_budget_and_records_the_pod() -> None:
    async with living_cluster(nodes=3) as (_, kube):
        names = await _ready_set(kube)
        await _pdb(kube, "web", {"app": "web"}, allowed=1)
        await kube.evict("default", names[0])
        pdb = await kube.get(R.PODDISRUPTIONBUDGETS, "web", namespace="default")
        assert pdb["status"]["disruptionsAllowed"] == 0
        assert list(pdb["status"]["disruptedPods"]) == [names[0]]
        with pytest.raises(ApiError) as caught:
            await kube.evict("default", names[1])
        assert caught.value.too_many_requests


async def test_a_budget_not_yet_observed_and_two_budgets() -> None:
    async with living_cluster(nodes=3) as (_, kube):
        names = await _ready_set(kube)
        await _pdb(kube, "lagging", {"app": "web"}, allowed=5, lag=True)
        with pytest.raises(ApiError) as caught:
            await kube.evict("default", names[0])
        assert caught.value.too_many_requests and caught.value.retry_after_seconds == 10
        assert "is still being processed by the server" in caught.value.details["causes"][0]["message"]
        await _pdb(kube, "second", {"app": "web"}, allowed=5)
        with pytest.raises(ApiError) as caught:
            await kube.evict("default", names[0])
        assert caught.value.status == 500
        assert "more than one PodDisruptionBudget" in caught.value.message


async def test_pending_and_unhealthy_pods() -> None:
    async with living_cluster(nodes=3) as (cluster, kube):
        names = await _ready_set(kube)
        await _pdb(kube, "web", {"app": "web"}, allowed=0, healthy=3, desired=3)
        # a pod that failed readiness may go while the budget is healthy (IfHealthyBudget)
        cluster.kubelets[
            (await kube.get(R.PODS, names[0], namespace="default"))["spec"]["nodeName"]
        ].fail_readiness("default", names[0])
        await kube.evict("default", names[0])
        # ... but not once the budget is not healthy any more
        await kube.patch(
            R.PODDISRUPTIONBUDGETS,
            "web",
            {"status": {"currentHealthy": 2}},
            namespace="default",
            subresource="status",
        )
        pod1 = await kube.get(R.PODS, names[1], namespace="default")
        cluster.kubelets[pod1["spec"]["nodeName"]].fail_readiness("default", names[1])
        with pytest.raises(ApiError):
            await kube.evict("default", names[1])
        # AlwaysAllow lets unhealthy pods go regardless
        await kube.patch(
            R.PODDISRUPTIONBUDGETS,
            "web",
            {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}},
            namespace="default",
        )
        pdb = await kube.get(R.PODDISRUPTIONBUDGETS, "web", namespace="default")
        await kube.patch(
            R.PODDISRUPTIONBUDGETS,
            "web",
            {"status": {"observedGeneration": pdb["metadata"]["generation"]}},
            namespace="default",
            subresource="status",
        )
        await kube.evict("default", names[1])
        # a Pending pod skips the budget
        await kube.create(
            R.PODS,
            {
                "metadata": {"name": "pending", "labels": {"app": "web"}},
                "spec": {"nodeSelector": {"no": "where"}, "containers": [{"name": "c", "image": "x"}]},
            },
            namespace="default",
        )
        await kube.evict("default", "pending")
        with pytest.raises(ApiError) as caught:
            await kube.get(R.PODS, "pending", namespace="default")
        assert caught.value.not_found


async def test_delete_options_dry_run_and_preconditions() -> None:
    async with living_cluster(nodes=3) as (_, kube):
        names = await _ready_set(kube)
        await _pdb(kube, "web", {"app": "web"}, allowed=2)
        await kube.evict("default", names[0], delete_options={"dryRun": ["All"]})
        pdb = await kube.get(R.PODDISRUPTIONBUDGETS, "web", namespace="default")
        assert pdb["status"]["disruptionsAllowed"] == 2 and not pdb["status"].get("disruptedPods")
        assert "deletionTimestamp" not in (await kube.get(R.PODS, names[0], namespace="default"))["metadata"]
        with pytest.raises(ApiError) as caught:
            await kube.evict("default", names[0], delete_options={"preconditions": {"uid": "not-the-uid"}})
        assert (
            caught.value.conflict
            and "the UID in the precondition (not-the-uid) does not match" in caught.value.message
        )
        await kube.evict("default", names[0], delete_options={"gracePeriodSeconds": 7})
        pod = await kube.get(R.PODS, names[0], namespace="default")
        assert pod["metadata"]["deletionGracePeriodSeconds"] == 7
