"""Simulated kubelets seen through the API: registration, heartbeats, per-node controls, pod lifecycle."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from apiclient import ApiError, KubeClient
from apiclient import resources as R
from tests.localcluster.living import condition, is_ready, living_cluster, pods
from tests.support.waiting import eventually, holds, when


async def _renew_times(kube) -> dict[str, str]:  # type: ignore[no-untyped-def]
    leases = await kube.list(R.LEASES, namespace="kube-node-lease")
    return {item["metadata"]["name"]: item["spec"]["renewTime"] for item in leases["items"]}


async def test_nodes_register_with_capacity_conditions_and_a_renewed_lease() -> None:
    async with living_cluster(nodes=2) as (_, kube):
        node = await kube.get(R.NODES, "node-1")
        assert node["status"]["allocatable"]["pods"] == "110"
        assert node["status"]["capacity"]["pods"] == "110"
        types = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert types == {
            "MemoryPressure": "False",
            "DiskPressure": "False",
            "PIDPressure": "False",
            "Ready": "True",
        }
        lease = await kube.get(R.LEASES, "node-1", namespace="kube-node-lease")
        assert lease["spec"]["holderIdentity"] == "node-1"
        assert lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
        first = lease["spec"]["renewTime"]
        await eventually(
            lambda: holds(
                kube.get(R.LEASES, "node-1", namespace="kube-node-lease"),
                lambda lz: lz["spec"]["renewTime"] != first,
            ),
            "node-1's lease renewed",
        )


def _renewed(kube: KubeClient, node: str, since: str) -> Callable[[], Awaitable[bool]]:
    """A check that `node`'s lease was renewed after `since`."""

    async def check() -> bool:
        return (await _renew_times(kube))[node] != since

    return check


async def test_a_stopped_kubelet_goes_silent_and_comes_back() -> None:
    async with living_cluster(nodes=2) as (cluster, kube):
        cluster.kubelets["node-1"].stop()
        silent = (await _renew_times(kube))["node-1"]
        # node-2 renews three times while node-1 stays silent
        for _ in range(3):
            seen = (await _renew_times(kube))["node-2"]
            await eventually(_renewed(kube, "node-2", seen), "node-2's lease renewed")
        assert (await _renew_times(kube))["node-1"] == silent
        # a pod bound to the silent node is not started
        await kube.create(
            R.PODS,
            {
                "metadata": {"name": "stuck"},
                "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "x"}]},
            },
            namespace="default",
        )
        for _ in range(3):
            seen = (await _renew_times(kube))["node-2"]
            await eventually(_renewed(kube, "node-2", seen), "node-2's lease renewed")
        assert (await kube.get(R.PODS, "stuck", namespace="default"))["status"]["phase"] == "Pending"
        cluster.kubelets["node-1"].start()
        await eventually(_renewed(kube, "node-1", silent), "node-1's lease renewed")
        await eventually(
            lambda: holds(kube.get(R.PODS, "stuck", namespace="default"), is_ready), "pod stuck ready"
        )


async def test_node_conditions_set_by_hand() -> None:
    async with living_cluster(nodes=1) as (cluster, kube):
        kubelet = cluster.kubelets["node-1"]
        kubelet.set_condition("MemoryPressure", True)
        kubelet.set_condition("NetworkUnavailable", True)
        kubelet.set_ready(False, "PLEG is not healthy")
        node = await kube.get(R.NODES, "node-1")
        assert condition(node, "MemoryPressure")["status"] == "True"  # type: ignore[index]
        assert condition(node, "MemoryPressure")["reason"] == "KubeletHasInsufficientMemory"  # type: ignore[index]
        assert condition(node, "NetworkUnavailable")["status"] == "True"  # type: ignore[index]
        ready = condition(node, "Ready")
        assert ready is not None and ready["status"] == "False" and ready["message"] == "PLEG is not healthy"
        kubelet.set_ready(True)
        node = await kube.get(R.NODES, "node-1")
        assert condition(node, "Ready")["status"] == "True"  # type: ignore[index]
        assert condition(node, "DiskPressure")["status"] == "False"  # type: ignore[index]


async def test_pod_readiness_can_fail_and_recover() -> None:
    async with living_cluster(nodes=1) as (cluster, kube):
        await kube.create(
            R.PODS,
            {
                "metadata": {"name": "app"},
                "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
            },
            namespace="default",
        )
        await eventually(
            lambda: holds(kube.get(R.PODS, "app", namespace="default"), is_ready), "pod app ready"
        )
        cluster.kubelets["node-1"].fail_readiness("default", "app")
        pod = await kube.get(R.PODS, "app", namespace="default")
        ready = condition(pod, "Ready")
        assert ready is not None and ready["status"] == "False" and ready["reason"] == "ContainersNotReady"
        assert ready["message"] == "containers with unready status: [a b]"
        assert pod["status"]["phase"] == "Running"
        cluster.kubelets["node-1"].fail_readiness("default", "app", failing=False)
        assert is_ready(await kube.get(R.PODS, "app", namespace="default"))


async def test_graceful_deletion_is_finished_by_the_kubelet() -> None:
    async with living_cluster(nodes=1) as (cluster, kube):
        await kube.create(
            R.PODS,
            {"metadata": {"name": "bye"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
            namespace="default",
        )
        await eventually(
            lambda: holds(kube.get(R.PODS, "bye", namespace="default"), is_ready), "pod bye ready"
        )
        cluster.kubelets["node-1"].stop()
        deleted = await kube.delete(R.PODS, "bye", namespace="default")
        assert deleted["metadata"]["deletionGracePeriodSeconds"] == 30
        # with the kubelet down nobody finishes the deletion
        assert (await kube.get(R.PODS, "bye", namespace="default"))["metadata"]["deletionTimestamp"]
        cluster.kubelets["node-1"].start()

        async def gone() -> bool:
            try:
                await kube.get(R.PODS, "bye", namespace="default")
            except ApiError as exc:
                return exc.not_found
            return False

        await eventually(gone, "pod bye gone")
        assert await pods(kube) == []


async def test_a_deleted_node_is_registered_again_when_its_kubelet_restarts() -> None:
    async with living_cluster(nodes=1) as (cluster, kube):
        old = await kube.get(R.NODES, "node-1")
        await kube.delete(R.NODES, "node-1")
        cluster.kubelets["node-1"].stop()
        cluster.kubelets["node-1"].start()
        new = await kube.get(R.NODES, "node-1")
        assert new["metadata"]["uid"] != old["metadata"]["uid"]
        lease = await eventually(
            lambda: when(
                kube.get(R.LEASES, "node-1", namespace="kube-node-lease"),
                lambda lz: (
                    lz["metadata"].get("ownerReferences", [{}])[0].get("uid") == new["metadata"]["uid"]
                ),
            ),
            "lz['metadata'].get('ownerReferences', [{}])[0].get('uid') == new['metadata']['uid']",
        )
        assert lease["spec"]["holderIdentity"] == "node-1"
