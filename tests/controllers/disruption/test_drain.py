"""The real `kubectl drain` against a living cluster (scheduler, kubelets), gated by this controller's numbers.

The eviction subresource trusts `status.disruptionsAllowed`; nothing here writes a budget's status
by hand. Four pods of a ReplicaSet (scale 4) run two on node-1 and one each on node-2 and node-3,
with nobody to replace an evicted pod, under `maxUnavailable: 1`:

- the controller says 1 disruption is allowed, so draining node-1 evicts exactly one of its two
  pods and is then refused ("would violate the pod's disruption budget") until it times out;
- raising the budget to `maxUnavailable: 2` makes the controller allow one more, and the same drain
  completes; afterwards the budget reads 2 healthy of 2 desired: nothing more may go.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from apiclient import KubeClient
from apiclient.resources import PODDISRUPTIONBUDGETS, PODS, REPLICASETS
from controllers.disruption import DisruptionController
from tests.backends import cluster_on_backend
from tests.controllers.disruption.test_integration import controller_ref, create_workload, status_of
from tests.controllers.harness import running_controllers
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kubectl, pytest.mark.backends("local", "real")]

NS = "default"
LAYOUT = {"web-0": "node-1", "web-1": "node-1", "web-2": "node-2", "web-3": "node-3"}


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """Unlike the package's bare cluster, kubelets run: the drain waits for evicted pods to go."""
    async with cluster_on_backend(request, nodes=3) as started:
        yield started


async def kubectl(kubeconfig: str, cache: Path, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        kubeconfig,
        "--cache-dir",
        str(cache),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def live_pods(kube: KubeClient) -> dict[str, dict[str, Any]]:
    pods = await kube.list_all(PODS, namespace=NS, label_selector="foo=bar")
    return {p["metadata"]["name"]: p for p in pods if not p["metadata"].get("deletionTimestamp")}


async def wait_budget(kube: KubeClient, expected: tuple[int, int, int, int]) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        pdb = await kube.get(PODDISRUPTIONBUDGETS, "web", namespace=NS)
        in_sync = pdb["status"].get("observedGeneration") == pdb["metadata"]["generation"]
        return pdb if in_sync and status_of(pdb)[:4] == expected else None

    got: dict[str, Any] = await eventually(check, f"budget {expected}", timeout=60)
    return got


async def test_kubectl_drain_allowed_and_blocked_by_the_controller_numbers(
    tmp_path: Path, cluster: Any, kube: KubeClient
) -> None:
    async with running_controllers(kube, DisruptionController):
        rs = await create_workload(kube, REPLICASETS, 4, name="web")
        for name, node in LAYOUT.items():
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": {"foo": "bar"}, "ownerReferences": [controller_ref(rs)]},
                "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]},
            }
            await kube.create(PODS, body, namespace=NS)
        await kube.create(
            PODDISRUPTIONBUDGETS,
            {
                "metadata": {"name": "web"},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"foo": "bar"}}},
            },
            namespace=NS,
        )
        # All four pods Ready: 4 healthy, 3 desired of 4 expected, 1 disruption allowed.
        await wait_budget(kube, (1, 4, 3, 4))

        drain = ("drain", "node-1", "--ignore-daemonsets", "--delete-emptydir-data")
        code, out = await kubectl(cluster.kubeconfig_path, tmp_path, *drain, "--timeout=8s")
        assert code != 0, out
        assert "Cannot evict pod as it would violate the pod's disruption budget." in out
        left = await live_pods(kube)
        on_node_1 = sorted(n for n, p in left.items() if p["spec"]["nodeName"] == "node-1")
        assert len(on_node_1) == 1, out  # exactly the one disruption the budget allowed
        # The controller agrees: 3 healthy of 3 desired, nothing more may go.
        await wait_budget(kube, (0, 3, 3, 4))

        await kube.patch(PODDISRUPTIONBUDGETS, "web", {"spec": {"maxUnavailable": 2}}, namespace=NS)
        await wait_budget(kube, (1, 3, 2, 4))
        code, out = await kubectl(cluster.kubeconfig_path, tmp_path, *drain, "--timeout=60s")
        assert code == 0, out
        assert f"pod/{on_node_1[0]} evicted" in out and "node/node-1 drained" in out
        assert sorted(p["spec"]["nodeName"] for p in (await live_pods(kube)).values()) == ["node-2", "node-3"]
        await wait_budget(kube, (0, 2, 2, 4))
