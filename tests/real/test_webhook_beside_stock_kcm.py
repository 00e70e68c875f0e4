"""The real `kubectl drain` beside the stock KCM (all of its controllers), aiokcm's webhook on: zero downtime.

The managed-cluster layout: kube-controller-manager runs every controller it has, so its ReplicaSet
and Deployment controllers own the apps and answer no EvacuationRequest. aiokcm runs what
deploy/deployment.yaml gives it (the default install's controllers, its leader election, its API
rate limits) plus the eviction webhook as deploy/webhook.yaml asks: the `EvictionSurge` gate and the
`eviction-surge` controller, under deploy/rbac.yaml plus deploy/webhook-rbac.yaml as checked in,
as its own ServiceAccount (a missing grant is a 403). deploy/webhook.yaml is applied as
it is, but for its `clientConfig`, which reaches this process's port by URL.

The layout of the zero-downtime drain test (`single`, `triple`, `guarded` with a PDB
`minAvailable: 1`; all `maxSurge: 1, maxUnavailable: 0`; every pod on the node to drain). kubectl
drain's evictions are held back (429) while the replacement surge, through the public API, starts a
copy elsewhere and hands it to KCM's ReplicaSet controller, which deletes the departing pod. A copy
not yet handed over is not counted as available (it serves, matching the Deployment's selector, but
it is none of the ReplicaSet's replicas): each app must keep its replicas without it.
"""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from structlog.testing import capture_logs

from apiclient import ApiError, KubeClient
from apiclient.config import build_api_client
from apiclient.resources import (
    DEPLOYMENTS,
    ENDPOINTS,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
    VALIDATINGWEBHOOKCONFIGURATIONS,
)
from controller_manager import rbac
from controller_manager.app import Manager
from controller_manager.options import ManagerOptions, parse_run_args
from controller_manager.registry import default_registry
from controllers.evictionsurge.controller import WEBHOOK_PATH, EvictionSurgeController
from controllers.replacementsurge.copies import PREVIOUS_COST_ANNOTATION, REPLACES_LABEL
from localcluster.demo import NS, App, ensure_crd
from realcluster import ControlPlane, RealCluster
from realcluster.ports import free_port
from tests.e2e.test_drain_zero_downtime import APPS, AvailabilityWatch, _all_available_on, _app_pods
from tests.e2e.test_eviction_surge import TARGET, WEBHOOK, kubectl, place_apps_on_target
from tests.podargs import expanded_args
from tests.real.test_deploy_rbac import _service_account_token
from tests.support.manifests import kubectl_apply
from tests.support.waiting import eventually

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# What deploy/webhook.yaml asks of the default install: its controllers plus `eviction-surge`, its
# gates plus `EvictionSurge` (a gate alone enables nothing: --controllers names the controllers).
CONTROLLERS = "nodemaintenance,maintenance-lease,replacement-surge,eviction-surge"
GATES = "DeclarativeNodeMaintenance=true,NodeMaintenanceDeployment=true,NodeMaintenanceLease=true,EvictionSurge=true"
# The pod IP the leader writes into the webhook Service's Endpoints (loopback is refused there).
POD_IP = "10.255.0.1"
MANIFEST_ORDER = ("Namespace", "CustomResourceDefinition", "ServiceAccount")


# The session's stock-KCM plane (all of KCM's controllers, as on managed clusters), shared with the
# other stock-KCM modules on one worker.
pytestmark = pytest.mark.xdist_group("stock-kcm")


@pytest.fixture
async def cluster(real_stock_plane: ControlPlane) -> AsyncIterator[RealCluster]:
    async with RealCluster(real_stock_plane, nodes=3, pod_start_delay=0.2, termination_cap=0.5) as real:
        yield real


def deployed_container() -> dict[str, Any]:
    docs = yaml.safe_load_all((DEPLOY / "deployment.yaml").read_text())
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def manager_args(kubeconfig: Path, webhook_port: int) -> list[str]:
    """deploy/deployment.yaml's container arguments with deploy/webhook.yaml's additions, served on
    loopback: the secure port off (nothing here scrapes it), the webhook on a free port whose
    certificate names 127.0.0.1 (the configuration's URL)."""
    args = expanded_args(deployed_container(), pod_ip=POD_IP)
    assert args[0] == "run"
    out: list[str] = []
    for arg in args[1:]:
        if arg.startswith("--controllers="):
            out.append(f"{arg},eviction-surge")
        elif arg.startswith("--feature-gates="):
            out.append(f"{arg},EvictionSurge=true")
        elif not arg.startswith(("--bind-address", "--secure-port")):
            out.append(arg)
    assert f"--controllers={CONTROLLERS}" in out and f"--feature-gates={GATES}" in out, out
    return [
        *out,
        "--secure-port=0",
        "--kubeconfig",
        str(kubeconfig),
        f"--webhook-port={webhook_port}",
        "--webhook-bind-address=127.0.0.1",
        "--webhook-hosts=127.0.0.1",
    ]


