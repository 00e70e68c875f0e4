"""The install as an operator runs it: `kubectl apply -k deploy/` in one go, safe beside any KCM.

With the real kubectl: `kubectl kustomize` renders deploy/ (only the controllers that add to
kube-controller-manager: nodemaintenance, maintenance-lease and replacement-surge, so a managed
cluster never gets a second ReplicaSet controller) and the overlay overlays/replace-kcm (every
controller, for self-managed control planes that disable KCM's, and the RBAC those need beyond
deploy/'s); both apply in one command to a fresh local cluster, CRD and namespaces ordered before
what needs them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import yaml

from apiclient.resources import DEPLOYMENTS
from controller_manager import rbac
from controller_manager.options import parse_run_args
from controller_manager.registry import default_registry
from localcluster.cluster import LocalCluster
from tests.podargs import expanded_args

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
REPLACE_KCM = ROOT / "overlays" / "replace-kcm"
ADDITIVE = {"nodemaintenance", "maintenance-lease", "replacement-surge"}
REPLACED = {
    "replicaset",
    "deployment",
    "disruption",
    "taint-eviction-controller",
    "node-lifecycle-controller",
}


async def _kustomize(path: Path) -> list[dict[str, Any]]:
    done = await anyio.run_process(["kubectl", "kustomize", str(path)])
    return [d for d in yaml.safe_load_all(done.stdout.decode()) if d]


def _controllers(docs: list[dict[str, Any]]) -> set[str]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    opts = parse_run_args(expanded_args(container)[1:], default_registry())
    return {d.name for d in default_registry().enabled(opts.controllers, opts.gates)}


async def test_the_default_adds_to_kcm_and_the_overlay_replaces_it() -> None:
    base, overlay = await _kustomize(DEPLOY), await _kustomize(REPLACE_KCM)
    assert _controllers(base) == ADDITIVE
    assert _controllers(overlay) >= ADDITIVE | REPLACED
    # the overlay changes the controllers and adds the RBAC they need beyond deploy/'s, nothing else
    extra = [d for d in overlay if d["metadata"]["name"] == rbac.OVERLAY_ROLE]
    assert {d["kind"] for d in extra} == {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    strip = [
        {**d, "spec": {**d.get("spec", {}), "template": None}} if d["kind"] == "Deployment" else d
        for d in base
    ]
    assert strip == [
        {**d, "spec": {**d.get("spec", {}), "template": None}} if d["kind"] == "Deployment" else d
        for d in overlay
        if d not in extra
    ]
    kinds = [d["kind"] for d in base]
    assert kinds.index("CustomResourceDefinition") < kinds.index("Deployment")
    assert kinds.index("Namespace") < kinds.index("ServiceAccount")


async def test_apply_k_works_in_one_go() -> None:
    async with LocalCluster(nodes=1, scheduler=False) as cluster:
        for path in (DEPLOY, REPLACE_KCM):
            applied = await anyio.run_process(
                ["kubectl", "--kubeconfig", cluster.kubeconfig_path, "apply", "-k", str(path)], check=False
            )
            assert applied.returncode == 0, applied.stderr.decode()
            kube = await cluster.client()
            try:
                deployment = await kube.get(DEPLOYMENTS, "aiokcm", namespace="aiokcm-system")
            finally:
                await kube.close()
            (container,) = deployment["spec"]["template"]["spec"]["containers"]
            wanted = (
                "--controllers=nodemaintenance,maintenance-lease,replacement-surge"
                if path == DEPLOY
                else "--controllers=*"
            )
            assert wanted in container["args"]
        out = applied.stdout.decode()
        assert "customresourcedefinition.apiextensions.k8s.io/nodemaintenances.maintenance.aiokcm.io" in out
