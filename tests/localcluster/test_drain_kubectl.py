"""The real `kubectl drain` against the local cluster: it evicts through pods/eviction and a PDB
that allows no disruption blocks it until the budget allows one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from apiclient import resources as R
from tests.localcluster.living import is_ready, living_cluster, pods, replicaset_with_pods
from tests.support.waiting import eventually, when

pytestmark = pytest.mark.kubectl


async def _kubectl(kubeconfig: str, cache: Path, *args: str) -> tuple[int, str]:
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


async def test_kubectl_drain_is_blocked_by_a_budget_and_succeeds_once_it_allows(tmp_path: Path) -> None:
    async with living_cluster(nodes=3) as (cluster, kube):
        await replicaset_with_pods(kube, "web", 3)
        items = await eventually(
            lambda: when(
                pods(kube, selector="app=web"), lambda ps: len(ps) == 3 and all(is_ready(p) for p in ps)
            ),
            "len(ps) == 3 and all(is_ready(p) for p in ps)",
        )
        victim = next(p["metadata"]["name"] for p in items if p["spec"]["nodeName"] == "node-1")
        pdb = await kube.create(
            R.PODDISRUPTIONBUDGETS,
            {
                "metadata": {"name": "web"},
                "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}},
            },
            namespace="default",
        )
        # the disruption controller's job, done by hand
        status = {
            "observedGeneration": pdb["metadata"]["generation"],
            "disruptionsAllowed": 0,
            "currentHealthy": 3,
            "desiredHealthy": 3,
            "expectedPods": 3,
        }
        await kube.patch(
            R.PODDISRUPTIONBUDGETS, "web", {"status": status}, namespace="default", subresource="status"
        )

        drain = ("drain", "node-1", "--ignore-daemonsets", "--delete-emptydir-data")
        code, out = await _kubectl(cluster.kubeconfig_path, tmp_path, *drain, "--timeout=2s")
        assert code != 0, out
        assert "node/node-1 cordoned" in out
        assert "Cannot evict pod as it would violate the pod's disruption budget." in out
        assert (await kube.get(R.NODES, "node-1"))["spec"]["unschedulable"] is True
        assert "deletionTimestamp" not in (await kube.get(R.PODS, victim, namespace="default"))["metadata"]

        await kube.patch(
            R.PODDISRUPTIONBUDGETS,
            "web",
            {"status": {"disruptionsAllowed": 1}},
            namespace="default",
            subresource="status",
        )
        code, out = await _kubectl(cluster.kubeconfig_path, tmp_path, *drain, "--timeout=60s")
        assert code == 0, out
        assert f"pod/{victim} evicted" in out and "node/node-1 drained" in out
        remaining = await pods(kube, selector="app=web")
        assert sorted(p["spec"]["nodeName"] for p in remaining) == ["node-2", "node-3"]
        pdb = await kube.get(R.PODDISRUPTIONBUDGETS, "web", namespace="default")
        assert pdb["status"]["disruptionsAllowed"] == 0 and victim in pdb["status"]["disruptedPods"]
