"""Simulated kubelets reboot: NotReady and silent while down, back with a new boot ID, pods restarted.

The first tests drive the embedded kubelets alone on the loop's clock (looptime: a two-minute
reboot costs nothing), with the kubelets' real intervals (a lease renewal every 10 s). The last
ones run on both backends through the API, at ten times the pace (a renewal a second, on the
real tier too through `set_speed`, which also divides the down time as `speed` does locally),
with the kured-style agent of `tests.support.reboots` for the last.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import LEASES, NODES, PODS
from controllers.nodemaintenance.api import MAINTENANCES_ANNOTATION, PHASE_ANNOTATION
from localcluster.builtin import register_builtins
from localcluster.kubelet import RUN_SECONDS_ANNOTATION, KubeletConfig, Kubelets
from localcluster.objects import ObjectAPI
from localcluster.registry import Registry
from localcluster.storage import Storage
from tests.backends import backend_of, cluster_on_backend
from tests.localcluster.living import condition, is_ready
from tests.support.reboots import boot_id, reboot_agent
from tests.support.waiting import eventually

Obj = dict[str, Any]
NS = "default"
SPEED = 10.0


# -- the embedded kubelets alone, on the loop's clock ----------------------------------------


class Fleet:
    """Kubelets over an in-process object API, for reading what they wrote without HTTP."""

    def __init__(self, kubelets: Kubelets, objects: ObjectAPI) -> None:
        self.kubelets = kubelets
        self.objects = objects
        self.nodes = objects.registry.require("", "v1", "nodes")
        self.pods = objects.registry.require("", "v1", "pods")
        self.leases = objects.registry.require("coordination.k8s.io", "v1", "leases")

    def node(self, name: str) -> Obj:
        return self.objects.get(self.nodes, None, name)

    def pod(self, name: str) -> Obj | None:
        entry = self.objects.storage.get("pods", NS, name)
        return entry.load() if entry is not None else None

    def lease_version(self, name: str) -> str:
        return str(self.objects.get(self.leases, "kube-node-lease", name)["metadata"]["resourceVersion"])

    def create_pod(self, name: str, node: str, **spec: Any) -> None:
        annotations = spec.pop("annotations", {})
        body = {
            "metadata": {"name": name, "namespace": NS, "annotations": annotations},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}], **spec},
        }
        self.objects.create(self.pods, NS, body)


@asynccontextmanager
async def fleet(nodes: int = 2) -> AsyncIterator[Fleet]:
    registry = Registry()
    register_builtins(registry)
    objects = ObjectAPI(registry, Storage())
    for ns in (NS, "kube-node-lease"):
        objects.create(registry.require("", "v1", "namespaces"), None, {"metadata": {"name": ns}})
    kubelets = Kubelets(objects, KubeletConfig(events=True))
    for i in range(1, nodes + 1):
        kubelets.add_node(f"node-{i}")
    async with anyio.create_task_group() as tg:
        tg.start_soon(kubelets.run)
        await asyncio.sleep(0)
        yield Fleet(kubelets, objects)
        tg.cancel_scope.cancel()


def ready(obj: Obj) -> str:
    cond = condition(obj, "Ready")
    return str(cond.get("status")) if cond else ""


def container(pod: Obj | None) -> Obj:
    assert pod is not None
    statuses: list[Obj] = pod["status"]["containerStatuses"]
    return statuses[0]


@pytest.mark.looptime
async def test_a_reboot_on_the_loop_clock() -> None:
    async with fleet() as f:
        f.create_pod("agent", "node-1", tolerations=[{"operator": "Exists"}])
        f.create_pod("once", "node-1", restartPolicy="Never", annotations={RUN_SECONDS_ANNOTATION: "1000"})
        f.create_pod(
            "retry", "node-1", restartPolicy="OnFailure", annotations={RUN_SECONDS_ANNOTATION: "1000"}
        )
        f.create_pod("elsewhere", "node-2")
        f.create_pod("terminating", "node-1", terminationGracePeriodSeconds=30)
        f.create_pod("doomed", "node-1")
        await asyncio.sleep(2)
        for name in ("agent", "once", "retry", "elsewhere", "terminating", "doomed"):
            assert is_ready(f.pod(name) or {}), name
        before = f.node("node-1")["status"]["nodeInfo"]
        lease_before = f.lease_version("node-1")

        f.kubelets["node-1"].reboot(down_seconds=120)
        # at once: NotReady, and every container on the node dead
        node = f.node("node-1")
        cond = condition(node, "Ready")
        assert cond is not None
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "False",
            "KubeletNotReady",
            "node is rebooting",
        )
        assert f.kubelets["node-1"].rebooting
        for name in ("agent", "once", "retry"):
            pod = f.pod(name)
            assert pod is not None and ready(pod) == "False", name
            lost = container(pod)
            assert not lost["ready"] and "running" not in lost["state"]
            assert (lost["state"]["terminated"]["exitCode"], lost["state"]["terminated"]["reason"]) == (
                255,
                "Unknown",
            )
        assert is_ready(f.pod("elsewhere") or {})

        # while down: silent, no pod work
        f.objects.delete(f.pods, NS, "doomed", grace_period_seconds=0)
        f.objects.delete(f.pods, NS, "terminating")
        f.create_pod("late", "node-1")
        lease_other = f.lease_version("node-2")
        await asyncio.sleep(100)
        assert f.lease_version("node-1") == lease_before
        assert f.lease_version("node-2") != lease_other
        assert ready(f.node("node-1")) == "False"
        assert (f.pod("late") or {})["status"].get("phase", "Pending") == "Pending"
        assert (f.pod("terminating") or {})["metadata"].get("deletionTimestamp")

        # back: a new boot of the same machine, Ready, the lease renewed, the killed pods restarted
        await asyncio.sleep(21)
        assert not f.kubelets["node-1"].rebooting
        node = f.node("node-1")
        after = node["status"]["nodeInfo"]
        assert ready(node) == "True"
        assert after["bootID"] != before["bootID"]
        assert {k: v for k, v in after.items() if k != "bootID"} == {
            k: v for k, v in before.items() if k != "bootID"
        }
        assert f.lease_version("node-1") != lease_before
        events = f.objects.storage.iter_entries("events")
        assert any(e.load()["reason"] == "Rebooted" for e in events)
        await asyncio.sleep(3)
        agent = f.pod("agent")
        assert agent is not None and is_ready(agent)
        restarted = container(agent)
        assert restarted["restartCount"] == 1 and "running" in restarted["state"]
        assert restarted["lastState"]["terminated"]["exitCode"] == 255
        assert container(f.pod("retry"))["restartCount"] == 1 and is_ready(f.pod("retry") or {})
        assert (f.pod("once") or {})["status"]["phase"] == "Failed"
        assert is_ready(f.pod("late") or {}) and container(f.pod("late"))["restartCount"] == 0
        assert f.pod("doomed") is None and f.pod("terminating") is None
        assert container(f.pod("elsewhere"))["restartCount"] == 0

        # a second reboot: a second restart, and yet another boot
        f.kubelets["node-1"].reboot(down_seconds=5)
        await asyncio.sleep(8)
        assert container(f.pod("agent"))["restartCount"] == 2 and is_ready(f.pod("agent") or {})
        assert f.node("node-1")["status"]["nodeInfo"]["bootID"] not in (before["bootID"], after["bootID"])


@pytest.mark.looptime
async def test_a_stopped_machine_stays_down_until_started() -> None:
    async with fleet(nodes=1) as f:
        f.create_pod("agent", "node-1")
        await asyncio.sleep(2)
        first = boot_id(f.node("node-1"))
        kubelet = f.kubelets["node-1"]
        kubelet.reboot(down_seconds=10)
        kubelet.stop()
        await asyncio.sleep(60)
        assert kubelet.rebooting and ready(f.node("node-1")) == "False"
        assert boot_id(f.node("node-1")) == first
        kubelet.start()  # up at once
        assert not kubelet.rebooting and kubelet.running
        assert ready(f.node("node-1")) == "True" and boot_id(f.node("node-1")) != first
        await asyncio.sleep(2)
        assert container(f.pod("agent"))["restartCount"] == 1 and is_ready(f.pod("agent") or {})


@pytest.mark.looptime
async def test_a_reboot_while_down_starts_the_down_time_again() -> None:
    async with fleet(nodes=1) as f:
        f.create_pod("agent", "node-1")
        await asyncio.sleep(2)
        kubelet = f.kubelets["node-1"]
        kubelet.reboot(down_seconds=10)
        await asyncio.sleep(8)
        kubelet.reboot(down_seconds=10)
        await asyncio.sleep(8)
        assert kubelet.rebooting
        await asyncio.sleep(4)
        assert not kubelet.rebooting
        await asyncio.sleep(2)
        assert container(f.pod("agent"))["restartCount"] == 1  # one reboot, as the machine saw it


# -- both backends, through the API ----------------------------------------------------------


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with cluster_on_backend(request, nodes=2, speed=SPEED) as c:
        if backend_of(request) == "real":
            c.kubelets.set_speed(SPEED)
        yield c


def daemon_pod(name: str, node: str) -> Obj:
    """A DaemonSet's pod as its controller binds it: on its node, tolerating every taint."""
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.10"}],
            "tolerations": [{"operator": "Exists"}],
        },
    }


