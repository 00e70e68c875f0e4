"""The node lifecycle controller's queues are named as KCM's, so existing dashboards find them."""

from __future__ import annotations

from typing import cast

from prometheus_client import REGISTRY

from apiclient import KubeClient
from controllers.context import ControllerContext
from controllers.nodelifecycle.controller import NodeLifecycleController
from informers import SharedInformerFactory
from tests.controllers.harness import build


def _adds(name: str) -> float:
    return REGISTRY.get_sample_value("workqueue_adds_total", {"name": name}) or 0.0


async def test_node_and_pod_queues_report_under_kcm_names() -> None:
    client = cast(KubeClient, object())
    controller = build(
        NodeLifecycleController, ControllerContext(client=client, informers=SharedInformerFactory(client))
    )
    nodes, pods = _adds("node_lifecycle_controller"), _adds("node_lifecycle_controller_pods")
    controller.enqueue("n1")
    controller.pod_queue.add("default/a")
    assert _adds("node_lifecycle_controller") == nodes + 1
    assert _adds("node_lifecycle_controller_pods") == pods + 1
    controller.stop()
