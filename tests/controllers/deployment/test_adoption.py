"""`getReplicaSetsForDeployment`: the Deployment adopts matching orphans in its namespace and
releases owned ReplicaSets that stopped matching; others' and other namespaces' are left alone."""

from __future__ import annotations

from typing import Any

import pytest

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS, NAMESPACES, REPLICASETS
from controllers.common.controller_ref import get_controller_of
from controllers.deployment import DeploymentController
from tests.controllers.harness import running_controllers
from tests.support.waiting import eventually

from .test_integration import NS, deployment_body

pytestmark = pytest.mark.usefixtures("cluster")


def _rs(
    name: str, namespace: str, labels: dict[str, str], owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": meta,
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
            },
        },
    }


async def _owner_uid(kube: KubeClient, name: str, namespace: str = NS) -> str | None:
    ref = get_controller_of(await kube.get(REPLICASETS, name, namespace=namespace))
    return None if ref is None else str(ref.get("uid"))


async def test_adopts_orphans_releases_strays_and_leaves_other_namespaces(kube: KubeClient) -> None:
    await kube.create(NAMESPACES, {"metadata": {"name": "elsewhere"}})
    body = deployment_body("adopter", 0)
    body["spec"]["paused"] = True  # no rollout: only the claim runs
    d = await kube.create(DEPLOYMENTS, body, namespace=NS)
    uid = d["metadata"]["uid"]
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "adopter", "uid": uid, "controller": True}
    await kube.create(REPLICASETS, _rs("orphan", NS, {"app": "adopter", "v": "1"}), namespace=NS)
    await kube.create(REPLICASETS, _rs("stray", NS, {"app": "other"}, owner), namespace=NS)
    await kube.create(REPLICASETS, _rs("far", "elsewhere", {"app": "adopter"}), namespace="elsewhere")
    async with running_controllers(kube, DeploymentController):
        await eventually(lambda: _owner_uid(kube, "orphan"), "the orphan adopted")
        assert await _owner_uid(kube, "orphan") == uid
        await eventually(lambda: _released(kube, "stray"), "the stray released")
    assert await _owner_uid(kube, "far", "elsewhere") is None


async def _released(kube: KubeClient, name: str) -> bool:
    return await _owner_uid(kube, name) is None
