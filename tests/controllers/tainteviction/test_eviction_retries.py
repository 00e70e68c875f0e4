"""A failed eviction is retried with the controller backoff, then released for the next update to judge.

Go's handler tries five times 10 ms apart and then gives up until some update judges the pod
again; the old shard worker here looked again once a second, forever. Now the timed queue's
worker engine retries the deletion with client-go's per-item backoff (5 ms doubling) and, after
15 retries, forgets the schedule so the pod's next update (or its node's) schedules it afresh.
"""

from __future__ import annotations

import itertools
from typing import Any, cast

import anyio
import pytest

from apiclient import ApiError, KubeClient
from controllers.context import ControllerContext
from controllers.tainteviction import TaintEvictionController
from controllers.tainteviction.evictionsync import DELETE_RETRIES
from controllers.tainteviction.schedulesync import POD_ITEM
from controllers.worker import MAX_RETRIES
from informers import SharedInformerFactory
from tests.controllers.harness import build

pytestmark = pytest.mark.looptime

TAINT = {"key": "example.com/evict", "effect": "NoExecute"}


class FlakyDeletes:
    """Pod deletes that fail `failures` times (a 500), then succeed; status patches always succeed."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: list[float] = []
        self.deleted: list[str] = []

    async def patch(self, *_: Any, **__: Any) -> Any:
        return {}

    async def delete(self, res: Any, name: str, *, namespace: str = "", **_: Any) -> Any:
        self.attempts.append(anyio.current_time())
        if len(self.attempts) <= self.failures:
            raise ApiError(500, {"reason": "InternalError", "message": "etcd is sad"})
        self.deleted.append(f"{namespace}/{name}")
        return {}


def _controller(fake: FlakyDeletes) -> TaintEvictionController:
    client = cast(KubeClient, fake)
    controller = build(
        TaintEvictionController, ControllerContext(client=client, informers=SharedInformerFactory(client))
    )
    controller.node_informer.store.update(
        "node-1", {"metadata": {"name": "node-1"}, "spec": {"taints": [TAINT]}}
    )
    controller.pod_informer.store.update(
        "ns/p", {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": {"nodeName": "node-1"}}
    )
    return controller


async def test_a_failed_eviction_is_retried_with_backoff() -> None:
    fake = FlakyDeletes(failures=2 * DELETE_RETRIES)  # two rounds of Go's five quick tries fail
    controller = _controller(fake)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            controller.start_workers(tg, 1)
            controller.updates.add((0, "node-1", "", ""))
            await anyio.sleep(5)
            controller.stop()
    assert fake.deleted == ["ns/p"]
    start = fake.attempts[0]
    rounds = [round(fake.attempts[i] - start, 6) for i in range(0, len(fake.attempts), DELETE_RETRIES)]
    # each round is five tries 10 ms apart; the rounds are 5 ms, then 10 ms of backoff apart
    assert rounds == [0, 0.055, 0.115]


async def test_an_eviction_that_keeps_failing_is_dropped_then_scheduled_again_by_the_next_update() -> None:
    fake = FlakyDeletes(failures=10**6)
    controller = _controller(fake)
    with anyio.fail_after(3600):
        async with anyio.create_task_group() as tg:
            controller.start_workers(tg, 1)
            controller.updates.add((0, "node-1", "", ""))
            await anyio.sleep(1800)  # the last retry is due ~164 s after the first failure
            assert len(fake.attempts) == (1 + MAX_RETRIES) * DELETE_RETRIES
            gaps = [b - a for a, b in itertools.pairwise(fake.attempts)]
            assert max(gaps) > 80  # the backoff doubled up to ~82 s
            assert controller.schedule.scheduled("ns/p") is None  # released
            controller.updates.add((POD_ITEM, "node-1", "ns", "p"))  # the pod's next update
            await anyio.sleep(0.001)
            assert controller.schedule.scheduled("ns/p") is not None
            assert len(fake.attempts) > (1 + MAX_RETRIES) * DELETE_RETRIES
            controller.stop()


async def test_stop_lets_a_deletion_in_flight_finish() -> None:
    fake = FlakyDeletes(failures=0)
    release = anyio.Event()
    inner_delete = fake.delete

    async def slow_delete(*args: Any, **kwargs: Any) -> Any:
        await release.wait()
        return await inner_delete(*args, **kwargs)

    fake.delete = slow_delete  # type: ignore[method-assign]
    controller = _controller(fake)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            controller.start_workers(tg, 1)
            controller.updates.add((0, "node-1", "", ""))
            await anyio.sleep(1)  # the deletion is now waiting on the API
            controller.stop()
            await anyio.sleep(1)
            release.set()  # the workers' task group only ends once it has finished
    assert fake.deleted == ["ns/p"]
