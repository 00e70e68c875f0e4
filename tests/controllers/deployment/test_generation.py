"""The Deployment's generation moves only with its spec and annotations, as under KCM.

KCM writes the revision annotations through `/status` (`UpdateStatus`); kube-apiserver bumps a
Deployment's generation on any annotation change through the main resource. Writing them there
made `metadata.generation` run ahead of KCM's (2 after a create where KCM has 1), so every
client that waits for `observedGeneration == generation` saw a different Deployment.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS
from controllers.deployment import DeploymentController
from controllers.deployment.util import REVISION_ANNOTATION
from controllers.replicaset import ReplicaSetController
from tests.backends import cluster_on_backend
from tests.controllers.deployment.test_integration import NS, deployment_body
from tests.controllers.harness import running_controllers
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local", "real")


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """Scheduler and kubelets on: pods become Ready by themselves on either backend."""
    async with cluster_on_backend(request, nodes=3) as started:
        yield started


async def _settled(kube: KubeClient, revision: str) -> dict[str, Any] | None:
    d = await kube.get(DEPLOYMENTS, "gen", namespace=NS)
    st = d.get("status") or {}
    done = (
        st.get("observedGeneration") == d["metadata"]["generation"]
        and st.get("updatedReplicas") == 2
        and st.get("availableReplicas") == 2
        and st.get("replicas") == 2
        and (d["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION) == revision
    )
    return d if done else None


async def test_revision_annotations_do_not_bump_the_generation(kube: KubeClient) -> None:
    async with running_controllers(kube, DeploymentController, ReplicaSetController):
        await kube.create(DEPLOYMENTS, deployment_body("gen", 2), namespace=NS)
        created = await eventually(lambda: _settled(kube, "1"), "revision 1 rolled out")
        assert created["metadata"]["generation"] == 1
        patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}}
        await kube.patch(DEPLOYMENTS, "gen", patch, namespace=NS, patch_type="strategic")
        rolled = await eventually(lambda: _settled(kube, "2"), "revision 2 rolled out")
        assert rolled["metadata"]["generation"] == 2
