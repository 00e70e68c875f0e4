"""The taint manager on the local cluster: who is deleted when, and what cancels a deletion.

Pods are bound to `node-1` by hand (no scheduler needed) and the NoExecute taint is written by
hand, so these tests exercise only the taint-eviction controller. Toleration times are 1-2 s.
The taint is a custom one: the API server's DefaultTolerationSeconds admission gives every pod
300 s for `unreachable` / `not-ready`, as in a real cluster.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from apiclient import KubeClient
from apiclient.resources import NODES, PODS
from controllers.tainteviction import TaintEvictionController
from tests.controllers.harness import running_controllers
from tests.support import objects
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local", "real")

NS = "default"
UNREACHABLE = {"key": "example.com/evict", "effect": "NoExecute"}


def pod(name: str, node: str, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    extra: dict[str, Any] = {} if tolerations is None else {"tolerations": tolerations}
    return objects.pod(
        name, namespace=NS, node=node, image="busybox", terminationGracePeriodSeconds=0, **extra
    )


def tolerate(seconds: int | None) -> list[dict[str, Any]]:
    tol: dict[str, Any] = {"key": UNREACHABLE["key"], "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        tol["tolerationSeconds"] = seconds
    return [tol]


async def set_taints(kube: KubeClient, node: str, taints: list[dict[str, Any]]) -> None:
    await kube.patch(NODES, node, {"spec": {"taints": taints or None}})


async def gone(kube: KubeClient, name: str) -> bool:
    """Deleted: no longer there, or being deleted (the kubelet finishes it after its grace period)."""
    obj = await kube.get_or_none(PODS, name, namespace=NS)
    return obj is None or bool(obj["metadata"].get("deletionTimestamp"))


async def present(kube: KubeClient, name: str) -> bool:
    return not await gone(kube, name)


async def test_untolerating_pods_go_at_once_tolerating_after_their_seconds_forever_stays(
    kube: KubeClient,
) -> None:
    for p in (
        pod("no-toleration", "node-1"),
        pod("tolerates-1s", "node-1", tolerate(1)),
        pod("tolerates-forever", "node-1", tolerate(None)),
        pod("tolerates-0s", "node-1", tolerate(0)),
        pod("elsewhere", "node-2"),
    ):
        await kube.create(PODS, p, namespace=NS)
    async with running_controllers(kube, TaintEvictionController) as h:
        controller = h.controllers[0]
        assert isinstance(controller, TaintEvictionController)
        await set_taints(kube, "node-1", [UNREACHABLE])
        await eventually(lambda: gone(kube, "no-toleration"), "the untolerating pod deleted")
        await eventually(lambda: gone(kube, "tolerates-0s"), "the pod tolerating 0 s deleted")
        # The 1 s pod is scheduled, not deleted yet: its deadline lies in the future.
        due = controller.schedule.scheduled(f"{NS}/tolerates-1s")
        assert due is not None
        assert controller.schedule.scheduled(f"{NS}/tolerates-forever") is None
        await eventually(lambda: gone(kube, "tolerates-1s"), "the pod tolerating 1 s deleted")
        assert anyio.current_time() >= due
        assert await present(kube, "tolerates-forever")
        assert await present(kube, "elsewhere")
        assert "TaintManagerEviction" in h.events.reasons("no-toleration")


async def test_disruption_target_condition_is_set_before_the_delete(kube: KubeClient) -> None:
    p = pod("marked", "node-1")
    p["spec"]["terminationGracePeriodSeconds"] = 30  # stays terminating long enough to read it
    await kube.create(PODS, p, namespace=NS)
    with capture_logs() as logs:
        async with running_controllers(kube, TaintEvictionController):
            await set_taints(kube, "node-1", [UNREACHABLE])
            await eventually(lambda: gone(kube, "marked"), "the pod deleted")
    deleting = [e for e in logs if e.get("event") == "NoExecuteTaintManager is deleting pod"]
    assert [(e["log_level"], e["pod"]) for e in deleting] == [("info", f"{NS}/marked")]
    obj = await kube.get(PODS, "marked", namespace=NS)
    conditions = {c["type"]: c for c in obj["status"].get("conditions") or ()}
    assert conditions["DisruptionTarget"]["status"] == "True"
    assert conditions["DisruptionTarget"]["reason"] == "DeletionByTaintManager"


async def test_removing_the_taint_cancels_scheduled_deletions(kube: KubeClient) -> None:
    await kube.create(PODS, pod("patient", "node-1", tolerate(2)), namespace=NS)
    async with running_controllers(kube, TaintEvictionController) as h:
        controller = h.controllers[0]
        assert isinstance(controller, TaintEvictionController)
        await set_taints(kube, "node-1", [UNREACHABLE])
        due = await eventually(
            lambda: controller.schedule.scheduled(f"{NS}/patient"), "the deletion scheduled"
        )
        await set_taints(kube, "node-1", [])
        await eventually(
            lambda: controller.schedule.scheduled(f"{NS}/patient") is None, "the deletion cancelled"
        )
        assert "TaintManagerEviction" in h.events.reasons("patient")  # "Cancelling deletion"
        # Past the original deadline the pod is still there.
        await anyio.sleep(max(0.0, due - anyio.current_time()) + 0.5)
        assert await present(kube, "patient")


async def test_a_second_taint_does_not_postpone_a_scheduled_deletion(kube: KubeClient) -> None:
    await kube.create(PODS, pod("changes-mind", "node-1", tolerate(2)), namespace=NS)
    async with running_controllers(kube, TaintEvictionController) as h:
        controller = h.controllers[0]
        assert isinstance(controller, TaintEvictionController)
        key = f"{NS}/changes-mind"
        await set_taints(kube, "node-1", [UNREACHABLE])
        first = await eventually(lambda: controller.schedule.scheduled(key), "the deletion scheduled")
        # A second NoExecute taint the pod tolerates for longer does not postpone the deletion.
        other = {"key": "example.com/maintenance", "effect": "NoExecute"}
        current = (await kube.get(PODS, "changes-mind", namespace=NS))["spec"]["tolerations"]
        extra = {"key": other["key"], "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
        await kube.patch(PODS, "changes-mind", {"spec": {"tolerations": [*current, extra]}}, namespace=NS)
        # The pod and node informers are separate watches: were the second taint seen first, the
        # pod would not yet tolerate it and would go at once, in KCM as here.
        await eventually(
            lambda: (
                "example.com/maintenance" in str(controller.schedule_sync.pod_lister.get("changes-mind", NS))
            ),
            "the new toleration seen",
        )
        await set_taints(kube, "node-1", [UNREACHABLE, other])
        await eventually(
            lambda: "example.com/maintenance" in str(controller.schedule_sync.tainted.get("node-1")),
            "both taints seen",
        )
        assert controller.schedule.scheduled(key) == first
        # ... and it still fires at its first deadline.
        await eventually(lambda: gone(kube, "changes-mind"), "the pod deleted")
        assert anyio.current_time() >= first
        assert "TaintManagerEviction" in h.events.reasons("changes-mind")
