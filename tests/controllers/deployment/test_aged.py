"""Deployments older than their deadlines: nearly every Deployment in a real cluster.

A Deployment whose Progressing condition is older than `progressDeadlineSeconds`, when scaled,
asked for a progress check "now" on every sync. KCM sends that through the rate limiter
(`enqueueRateLimited`); an immediate requeue made a loop that never yielded, and the whole
manager froze. With the "no deadline" value (2147483647) the Deployment must simply converge and
then write nothing.
"""

from __future__ import annotations

from typing import Any, cast

import anyio

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, Resource
from controllers import metrics
from controllers.deployment import DeploymentController
from controllers.replicaset import ReplicaSetController
from tests.controllers.deployment.test_integration import NS, deployment_body
from tests.controllers.harness import running_controllers
from tests.support.waiting import eventually

NO_DEADLINE = 2147483647


def _reconciles() -> float:
    return float(
        sum(
            metrics.RECONCILE_TOTAL.labels("deployment", result)._value.get()
            for result in ("success", "error", "requeue_after")
        )
    )


async def _condition(kube: KubeClient, name: str, reason: str) -> bool:
    d = await kube.get(DEPLOYMENTS, name, namespace=NS)
    return any(
        c.get("type") == "Progressing" and c.get("reason") == reason
        for c in (d.get("status") or {}).get("conditions") or []
    )


async def test_a_scaled_deployment_past_its_deadline_is_rechecked_rate_limited(kube: KubeClient) -> None:
    """No kubelets here: the scaled-up pod never becomes ready, so the check stays due."""
    async with running_controllers(kube, DeploymentController, ReplicaSetController):
        await kube.create(
            DEPLOYMENTS, deployment_body("aged", 0, extra_spec={"progressDeadlineSeconds": 1}), namespace=NS
        )
        await eventually(lambda: _condition(kube, "aged", "NewReplicaSetAvailable"), "complete at 0 replicas")
        await anyio.sleep(1.5)  # the condition is now older than the deadline
        await kube.patch(DEPLOYMENTS, "aged", {"spec": {"replicas": 1}}, namespace=NS)
        await anyio.sleep(0.5)
        before = _reconciles()
        await anyio.sleep(2.0)  # the test's own timer fires: the loop was never starved
        syncs = _reconciles() - before
    # client-go's default limiter: a burst of 100, then 10 per second, across every key
    assert syncs <= 130, f"{syncs} syncs of one Deployment in 2 s: a busy requeue"


class CountingWrites:
    """Counts the writes the controllers send for Deployments."""

    def __init__(self, inner: KubeClient) -> None:
        self._inner = inner
        self.writes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def patch(self, res: Resource, name: str, *args: Any, **kwargs: Any) -> Any:
        if res == DEPLOYMENTS:
            self.writes.append(f"{name}/{kwargs.get('subresource') or ''}")
        return await self._inner.patch(res, name, *args, **kwargs)


async def test_no_deadline_converges_then_writes_nothing(kube: KubeClient) -> None:
    counting = CountingWrites(kube)
    async with running_controllers(
        cast(KubeClient, counting),  # a proxy: what it does not count, it forwards to `kube`
        DeploymentController,
        ReplicaSetController,
        informer_client=kube,
    ):
        body = deployment_body("forever", 0, extra_spec={"progressDeadlineSeconds": NO_DEADLINE})
        await kube.create(DEPLOYMENTS, body, namespace=NS)

        async def observed() -> bool:
            d = await kube.get(DEPLOYMENTS, "forever", namespace=NS)
            return bool((d.get("status") or {}).get("observedGeneration") == d["metadata"]["generation"])

        await eventually(observed, "status observed")
        await anyio.sleep(1.0)
        settled = len(counting.writes)
        await anyio.sleep(2.0)
        assert counting.writes[settled:] == []
        d = await kube.get(DEPLOYMENTS, "forever", namespace=NS)
        # "no deadline": no progress to estimate, so no Progressing condition at all (as KCM)
        assert all(c.get("type") != "Progressing" for c in (d.get("status") or {}).get("conditions") or [])