async def node_ready(kube: KubeClient, name: str) -> Obj | None:
    cond = condition(await kube.get(NODES, name), "Ready")
    return cond


async def lease_version(kube: KubeClient, name: str) -> str:
    lease = await kube.get(LEASES, name, namespace="kube-node-lease")
    return str(lease["metadata"]["resourceVersion"])


@pytest.mark.backends("local", "real")
async def test_a_rebooted_node_comes_back_with_a_new_boot_id_and_its_pods_restarted(
    cluster: Any, kube: KubeClient
) -> None:
    await kube.create(PODS, daemon_pod("agent", "node-1"), namespace=NS)
    await kube.create(PODS, daemon_pod("doomed", "node-1"), namespace=NS)
    await eventually(lambda: _pod_if(kube, is_ready), "the agent pod Ready")
    await eventually(lambda: _pod_if(kube, is_ready, "doomed"), "the doomed pod Ready")
    before = (await kube.get(NODES, "node-1"))["status"]["nodeInfo"]

    cluster.kubelets["node-1"].reboot(down_seconds=30)  # 3 s at ten times the pace

    async def rebooting() -> bool:
        cond = await node_ready(kube, "node-1")
        return cond is not None and (cond["status"], cond.get("message")) == ("False", "node is rebooting")

    await eventually(rebooting, "node-1 NotReady, rebooting")

    def dead(pod: Obj) -> bool:
        statuses = pod["status"].get("containerStatuses") or []
        return not is_ready(pod) and all("running" not in cs["state"] for cs in statuses)

    await eventually(lambda: _pod_if(kube, dead), "the agent pod's container dead")
    await kube.delete(PODS, "doomed", namespace=NS)  # graceful: the kubelet's to finish, once back
    silent = await lease_version(kube, "node-1")
    await anyio.sleep(1.5)  # a lease renewal a second while up
    assert cluster.kubelets["node-1"].rebooting, "the reboot ended before the silence was seen"
    assert await lease_version(kube, "node-1") == silent
    doomed = await kube.get_or_none(PODS, "doomed", namespace=NS)
    assert doomed is not None and doomed["metadata"].get("deletionTimestamp")

    async def back() -> bool:
        cond = await node_ready(kube, "node-1")
        return cond is not None and cond["status"] == "True"

    await eventually(back, "node-1 Ready again")
    after = (await kube.get(NODES, "node-1"))["status"]["nodeInfo"]
    assert after["bootID"] and after["bootID"] != before["bootID"]
    assert (after["machineID"], after["systemUUID"]) == (before["machineID"], before["systemUUID"])

    def restarted(pod: Obj) -> bool:
        statuses = pod["status"].get("containerStatuses") or []
        return is_ready(pod) and [cs["restartCount"] for cs in statuses] == [1]

    pod = await eventually(lambda: _pod_if(kube, restarted), "the agent pod restarted and Ready")
    assert "running" in pod["status"]["containerStatuses"][0]["state"]
    assert pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 255

    async def renewed() -> bool:
        return await lease_version(kube, "node-1") != silent

    await eventually(renewed, "node-1's lease renewed after the reboot")

    async def gone() -> bool:
        return await kube.get_or_none(PODS, "doomed", namespace=NS) is None

    await eventually(gone, "the pod deleted during the reboot finished once the node was back")


