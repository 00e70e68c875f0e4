"""Events as client-go writes them: counted duplicates, aggregation of similar events, spam filter."""

from __future__ import annotations

from typing import Any

import anyio
from structlog.testing import capture_logs

from apiclient import KubeClient
from apiclient.events import EventBroadcaster
from tests.manager.fakeapi import FakeApi
from tests.support.waiting import eventually

POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1", "resourceVersion": "7"},
}  # fmt: skip
NODE: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u-n1"}}


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def _events(api: FakeApi, namespace: str = "shop") -> list[dict[str, Any]]:
    return api.in_collection(f"/api/v1/namespaces/{namespace}/events")


async def test_identical_events_become_one_event_with_a_count(
    fake_api: FakeApi, fake_client: KubeClient
) -> None:
    clock = Clock()
    broadcaster = EventBroadcaster(fake_client, host="h", clock=clock)
    rec = broadcaster.recorder("replicaset-controller")
    for _ in range(3):
        rec.event(POD, "Warning", "FailedCreate", "quota exceeded")
        clock.now += 1
    await broadcaster.flush()
    (event,) = _events(fake_api)
    assert event["count"] == 3
    assert event["involvedObject"] == {
        "kind": "Pod",
        "namespace": "shop",
        "name": "web-1",
        "uid": "u-1",
        "apiVersion": "v1",
        "resourceVersion": "7",
    }
    assert event["source"] == {"component": "replicaset-controller", "host": "h"}
    assert event["firstTimestamp"] == "2023-11-14T22:13:20Z"
    assert event["lastTimestamp"] == "2023-11-14T22:13:22Z"
    assert [m for m, _ in fake_api.requests].count("PATCH") == 2


async def test_similar_events_are_combined_after_ten_messages(
    fake_api: FakeApi, fake_client: KubeClient
) -> None:
    broadcaster = EventBroadcaster(fake_client, host="h", clock=Clock())
    rec = broadcaster.recorder("c")
    for i in range(15):
        rec.event(POD, "Normal", "Evicting", f"evicting pod {i}")
    await broadcaster.flush()
    events = _events(fake_api)
    singles = [e for e in events if not e["message"].startswith("(combined")]
    combined = [e for e in events if e["message"].startswith("(combined from similar events): ")]
    assert len(singles) == 9
    assert len(combined) == 1
    assert combined[0]["count"] == 6
    assert combined[0]["message"] == "(combined from similar events): evicting pod 14"


async def test_aggregation_resets_after_ten_minutes(fake_api: FakeApi, fake_client: KubeClient) -> None:
    clock = Clock()
    broadcaster = EventBroadcaster(fake_client, host="h", clock=clock)
    rec = broadcaster.recorder("c")
    for i in range(9):
        rec.event(POD, "Normal", "Evicting", f"m{i}")
    await broadcaster.flush()
    clock.now += 601
    rec.event(POD, "Normal", "Evicting", "m9")
    await broadcaster.flush()
    assert not any(e["message"].startswith("(combined") for e in _events(fake_api))


async def test_spam_filter_caps_one_object_at_25_then_one_per_5_minutes(
    fake_api: FakeApi, fake_client: KubeClient
) -> None:
    clock = Clock()
    broadcaster = EventBroadcaster(fake_client, host="h", clock=clock)
    rec = broadcaster.recorder("c")
    for i in range(40):
        rec.event(POD, "Normal", f"Reason{i}", "hot loop")
    rec.event(NODE, "Normal", "Other", "another object is not affected")
    await broadcaster.flush()
    assert len(_events(fake_api)) == 25
    assert len(_events(fake_api, "default")) == 1  # cluster-scoped objects' events go to default
    rec.event(POD, "Normal", "Late", "still limited")
    await broadcaster.flush()
    assert len(_events(fake_api)) == 25
    clock.now += 300
    rec.event(POD, "Normal", "Later", "one token refilled")
    await broadcaster.flush()
    assert len(_events(fake_api)) == 26


async def test_recorder_never_blocks_and_the_run_task_writes(
    fake_api: FakeApi, fake_client: KubeClient
) -> None:
    broadcaster = EventBroadcaster(fake_client, host="h", max_queued=2)
    rec = broadcaster.recorder("c")
    for i in range(5):
        rec.event(POD, "Normal", f"R{i}", "m")  # synchronous; overflow is dropped, not awaited
    assert broadcaster.dropped == 3
    async with anyio.create_task_group() as tg:
        tg.start_soon(broadcaster.run)
        await eventually(lambda: len(_events(fake_api)) >= 2, "len(_events(fake_api)) >= 2")
        tg.cancel_scope.cancel()


async def test_every_event_is_logged_when_recorded_even_if_it_is_never_written(
    fake_api: FakeApi, fake_client: KubeClient
) -> None:
    """As KCM's `StartStructuredLogging`: the log has each action, the buffer full or not."""
    broadcaster = EventBroadcaster(fake_client, host="h", max_queued=1)
    rec = broadcaster.recorder("replicaset-controller")
    with capture_logs() as logs:
        rec.event(POD, "Normal", "SuccessfulCreate", "Created pod: web-1")
        rec.event(NODE, "Normal", "RegisteredNode", "Node n1 event: Registered Node n1 in Controller")
    assert broadcaster.dropped == 1
    occurred = [e for e in logs if e["event"] == "Event occurred"]
    assert [(e["log_level"], e["object"], e["kind"], e["reason"], e["message"]) for e in occurred] == [
        ("debug", "shop/web-1", "Pod", "SuccessfulCreate", "Created pod: web-1"),
        ("debug", "n1", "Node", "RegisteredNode", "Node n1 event: Registered Node n1 in Controller"),
    ]
    assert occurred[0]["type"] == "Normal" and occurred[0]["apiVersion"] == "v1"


async def test_server_rejections_are_dropped_and_errors_retried(
    fake_api: FakeApi, fake_client: KubeClient
) -> None:
    broadcaster = EventBroadcaster(fake_client, host="h", retry_sleep=0.01)
    fake_api.fail_writes = True
    rec = broadcaster.recorder("c")
    rec.event(POD, "Normal", "R", "m")
    async with anyio.create_task_group() as tg:
        tg.start_soon(broadcaster.flush)
        await eventually(lambda: len(fake_api.requests) >= 3, "len(fake_api.requests) >= 3")
        fake_api.fail_writes = False
    assert len(_events(fake_api)) == 1


async def test_events_are_written_and_bumped_on_the_local_cluster(kube: KubeClient) -> None:
    from apiclient.resources import EVENTS, NAMESPACES

    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    broadcaster = EventBroadcaster(kube, host="h")
    rec = broadcaster.recorder("replicaset-controller")
    rec.event(POD, "Warning", "FailedCreate", "quota exceeded")
    rec.event(POD, "Warning", "FailedCreate", "quota exceeded")
    await broadcaster.flush()
    (event,) = (await kube.list(EVENTS, namespace="shop"))["items"]
    assert event["count"] == 2 and event["reason"] == "FailedCreate"
    assert event["involvedObject"]["name"] == "web-1"
