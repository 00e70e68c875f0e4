"""Node lifecycle + taint eviction + ReplicaSet with simulated kubelets, on both backends.

Kubelets run 10x faster (a lease renewal per second), the grace period is 3 s and the monitor
pass runs every 0.5 s, so a stopped kubelet is noticed within seconds. On the real control plane
kube-controller-manager's own node lifecycle controller (and with it its taint manager) is off,
so aiokcm's are the only ones acting on the nodes.

About "pods without a toleration": the API server's DefaultTolerationSeconds admission gives
every pod 300 s for `unreachable` and `not-ready`, unless the pod already names those keys. A
toleration of the key with a value the taint never has keeps the admission away and leaves the
pod truly untolerating (the `UNTOLERATING` list below).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import NODES, PODS, REPLICASETS
from controllers.nodelifecycle import NodeLifecycleController
from controllers.nodelifecycle.config import NodeLifecycleConfig
from controllers.replicaset import ReplicaSetController
from controllers.tainteviction import TaintEvictionController
from tests.backends import backend_of, cluster_on_backend
from tests.controllers.harness import running_controllers
from tests.support.objects import replicaset
from tests.support.waiting import eventually

NS = "default"
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
UNTOLERATING = [
    {"key": k, "operator": "Equal", "value": "never", "effect": "NoExecute"} for k in (UNREACHABLE, NOT_READY)
]
CONFIG = NodeLifecycleConfig(
    node_monitor_grace_period=3.0,
    node_startup_grace_period=5.0,
    node_monitor_period=0.5,
    node_eviction_rate=10.0,
)


pytestmark = pytest.mark.backends("local", "real")


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with cluster_on_backend(
        request, nodes=3, speed=10.0, pod_start_delay=0.1, termination_cap=0.5
    ) as c:
        if backend_of(request) == "real":
            c.kubelets.set_speed(10.0)
        yield c


def bare_pod(name: str, node: str, tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "busybox"}],
            "tolerations": tolerations,
        },
    }


async def taints(kube: KubeClient, node: str) -> set[tuple[str, str]]:
    obj = await kube.get(NODES, node)
    return {(t["key"], t["effect"]) for t in obj["spec"].get("taints") or ()}


async def ready_status(kube: KubeClient, node: str) -> str:
    obj = await kube.get(NODES, node)
    for cond in obj["status"].get("conditions") or ():
        if cond["type"] == "Ready":
            return str(cond["status"])
    return ""


async def pod_or_none(kube: KubeClient, name: str) -> dict[str, Any] | None:
    return await kube.get_or_none(PODS, name, namespace=NS)


async def deleted(kube: KubeClient, name: str) -> bool:
    pod = await pod_or_none(kube, name)
    return pod is None or bool(pod["metadata"].get("deletionTimestamp"))


def pod_ready(pod: dict[str, Any]) -> str:
    for cond in pod["status"].get("conditions") or ():
        if cond["type"] == "Ready":
            return str(cond["status"])
    return ""


async def live_pods(kube: KubeClient, app: str) -> list[dict[str, Any]]:
    pods = (await kube.list(PODS, namespace=NS, label_selector=f"app={app}"))["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def test_a_stopped_kubelet_taints_its_node_and_its_pods_go_by_their_tolerations(
    cluster: Any, kube: KubeClient
) -> None:
    async with running_controllers(
        kube, NodeLifecycleController, TaintEvictionController, ReplicaSetController, configs=[CONFIG]
    ) as h:
        # Cordon node-2 and node-3 so the ReplicaSet's pods all land on node-1.
        for node in ("node-2", "node-3"):
            await kube.patch(NODES, node, {"spec": {"unschedulable": True}})
        for node in ("node-2", "node-3"):
            await eventually(
                lambda node=node: _has(kube, node, ("node.kubernetes.io/unschedulable", "NoSchedule")),
                f"the unschedulable taint on {node}",
            )
        await kube.create(
            REPLICASETS,
            replicaset("web", 2, namespace=NS, image="busybox", pod_spec={"tolerations": UNTOLERATING}),
            namespace=NS,
        )
        await kube.create(
            PODS,
            bare_pod(
                "tolerates-2s",
                "node-1",
                [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}],
            ),
            namespace=NS,
        )
        await kube.create(
            PODS,
            bare_pod(
                "tolerates-forever",
                "node-1",
                [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}],
            ),
            namespace=NS,
        )

        async def web_on_node_1() -> list[str]:
            pods = await live_pods(kube, "web")
            ok = len(pods) == 2 and all(
                p["spec"].get("nodeName") == "node-1" and pod_ready(p) == "True" for p in pods
            )
            return [p["metadata"]["name"] for p in pods] if ok else []

        first_web = await eventually(web_on_node_1, "two web pods running on node-1")
        for node in ("node-2", "node-3"):
            await kube.patch(NODES, node, {"spec": {"unschedulable": None}})
            await eventually(
                lambda node=node: _lacks(kube, node, "node.kubernetes.io/unschedulable"), "uncordoned"
            )

        cluster.kubelets["node-1"].stop()
        await eventually(lambda: _is(ready_status(kube, "node-1"), "Unknown"), "node-1 Ready=Unknown")
        await eventually(
            lambda: _has(kube, "node-1", (UNREACHABLE, "NoExecute")), "node-1 tainted unreachable"
        )
        tainted_at = anyio.current_time()
        # KCM's two taint passes run on their own workers (the node update queue's NoSchedule
        # taints, the zone tainter's NoExecute ones): both come, in either order.
        await eventually(
            lambda: _has(kube, "node-1", (UNREACHABLE, "NoSchedule")), "node-1 unschedulable as unreachable"
        )
        assert (NOT_READY, "NoExecute") not in await taints(kube, "node-1")

        for name in first_web:
            await eventually(lambda name=name: deleted(kube, name), f"untolerating {name} deleted")
        await eventually(lambda: deleted(kube, "tolerates-2s"), "the pod tolerating 2 s deleted")
        assert anyio.current_time() - tainted_at >= 1.0  # not before its toleration ran out (~2 s)

        async def replaced() -> bool:
            pods = await live_pods(kube, "web")
            return len(pods) == 2 and all(
                p["spec"].get("nodeName") in ("node-2", "node-3") and pod_ready(p) == "True" for p in pods
            )

        await eventually(replaced, "the ReplicaSet's pods replaced on healthy nodes")
        forever = await pod_or_none(kube, "tolerates-forever")
        assert forever is not None and not forever["metadata"].get("deletionTimestamp")
        assert pod_ready(forever) == "False"  # marked not ready with its node
        assert "NodeNotReady" in h.events.reasons("node-1")


async def test_a_node_coming_back_loses_its_taint_and_scheduled_deletions_are_cancelled(
    cluster: Any, kube: KubeClient
) -> None:
    tol = [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 8}]
    await kube.create(PODS, bare_pod("patient", "node-1", tol), namespace=NS)
    async with running_controllers(
        kube, NodeLifecycleController, TaintEvictionController, configs=[CONFIG]
    ) as h:
        evictor = next(c for c in h.controllers if isinstance(c, TaintEvictionController))
        await eventually(lambda: _is(_pod_ready(kube, "patient"), "True"), "the pod running")
        cluster.kubelets["node-1"].stop()
        due = await eventually(lambda: evictor.schedule.scheduled(f"{NS}/patient"), "the deletion scheduled")
        cluster.kubelets["node-1"].start()
        await eventually(lambda: _lacks(kube, "node-1", UNREACHABLE), "the unreachable taints removed")
        await eventually(
            lambda: evictor.schedule.scheduled(f"{NS}/patient") is None, "the deletion cancelled"
        )
        await anyio.sleep(max(0.0, due - anyio.current_time()) + 0.5)
        assert not await deleted(kube, "patient")


async def test_conditions_map_to_no_schedule_taints(cluster: Any, kube: KubeClient) -> None:
    async with running_controllers(kube, NodeLifecycleController, configs=[CONFIG]):
        kubelet = cluster.kubelets["node-2"]
        kubelet.set_condition("MemoryPressure", True)
        kubelet.set_condition("PIDPressure", True)
        await eventually(
            lambda: _has(kube, "node-2", ("node.kubernetes.io/memory-pressure", "NoSchedule")), "memory"
        )
        await eventually(
            lambda: _has(kube, "node-2", ("node.kubernetes.io/pid-pressure", "NoSchedule")), "pid"
        )
        kubelet.set_condition("MemoryPressure", False)
        await eventually(
            lambda: _lacks(kube, "node-2", "node.kubernetes.io/memory-pressure"), "memory taint gone"
        )
        kubelet.set_ready(False)
        await eventually(lambda: _has(kube, "node-2", (NOT_READY, "NoExecute")), "not-ready NoExecute")
        await eventually(lambda: _has(kube, "node-2", (NOT_READY, "NoSchedule")), "not-ready NoSchedule")
        assert (UNREACHABLE, "NoExecute") not in await taints(kube, "node-2")
        kubelet.set_ready(True)
        await eventually(lambda: _lacks(kube, "node-2", NOT_READY), "not-ready taints gone")
        assert ("node.kubernetes.io/pid-pressure", "NoSchedule") in await taints(kube, "node-2")


async def _has(kube: KubeClient, node: str, taint: tuple[str, str]) -> bool:
    return taint in await taints(kube, node)


async def _lacks(kube: KubeClient, node: str, key: str) -> bool:
    return all(k != key for k, _ in await taints(kube, node))


async def _is(value: Any, expected: str) -> bool:
    return bool(await value == expected)


async def _pod_ready(kube: KubeClient, name: str) -> str:
    pod = await pod_or_none(kube, name)
    return pod_ready(pod) if pod is not None else ""