async def _pod_if(kube: KubeClient, check: Any, name: str = "agent") -> Obj | None:
    pod = await kube.get(PODS, name, namespace=NS)
    return pod if check(pod) else None


@pytest.mark.backends("local", "real")
async def test_the_reboot_agent_reboots_a_drained_node_once_each_time_it_drains(
    cluster: Any, kube: KubeClient
) -> None:
    first = {n: boot_id(await kube.get(NODES, n)) for n in ("node-1", "node-2")}
    rebooted: list[str] = []

    async def mark(node: str, phase: str | None, maintenances: str) -> None:
        annotations = {PHASE_ANNOTATION: phase, MAINTENANCES_ANNOTATION: maintenances}
        await kube.patch(NODES, node, {"metadata": {"annotations": annotations}})

    async def booted_since(node: str, boot: str) -> bool:
        obj = await kube.get(NODES, node)
        return boot_id(obj) != boot and ready(obj) == "True"

    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(reboot_agent, cluster, maintenance="m1", down_seconds=5.0, rebooted=rebooted))
        await mark("node-1", "Drained", "m0,m1")
        await mark("node-2", "Drained", "other")  # drained, but not by ours
        await eventually(lambda: rebooted == ["node-1"], "node-1 rebooted")
        await eventually(lambda: booted_since("node-1", first["node-1"]), "node-1 back with a new boot")
        await anyio.sleep(0.7)  # several polls while still Drained: no second reboot
        assert rebooted == ["node-1"]
        assert boot_id(await kube.get(NODES, "node-2")) == first["node-2"]
        second = boot_id(await kube.get(NODES, "node-1"))

        await mark("node-1", None, "m1")  # released...
        await anyio.sleep(0.5)
        await mark("node-1", "Drained", "m1")  # ...and drained again: rebooted again
        await eventually(lambda: rebooted == ["node-1", "node-1"], "node-1 rebooted again")
        await eventually(lambda: booted_since("node-1", second), "node-1 back with yet another boot")
        tg.cancel_scope.cancel()
