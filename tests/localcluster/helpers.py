"""Small object builders shared by the local cluster tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from localcluster.cluster import LocalCluster
from tests.backends import cluster_on_backend


def pod(
    name: str | None = None, *, labels: dict[str, str] | None = None, node: str | None = None, **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name} if name else {"generateName": "p-"}
    if labels:
        meta["labels"] = labels
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}], **spec},
    }
    if node:
        body["spec"]["nodeName"] = node
    return body


async def bare_cluster(request: pytest.FixtureRequest) -> AsyncIterator[LocalCluster]:
    """An API server only (no scheduler, kubelets, GC or other controllers), for tests of the API's own semantics:
    a module uses it with `cluster = pytest.fixture(bare_cluster)`. On the real backend the
    scheduler and garbage collector still run; nodes are registered but no kubelet runs pods."""
    async with cluster_on_backend(
        request, nodes=3, scheduler=False, kubelets=False, gc=False, controllers=False
    ) as started:
        yield started
