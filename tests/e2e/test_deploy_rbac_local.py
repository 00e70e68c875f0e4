"""deploy/ on the local cluster with authorization enforced: every controller at work, with nothing but
deploy/rbac.yaml.

The same check as tests/real/test_deploy_rbac.py, on the embedded cluster (`authz=True`), so it
runs on every machine: the manifests are applied with kubectl, the manager runs as a process
with only its ServiceAccount's token (TokenRequest), its secure port reviews callers through
that ServiceAccount, and a Prometheus-like ServiceAccount bound to `aiokcm-metrics-reader`
scrapes it. The demo drain (nodemaintenance, maintenance leases, deployment, replicaset,
disruption, events, leader election), then a kubelet that stops (node lifecycle taints the node
and marks its pods not ready; taint eviction deletes the pod that does not tolerate it). A grant
the code needs and deploy/rbac.yaml lacks is a 403, which fails the test.
"""

from __future__ import annotations

import io
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from apiclient import KubeClient
from apiclient.resources import NODES, PODS
from localcluster.cluster import LocalCluster
from localcluster.demo import APPS, run_demo
from tests.localcluster.living import eventually
from tests.real.test_deploy_rbac import (
    MANIFESTS,
    ROOT,
    _free_port,
    _metric_total,
    _scraper_token,
    _service_account_token,
    manager_args,
)

FAST_NODE_LIFECYCLE = ("--node-monitor-grace-period=3s", "--node-startup-grace-period=5s", "--node-eviction-rate=10")
UNREACHABLE = "node.kubernetes.io/unreachable"
# Naming the key keeps DefaultTolerationSeconds away; the value is one the taint never has.
UNTOLERATING = [{"key": k, "operator": "Equal", "value": "never", "effect": "NoExecute"}
                for k in (UNREACHABLE, "node.kubernetes.io/not-ready")]


async def _lose_a_node(cluster: LocalCluster, admin: KubeClient) -> None:
    node = "node-3"
    await admin.create(PODS, {"metadata": {"name": "victim", "namespace": "default"},
                              "spec": {"nodeName": node, "tolerations": UNTOLERATING,
                                       "containers": [{"name": "c", "image": "busybox"}]}}, namespace="default")
    cluster.kubelets[node].stop()

    async def state() -> tuple[bool, bool]:
        taints = (await admin.get(NODES, node)).get("spec", {}).get("taints") or []
        pods = (await admin.list(PODS, namespace="default")).get("items") or []
        # Deleted: terminating for good, as on a real cluster, since no kubelet is left to confirm it.
        victim = [p for p in pods if p["metadata"]["name"] == "victim" and not p["metadata"].get("deletionTimestamp")]
        return any(t.get("key") == UNREACHABLE for t in taints), not victim

    with anyio.fail_after(60):
        await eventually(state, lambda seen: seen == (True, True), interval=0.2)


@pytest.mark.timeout(180)
async def test_deploy_manifests_drain_on_the_enforcing_local_cluster(tmp_path: Path) -> None:
    async with LocalCluster(nodes=3, pod_start_delay=0.2, termination_cap=0.5, authz=True) as cluster:
        applied = await anyio.run_process(
            ["kubectl", "--kubeconfig", cluster.kubeconfig_path, "apply",
             *[arg for m in MANIFESTS for arg in ("-f", str(m))]], check=False)
        assert applied.returncode == 0, applied.stderr.decode()
        admin = await cluster.client()
        port = _free_port()
        log_path = tmp_path / "aiokcm-sa.log"
        manager: Any = None
        try:
            token = await _service_account_token(admin)
            kubeconfig = tmp_path / "aiokcm-sa.kubeconfig"
            kubeconfig.write_text(yaml.safe_dump(cluster.kubeconfig_for_token(token)))
            with log_path.open("wb") as log:
                manager = await anyio.open_process(
                    [str(Path(sys.executable).with_name("aiokcm")), *manager_args(port, kubeconfig), *FAST_NODE_LIFECYCLE],
                    stdout=log, stderr=log, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            result = await run_demo(admin, out=io.StringIO())
            await _lose_a_node(cluster, admin)
            scraper = await _scraper_token(admin)
            forbidden = await _metric_total(port, "403", scraper)
            requests = await _metric_total(port, "200", scraper) + await _metric_total(port, "201", scraper)
            manager.send_signal(signal.SIGTERM)
            with anyio.fail_after(30):
                code = await manager.wait()
        finally:
            if manager is not None and manager.returncode is None:
                manager.kill()
                await manager.wait()
            await admin.close()
    output = log_path.read_text(errors="replace")
    assert result.drained, output[-3000:]
    assert result.zero_downtime(APPS), f"least available while draining: {result.least_available}"
    assert requests > 0
    assert forbidden == 0, [line for line in output.splitlines() if "403" in line or "orbidden" in line][:10]
    assert "Forbidden" not in output
    assert code == 0, output[-2000:]
    assert token not in output
