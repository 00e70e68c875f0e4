"""The embedded cluster stands in for deploy/'s install: the namespaces it makes exist."""

from __future__ import annotations

from pathlib import Path

import yaml

from apiclient import KubeClient
from apiclient import resources as R
from apiclient.config import build_api_client
from controller_manager.embedded import load_plugin
from localcluster.embedded import INSTALLED_NAMESPACES

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_the_embedded_install_makes_the_namespaces_deploy_makes() -> None:
    made = {d["metadata"]["name"] for d in yaml.safe_load_all((DEPLOY / "namespace.yaml").read_text()) if d}
    assert set(INSTALLED_NAMESPACES) == made


async def test_the_managers_namespace_exists_in_the_embedded_cluster() -> None:
    """`aiokcm run --embedded` writes its webhook certificate's Secret there."""
    plugin = load_plugin()
    async with plugin.start_embedded(nodes=1) as kubeconfig:
        kube = KubeClient(await build_api_client(kubeconfig=kubeconfig))
        try:
            for name in INSTALLED_NAMESPACES:
                ns = await kube.get(R.NAMESPACES, name)
                assert ns["status"]["phase"] == "Active"
            secret = {"metadata": {"name": "aiokcm-webhook-cert"}, "type": "kubernetes.io/tls"}
            await kube.create(
                R.SECRETS, {**secret, "data": {"tls.crt": "", "tls.key": ""}}, namespace="aiokcm-system"
            )
        finally:
            await kube.close()