def install_manifests(webhook_port: int) -> list[dict[str, Any]]:
    """What an operator applies: deploy/'s namespaces, CRD, ServiceAccount and RBAC, and
    deploy/webhook.yaml with its RBAC, its clientConfig pointed at `webhook_port`."""
    docs: list[dict[str, Any]] = []
    for path in (
        DEPLOY / "namespace.yaml",
        *sorted((DEPLOY / "crds").glob("*.yaml")),
        DEPLOY / "serviceaccount.yaml",
        rbac.MANIFEST,
        rbac.WEBHOOK_MANIFEST,
    ):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in yaml.safe_load_all(WEBHOOK.read_text()):
        if not doc:
            continue
        doc = copy.deepcopy(doc)
        if doc["kind"] == "ValidatingWebhookConfiguration":
            for hook in doc["webhooks"]:
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{webhook_port}{WEBHOOK_PATH}"}
        docs.append(doc)
    return sorted(docs, key=lambda d: MANIFEST_ORDER.index(d["kind"]) if d["kind"] in MANIFEST_ORDER else 9)


class StrictWatch(AvailabilityWatch):
    """Availability as KCM's ReplicaSet controller counts it: a copy not yet handed over is none of
    the app's replicas. Every copy ever seen is remembered, by the UID of the pod it replaces."""

    def __init__(self, apps: tuple[App, ...]) -> None:
        super().__init__(apps)
        self.copies: dict[str, set[str]] = {}

    def available(self) -> dict[str, int]:
        counted = self.pods
        self.pods = {n: p for n, p in counted.items() if REPLACES_LABEL not in _labels(p)}
        try:
            return super().available()
        finally:
            self.pods = counted

    def _record(self) -> None:
        super()._record()
        for name, pod in self.pods.items():
            replaced = _labels(pod).get(REPLACES_LABEL)
            if replaced:
                self.copies.setdefault(replaced, set()).add(name)


def _labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


async def _webhook_ready(kube: KubeClient, manager: Manager, opts: ManagerOptions) -> bool:
    """The leader answers from synced caches, its CA is in the configuration, and the Service's
    Endpoints name it: what a drain needs before its first eviction."""
    if not any(isinstance(c, EvictionSurgeController) and c.synced() for c in manager.controllers):
        return False
    config = await kube.get(VALIDATINGWEBHOOKCONFIGURATIONS, opts.webhook.configuration)
    if not all(h["clientConfig"].get("caBundle") for h in config["webhooks"]):
        return False
    try:
        endpoints = await kube.get(ENDPOINTS, opts.webhook.service, namespace=opts.webhook.namespace)
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    return bool(
        endpoints.get("subsets")
        == [
            {
                "addresses": [{"ip": POD_IP}],
                "ports": [{"name": "webhook", "port": manager.webhook_port, "protocol": "TCP"}],
            }
        ]
    )


def _events(logs: Sequence[Mapping[str, Any]], event: str) -> list[Mapping[str, Any]]:
    return [entry for entry in logs if entry.get("event") == event]


def trail(logs: Sequence[Mapping[str, Any]]) -> str:
    """What the two surge controllers did, in order: the story a failed assertion needs."""
    mine = ("replacement-surge", "eviction-surge")
    return "\n".join(
        " ".join(f"{k}={v}" for k, v in e.items() if k not in ("controller", "log_level"))
        for e in logs
        if e.get("controller") in mine and e.get("log_level") != "debug"
    )


