"""A dropped connection mid-batch must not wedge a ReplicaSet.

KCM lowers its expectations on every failed create or delete, whatever the error: a delete whose
connection dropped (an API server restart) will never be observed by the informer, and waiting
for it would make the ReplicaSet ignore all scaling until its expectations expire (5 minutes).
"""

from __future__ import annotations

from typing import Any

import aiohttp

from apiclient import KubeClient
from apiclient.resources import PODS, REPLICASETS, Resource
from controllers.replicaset import ReplicaSetController
from tests.controllers.harness import running_controllers
from tests.controllers.replicaset.test_integration import NS, active_pods, rs_body, scale
from tests.support.waiting import eventually


class DroppingDeletes:
    """A client whose first `drops` pod deletes fail with a dropped connection, never sent."""

    def __init__(self, inner: KubeClient, drops: int) -> None:
        self._inner = inner
        self.drops = drops

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def delete(self, res: Resource, name: str, **kwargs: Any) -> Any:
        if res == PODS and self.drops > 0:
            self.drops -= 1
            raise aiohttp.ServerDisconnectedError()
        return await self._inner.delete(res, name, **kwargs)


async def test_scale_down_converges_after_deletes_fail_with_a_dropped_connection(kube: KubeClient) -> None:
    flaky = DroppingDeletes(kube, drops=3)
    async with running_controllers(flaky, ReplicaSetController, informer_client=kube):  # type: ignore[arg-type]
        await kube.create(REPLICASETS, rs_body("flaky", 6), namespace=NS)
        await eventually(lambda: _count(kube, 6), "six pods")
        await scale(kube, "flaky", 2)
        # Within the wait (20 s), far inside the 5-minute expectations TTL: the failed deletes
        # must not be waited for.
        await eventually(lambda: _count(kube, 2), "two pods left after the dropped deletes")
        assert flaky.drops == 0


async def _count(kube: KubeClient, n: int) -> bool:
    return len(await active_pods(kube, "flaky")) == n
