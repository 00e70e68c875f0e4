"""`aiokcm run` caches pods and nodes narrowed: what its controllers read, not whole objects."""

from __future__ import annotations

import anyio

from apiclient import KubeClient
from apiclient.resources import NODES, PODS
from controller_manager.app import Manager
from controller_manager.options import LeaderElectionOptions, ManagerOptions
from informers import POD_FIELDS
from localcluster.cluster import LocalCluster
from tests.support.waiting import eventually


async def test_the_manager_caches_the_pod_and_node_projections(
    cluster: LocalCluster, kube: KubeClient
) -> None:
    await kube.create(
        PODS,
        {
            "metadata": {"name": "cached", "namespace": "default", "labels": {"app": "x"}},
            "spec": {
                "nodeName": "node-1",
                "containers": [
                    {"name": "c", "image": "registry.k8s.io/pause:3.10", "env": [{"name": "A", "value": "b"}]}
                ],
            },
        },
        namespace="default",
    )
    client = await cluster.client()
    opts = ManagerOptions(
        controllers=("replicaset", "taint-eviction-controller"),
        secure_port=0,
        leader_election=LeaderElectionOptions(enabled=False),
    )
    manager = Manager(opts, client)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: manager.run(handle_signals=False))
            await eventually(
                lambda: manager.health.ready and len(manager.controllers) == 2,
                "manager.health.ready and len(manager.controllers) == 2",
            )
            factory = manager.controllers[0].ctx.informers
            pod = factory.informer(PODS).lister.get("cached", "default")
            node = factory.informer(NODES).lister.get("node-1")
            assert pod is not None and node is not None
            assert set(pod["spec"]) <= set(POD_FIELDS["spec"] or ()) and pod["spec"]["nodeName"] == "node-1"
            assert "containers" not in pod["spec"] and pod["metadata"]["labels"] == {"app": "x"}
            assert "managedFields" not in node["metadata"] and "images" not in node.get("status", {})
            assert node["status"]["conditions"]  # what the controllers read is still there
            manager.stop()
    finally:
        await client.close()
