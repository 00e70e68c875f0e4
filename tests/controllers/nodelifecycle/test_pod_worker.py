"""The pod queue is served by the worker engine: a failure other than an API refusal is retried.

The old hand-written pod worker caught only `ApiError`: a dropped connection (or any bug) while
marking a pod not ready escaped the worker and tore down the controller's whole task group.
"""

from __future__ import annotations

from typing import Any, cast

import aiohttp
import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import PODS
from controllers.context import ControllerContext
from controllers.nodelifecycle import NodeLifecycleController
from controllers.nodelifecycle.health import NodeHealth
from informers import SharedInformerFactory
from tests.controllers.harness import build

pytestmark = pytest.mark.looptime


class FlakyPodStatus:
    """Pod status patches that fail with the given exceptions first, then succeed."""

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.attempts: list[str] = []
        self.patched: list[str] = []

    async def patch(self, res: Any, name: str, body: dict[str, Any], *, namespace: str = "", **_: Any) -> Any:
        assert res == PODS
        self.attempts.append(f"{namespace}/{name}")
        if self.failures:
            raise self.failures.pop(0)
        self.patched.append(f"{namespace}/{name}")
        return {}


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"nodeName": "n1"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.mark.parametrize(
    "failure", [aiohttp.ClientConnectionError("Connection reset by peer"), RuntimeError("a bug")]
)
async def test_the_pod_worker_survives_a_failure_that_is_not_an_api_error(failure: Exception) -> None:
    fake = FlakyPodStatus([failure])
    client = cast(KubeClient, fake)
    controller = build(
        NodeLifecycleController, ControllerContext(client=client, informers=SharedInformerFactory(client))
    )
    controller.state.health["n1"] = NodeHealth(
        ready={"type": "Ready", "status": "Unknown"}, probe=0.0, ready_transition=0.0
    )
    for name in ("a", "b"):
        controller.pod_informer.store.update(f"default/{name}", _pod(name))
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            controller.start_workers(tg, 1)
            controller.pod_queue.add("default/a")
            await anyio.sleep(1)
            controller.pod_queue.add("default/b")  # the worker is still there to take it
            await anyio.sleep(1)
            controller.stop()
    assert fake.attempts == ["default/a", "default/a", "default/b"]  # failed, retried with backoff
    assert fake.patched == ["default/a", "default/b"]
