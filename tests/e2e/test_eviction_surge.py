"""The real `kubectl drain` with aiokcm's eviction webhook on: no app ever at zero, no drainer changed.

The layout of the zero-downtime drain test (`single`, `triple`, and `guarded` with a PDB
`minAvailable: 1`, every pod on the node to drain). The manager runs in this process as it runs in
a cluster (`Manager` from the CLI's own options): the ReplicaSet, Deployment and disruption
controllers plus the eviction-surge webhook, its certificate generated and kept in a Secret, its CA
patched into a ValidatingWebhookConfiguration built from deploy/webhook.yaml (with a
`clientConfig.url` to the local port instead of the in-cluster Service). kube-apiserver calls the
webhook over HTTPS, verifying it against that caBundle.

Then aiokcm is stopped, the configuration left in place: kubectl drain behaves as without the
webhook (failurePolicy Ignore): the eviction of a single-replica app's pod passes at once.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from apiclient import ApiError, KubeClient
from apiclient.resources import (
    DEPLOYMENTS,
    ENDPOINTS,
    NODES,
    PODDISRUPTIONBUDGETS,
    VALIDATINGWEBHOOKCONFIGURATIONS,
)
from controller_manager.app import Manager
from controller_manager.options import parse_run_args
from controller_manager.registry import default_registry
from controllers.evictionsurge.controller import WEBHOOK_PATH
from localcluster.demo import NS, deployment, pdb
from realcluster import RealCluster
from realcluster.ports import free_port
from tests.backends import cluster_on_backend
from tests.e2e.test_drain_zero_downtime import APPS, AvailabilityWatch, _all_available_on, _app_pods
from tests.support.waiting import eventually

TARGET = "node-1"
WEBHOOK = Path(__file__).resolve().parents[2] / "deploy" / "webhook.yaml"

pytestmark = pytest.mark.backends("local", "real")


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with cluster_on_backend(request, nodes=3, pod_start_delay=0.2, termination_cap=0.5) as c:
        yield c


def webhook_configuration(port: int) -> dict[str, Any]:
    """deploy/webhook.yaml's configuration, reaching this process's port by URL."""
    config: dict[str, Any] = next(
        d
        for d in yaml.safe_load_all(WEBHOOK.read_text())
        if d and d["kind"] == "ValidatingWebhookConfiguration"
    )
    config = copy.deepcopy(config)
    for hook in config["webhooks"]:
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{WEBHOOK_PATH}"}
    return config


async def kubectl(cluster: Any, *args: str) -> tuple[int, str]:
    result = await anyio.run_process(["kubectl", "--kubeconfig", cluster.kubeconfig_path, *args], check=False)
    return result.returncode, result.stdout.decode() + result.stderr.decode()


async def place_apps_on_target(kube: KubeClient, others: list[str]) -> None:
    for n in others:
        await kube.patch(NODES, n, {"spec": {"unschedulable": True}})
    for app in APPS:
        await kube.create(DEPLOYMENTS, deployment(app), namespace=NS)
        if app.pdb_min_available is not None:
            await kube.create(PODDISRUPTIONBUDGETS, pdb(app), namespace=NS)
    await eventually(
        lambda: _all_available_on(kube, {TARGET}), f"every app available on {TARGET}", timeout=120
    )
    for n in others:
        await kube.patch(NODES, n, {"spec": {"unschedulable": None}})


async def test_kubectl_drain_surges_through_the_webhook_and_fails_open_without_aiokcm(
    cluster: Any, kube: KubeClient
) -> None:
    real = isinstance(cluster, RealCluster)  # the local cluster serves no Endpoints
    nodes = sorted(n["metadata"]["name"] for n in await kube.list_all(NODES))
    others = [n for n in nodes if n != TARGET]
    port = free_port()
    await kube.create(VALIDATINGWEBHOOKCONFIGURATIONS, webhook_configuration(port))
    opts = parse_run_args(
        [
            "--kubeconfig",
            cluster.kubeconfig_path,
            "--leader-elect=false",
            "--secure-port=0",
            "--controllers=replicaset,deployment,disruption,eviction-surge",
            "--feature-gates=DeclarativeNodeMaintenance=true,NodeMaintenanceDeployment=true,EvictionSurge=true",
            f"--webhook-port={port}",
            "--webhook-bind-address=127.0.0.1",
            "--webhook-hosts=127.0.0.1",
            "--webhook-namespace=kube-system",
            *(["--webhook-advertise-address=10.255.0.1"] if real else []),
        ],
        default_registry(),
    )
    try:
        async with anyio.create_task_group() as tg:
            manager = Manager(opts, kube)
            tg.start_soon(lambda: manager.run(handle_signals=False))
            await place_apps_on_target(kube, others)

            async def guarded_budget_computed() -> bool:
                status = (await kube.get(PODDISRUPTIONBUDGETS, "guarded", namespace=NS)).get("status") or {}
                return status.get("currentHealthy") == 1 and status.get("disruptionsAllowed") == 0

            await eventually(guarded_budget_computed, "guarded's PDB computed", timeout=60)

            async def ca_bundle_installed() -> bool:
                config = await kube.get(VALIDATINGWEBHOOKCONFIGURATIONS, opts.webhook.configuration)
                return all(h["clientConfig"].get("caBundle") for h in config["webhooks"])

            await eventually(
                ca_bundle_installed, "aiokcm patched its CA into the webhook configuration", timeout=30
            )

            async def service_points_at_the_leader() -> bool:
                try:
                    endpoints = await kube.get(ENDPOINTS, opts.webhook.service, namespace="kube-system")
                except ApiError:
                    return False
                return bool(
                    endpoints.get("subsets")
                    == [
                        {
                            "addresses": [{"ip": "10.255.0.1"}],
                            "ports": [{"name": "webhook", "port": manager.webhook_port, "protocol": "TCP"}],
                        }
                    ]
                )

            if real:
                await eventually(
                    service_points_at_the_leader, "the leader's address in the webhook Endpoints", timeout=30
                )

            (single,) = (await _app_pods(kube))["single"]
            name = single["metadata"]["name"]
            # A dry run passes untouched: nothing is evicted, nothing is asked of the owner.
            await kube.evict(NS, name, delete_options={"dryRun": ["All"]})
            # The real eviction is held back, as the API server returns the webhook's Status.
            with pytest.raises(ApiError) as held:
                await kube.evict(NS, name)
            assert held.value.status == 429 and held.value.reason == "TooManyRequests", held.value.body
            assert "a replacement for pod" in held.value.message and "being started" in held.value.message
            # No Retry-After: client-go would resend silently, hiding kubectl's retry line.
            assert held.value.retry_after_seconds is None

            watch = AvailabilityWatch(APPS)
            async with anyio.create_task_group() as watching:
                await watching.start(lambda task_status: watch.run(kube, task_status=task_status))
                assert watch.available() == {a.name: a.replicas for a in APPS}
                code, out = await kubectl(cluster, "drain", TARGET, "--ignore-daemonsets", "--timeout=150s")
                assert code == 0, f"kubectl drain failed:\n{out}"
                assert f"node/{TARGET} drained" in out
                assert "(will retry after 5s)" in out and "a replacement for pod" in out, out
                await eventually(
                    lambda: _all_available_on(kube, set(others)),
                    "every app back at full strength off the drained node",
                    timeout=120,
                )
                watching.cancel_scope.cancel()
            for app in APPS:
                assert watch.least[app.name] >= 1, f"{app.name} went to zero: least per app {watch.least}"

            manager.stop()
        # aiokcm is gone, its webhook configuration stays: evictions behave as without it.
        (single,) = (await _app_pods(kube))["single"]
        where = single["spec"]["nodeName"]
        code, out = await kubectl(
            cluster, "drain", where, "--pod-selector=app=single", "--ignore-daemonsets", "--timeout=60s"
        )
        assert code == 0, out
        assert f"pod/{single['metadata']['name']} evicted" in out and "will retry" not in out, out
    finally:
        await kube.delete(VALIDATINGWEBHOOKCONFIGURATIONS, opts.webhook.configuration)
        if real:
            try:
                await kube.delete(ENDPOINTS, opts.webhook.service, namespace="kube-system")
            except ApiError as exc:
                if not exc.not_found:
                    raise
