"""The stale-DisruptionTarget queue is served by the worker engine: a pod that cannot be fixed is dropped.

The old hand-written worker requeued every failure rate-limited forever (at most every 1000 s,
for as long as the manager ran); KCM's policy gives up after 15 retries until the next event.
"""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from apiclient import ApiError, KubeClient
from controllers.context import ControllerContext
from controllers.disruption import DisruptionController
from controllers.worker import MAX_RETRIES
from informers import SharedInformerFactory
from tests.controllers.harness import build

pytestmark = pytest.mark.looptime


class RefusingPodStatus:
    def __init__(self) -> None:
        self.attempts = 0

    async def patch(self, *_: Any, **__: Any) -> Any:
        self.attempts += 1
        raise ApiError(500, {"reason": "InternalError", "message": "etcd is sad"})


def _stale_pod() -> dict[str, Any]:
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "EvictionByEvictionAPI",
        "lastTransitionTime": "2020-01-01T00:00:00Z",
    }
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": "p"},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [condition]},
    }


async def test_the_stale_pod_worker_stops_after_the_last_retry() -> None:
    fake = RefusingPodStatus()
    client = cast(KubeClient, fake)
    controller = build(
        DisruptionController, ControllerContext(client=client, informers=SharedInformerFactory(client))
    )
    controller.pod_informer.store.update("default/p", _stale_pod())
    with anyio.fail_after(3600):
        async with anyio.create_task_group() as tg:
            controller.start_workers(tg, 1)
            controller.stale_queue.add("default/p")
            await anyio.sleep(1800)  # the 15th retry is due ~164 s after the first failure
            assert fake.attempts == 1 + MAX_RETRIES
            assert controller.stale_queue.waiting == 0 and len(controller.stale_queue) == 0
            assert controller.stale_queue.num_requeues("default/p") == 0
            controller.stale_queue.add("default/p")  # the pod's next update tries again
            await anyio.sleep(0.001)  # before its first retry (5 ms)
            assert fake.attempts == 2 + MAX_RETRIES
            controller.stop()
