"""deploy/ as an operator applies it, aiokcm under its own ServiceAccount on a real kube-apiserver.

RBAC is enforced, and the manager holds nothing but its ServiceAccount's token (from the
TokenRequest API), so a grant the code needs and the install's manifests lack shows up as a 403.
The demo's drain (a single-replica app with a PDB and a three-replica app, the node of the single
replica drained through a NodeMaintenance) must finish with zero downtime and no 403 at all, in
both layouts people run:
- `default`: deploy/ as applied beside the stock kube-controller-manager running all of its
  controllers (every managed cluster): the surge goes through the public API (replacement-surge);
- `replace-kcm`: overlays/replace-kcm, every aiokcm controller, KCM without the ones it replaces.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
import yaml

from apiclient import KubeClient
from apiclient.resources import DEPLOYMENTS
from localcluster.demo import APPS, NS, run_demo
from realcluster import KCM_BESIDE_AIOKCM, ControlPlane, RealCluster
from realcluster.ports import free_port
from tests.backends import real_assets_or_skip
from tests.podargs import expanded_args
from tests.support.manifests import kubectl_apply

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAY = ROOT / "overlays" / "replace-kcm"
MANIFESTS = [DEPLOY / "crds", DEPLOY / "namespace.yaml", DEPLOY / "serviceaccount.yaml", DEPLOY / "rbac.yaml"]
LAYOUTS = {
    "default": MANIFESTS,
    "replace-kcm": [*MANIFESTS, OVERLAY / "rbac-extra.yaml"],
}


def manager_args(port: int, kubeconfig: Path, layout: str = "replace-kcm") -> list[str]:
    """The container's arguments as the layout renders deploy/deployment.yaml (`replace-kcm`: every
    controller, so every grant is exercised; `default`: deploy/ as it is), served on loopback.

    In a pod the secure port reviews callers through the in-cluster ServiceAccount; here the same
    ServiceAccount's kubeconfig is named explicitly, so deploy/rbac.yaml's delegation grants are
    what lets a scrape through."""
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(OVERLAY if layout == "replace-kcm" else DEPLOY)],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    docs = list(yaml.safe_load_all(rendered))
    deployment = next(d for d in docs if d and d.get("kind") == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = [a for a in expanded_args(container) if not a.startswith(("--bind-address", "--secure-port"))]
    return [
        *args,
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--kubeconfig",
        str(kubeconfig),
        "--authentication-kubeconfig",
        str(kubeconfig),
        "--authorization-kubeconfig",
        str(kubeconfig),
    ]


@pytest.fixture(params=sorted(LAYOUTS))
async def layout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def cluster(layout: str) -> AsyncIterator[RealCluster]:
    """A fresh real control plane of this test's own, simulated kubelets, and KCM: all of its
    controllers beside the default install, the rest beside the replace-KCM overlay."""
    kcm = "*" if layout == "default" else KCM_BESIDE_AIOKCM
    with ControlPlane(real_assets_or_skip(), kcm_controllers=kcm) as plane:
        async with RealCluster(plane, nodes=3) as real:
            yield real


async def _service_account_token(admin: KubeClient, name: str = "aiokcm") -> str:
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    issued = await admin.request(
        "POST", f"/api/v1/namespaces/aiokcm-system/serviceaccounts/{name}/token", body=body
    )
    return str(issued["status"]["token"])


async def _scraper_token(admin: KubeClient) -> str:
    """A Prometheus-like ServiceAccount bound to deploy/rbac.yaml's aiokcm-metrics-reader, and nothing else."""
    await admin.request(
        "POST",
        "/api/v1/namespaces/aiokcm-system/serviceaccounts",
        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "prometheus"}},
    )
    await admin.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        body={
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "prometheus-aiokcm-metrics"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "aiokcm-metrics-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "aiokcm-system"}],
        },
    )
    return await _service_account_token(admin, "prometheus")


async def admin_replicas(cluster: RealCluster, name: str) -> int:
    client = await cluster.client()
    try:
        d = await client.get(DEPLOYMENTS, name, namespace=NS)
    finally:
        await client.close()
    return int(d["spec"]["replicas"])


async def _metric_total(port: int, code: str, token: str) -> float:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession() as s,
        s.get(f"https://127.0.0.1:{port}/metrics", headers=headers, ssl=False) as r,
    ):
        assert r.status == 200, await r.text()
        text = await r.text()
    pattern = re.compile(r'^rest_client_requests_total\{[^}]*code="' + code + r'"[^}]*\} (\S+)$', re.M)
    return sum(float(v) for v in pattern.findall(text))


@pytest.mark.timeout(240)
async def test_deploy_manifests_run_the_demo_drain_without_downtime_or_403(
    cluster: RealCluster, layout: str
) -> None:
    await kubectl_apply(cluster.kubeconfig_path, LAYOUTS[layout])
    admin = await cluster.client()
    port = free_port()
    log_path = cluster.plane.workdir / "aiokcm-sa.log"
    manager: Any = None
    try:
        token = await _service_account_token(admin)
        kubeconfig = cluster.plane.kubeconfig_for_token("aiokcm-sa", token)
        with log_path.open("wb") as log:
            manager = await anyio.open_process(
                [str(Path(sys.executable).with_name("aiokcm")), *manager_args(port, kubeconfig, layout)],
                stdout=log,
                stderr=log,
                cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        result = await run_demo(admin, out=io.StringIO())
        scraper = await _scraper_token(admin)  # reviewed by the API server through aiokcm's ServiceAccount
        forbidden = await _metric_total(port, "403", scraper)
        requests = await _metric_total(port, "200", scraper) + await _metric_total(port, "201", scraper)
        started = time.monotonic()
        manager.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            code = await manager.wait()
        stop_seconds = time.monotonic() - started
    finally:
        if manager is not None and manager.returncode is None:
            manager.kill()
            await manager.wait()
        await admin.close()
    output = log_path.read_text(errors="replace")
    assert result.drained, output[-3000:]
    assert result.zero_downtime(APPS), f"least available while draining: {result.least_available}"
    assert requests > 0  # the manager did its work through the API, as its ServiceAccount
    assert forbidden == 0, [line for line in output.splitlines() if "403" in line or "orbidden" in line][:10]
    assert "Forbidden" not in output
    assert code == 0, output[-2000:]
    assert stop_seconds < 25  # within --shutdown-grace-period (20 s) plus the event flush
    assert token not in output
    if layout == "default":
        # Beside KCM's own controllers the surge went through the public API, and nothing that an
        # autoscaler or GitOps owns was written.
        assert "replacement handed to its ReplicaSet" in output, output[-3000:]
        assert "evacuation handed back to the drain" not in output
        for app in APPS:
            assert (await admin_replicas(cluster, app.name)) == app.replicas