@pytest.mark.timeout(120)
async def test_kubectl_drain_beside_stock_kcm_keeps_every_app_at_its_replicas(
    cluster: RealCluster, kube: KubeClient, tmp_path: Path
) -> None:
    started = time.monotonic()
    nodes = sorted(n["metadata"]["name"] for n in await kube.list_all(NODES))
    others = [n for n in nodes if n != TARGET]
    port = free_port()
    manifest = tmp_path / "install.yaml"
    manifest.write_text(yaml.safe_dump_all(install_manifests(port), sort_keys=False))
    await kubectl_apply(cluster.kubeconfig_path, [manifest])
    await ensure_crd(kube)
    token = await _service_account_token(kube)
    opts = parse_run_args(
        manager_args(cluster.plane.kubeconfig_for_token("aiokcm-sa", token), port), default_registry()
    )
    client = KubeClient(
        await build_api_client(kubeconfig=opts.kubeconfig), qps=opts.kube_api_qps, burst=opts.kube_api_burst
    )
    replicas_before = {a.name: a.replicas for a in APPS}
    watch = StrictWatch(APPS)
    exit_codes: list[int] = []
    try:
        with capture_logs() as logs:
            async with anyio.create_task_group() as tg:
                manager = Manager(opts, client)

                async def run_manager() -> None:
                    exit_codes.append(await manager.run(handle_signals=False))

                tg.start_soon(run_manager)
                await place_apps_on_target(kube, others)

                async def guarded_budget_computed() -> bool:
                    status = (await kube.get(PODDISRUPTIONBUDGETS, "guarded", namespace=NS)).get(
                        "status"
                    ) or {}
                    return status.get("currentHealthy") == 1 and status.get("disruptionsAllowed") == 0

                await eventually(guarded_budget_computed, "KCM computed guarded's PDB", timeout=60)
                await eventually(
                    lambda: _webhook_ready(kube, manager, opts), "aiokcm's webhook answering", timeout=60
                )
                originals = {p["metadata"]["uid"] for pods in (await _app_pods(kube)).values() for p in pods}
                async with anyio.create_task_group() as watching:
                    await watching.start(lambda task_status: watch.run(kube, task_status=task_status))
                    assert watch.available() == replicas_before
                    drain_started = time.monotonic()
                    code, out = await kubectl(
                        cluster,
                        "drain",
                        TARGET,
                        "--ignore-daemonsets",
                        "--delete-emptydir-data",
                        "--timeout=60s",
                    )
                    drain_seconds = time.monotonic() - drain_started
                    assert code == 0, f"kubectl drain failed:\n{out}\n{trail(logs)}"
                    assert f"node/{TARGET} drained" in out, out
                    # The webhook held evictions back through kubectl's own retries.
                    assert "(will retry after 5s)" in out and "a replacement for pod" in out, out
                    await eventually(
                        lambda: _all_available_on(kube, set(others)),
                        "every app at full strength off the drained node",
                        timeout=30,
                    )
                    watching.cancel_scope.cancel()
                manager.stop()
    finally:
        await client.close()

    assert exit_codes == [0], trail(logs)
    assert watch.events >= 2 * len(originals), (
        f"the watch saw too little of the drain ({watch.events} pod events)"
    )
    for app in APPS:
        assert watch.least[app.name] >= app.replicas, (
            f"{app.name} went below its {app.replicas} replicas during the drain: least per app "
            f"{watch.least}\n{trail(logs)}"
        )
    # One copy per departing pod: no pod evicted without its replacement, no surge made twice.
    assert set(watch.copies) == originals, f"{watch.copies} for {originals}\n{trail(logs)}"
    assert all(len(names) == 1 for names in watch.copies.values()), f"{watch.copies}\n{trail(logs)}"
    for app in APPS:
        d = await kube.get(DEPLOYMENTS, app.name, namespace=NS)
        assert d["spec"]["replicas"] == app.replicas and d["metadata"]["generation"] == 1, d["spec"]
    for pod in await kube.list_all(PODS, namespace=NS):
        meta = pod["metadata"]
        assert REPLACES_LABEL not in (meta.get("labels") or {}), meta
        assert PREVIOUS_COST_ANNOTATION not in (meta.get("annotations") or {}), meta

    handed = _events(logs, "replacement handed to its ReplicaSet")
    assert len(handed) == len(originals), trail(logs)
    assert not _events(logs, "evacuation handed back to the drain"), trail(logs)
    refused = [e for e in logs if ": 403 " in str(e) or "Forbidden" in str(e)]
    assert not refused, refused[:5]
    assert "Forbidden" not in out, out
    errors = [e for e in logs if e.get("log_level") in ("error", "critical")]
    assert not errors, errors[:5]
    warnings = [e for e in logs if e.get("log_level") == "warning"]
    print(
        f"kubectl drain {drain_seconds:.1f} s, test {time.monotonic() - started:.1f} s, "
        f"{watch.events} pod events, warnings: {warnings}"
    )
