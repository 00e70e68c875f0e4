"""Rotating credentials against a real kube-apiserver: what its 401 does to a token file and a plugin.

A ServiceAccount's bound token (TokenRequest) is refused with 401 as soon as the ServiceAccount is
deleted, so the test revokes a token at will: the client must notice the 401, read the token file
again (or run its plugin again), and send the same request once more.
"""

from __future__ import annotations

import json
import ssl
import sys
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import anyio
import pytest
import yaml

from apiclient import KubeClient
from apiclient.config import build_api_client
from apiclient.metrics import REQUESTS_TOTAL
from apiclient.resources import Resource
from realcluster import ControlPlane, RealCluster

SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)


async def _token_for(admin: KubeClient, name: str) -> str:
    await admin.create(SERVICEACCOUNTS, {"metadata": {"name": name}}, namespace="default")
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    issued = await admin.request(
        "POST", f"/api/v1/namespaces/default/serviceaccounts/{name}/token", body=body
    )
    return str(issued["status"]["token"])


def _kubeconfig(tmp_path: Path, plane: ControlPlane, user: dict[str, object]) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "real",
        "clusters": [
            {"name": "real", "cluster": {"server": plane.url, "certificate-authority": str(plane.ca_file)}}
        ],
        "contexts": [{"name": "real", "context": {"cluster": "real", "user": "rotating"}}],
        "users": [{"name": "rotating", "user": user}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def _until_refused(plane: ControlPlane, token: str) -> None:
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    async with aiohttp.ClientSession() as session:
        with anyio.fail_after(60):
            while True:
                async with session.get(
                    plane.url + "/api", ssl=context, headers={"Authorization": f"Bearer {token}"}
                ) as response:
                    if response.status == 401:
                        return
                await anyio.sleep(0.5)


@pytest.mark.parametrize("source", ["tokenFile", "exec"])
async def test_a_revoked_token_is_replaced_after_the_real_servers_401(
    real_bare_plane: ControlPlane, tmp_path: Path, source: str
) -> None:
    async with RealCluster(real_bare_plane, nodes=0, kubelets=False) as cluster:
        admin = await cluster.client()
        try:
            first, second = await _token_for(admin, "first"), await _token_for(admin, "second")
            current = tmp_path / "token"
            current.write_text(first)
            if source == "tokenFile":
                user: dict[str, object] = {"tokenFile": str(current)}
            else:
                script = (
                    "import json, sys; print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
                    "'kind': 'ExecCredential', 'status': {'token': open(sys.argv[1]).read()}}))"
                )
                user = {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "interactiveMode": "Never",
                        "command": sys.executable,
                        "args": ["-c", script, str(current)],
                    }
                }
            kube = KubeClient(
                await build_api_client(kubeconfig=str(_kubeconfig(tmp_path, real_bare_plane, user)))
            )
            try:
                review = {
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SelfSubjectRulesReview",
                    "spec": {"namespace": "default"},
                }
                path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
                assert json.dumps(await kube.request("POST", path, body=review))  # authenticated as "first"
                current.write_text(second)  # the issuer rotates the token...
                await admin.delete(
                    SERVICEACCOUNTS, "first", namespace="default"
                )  # ...and the old one is revoked
                await _until_refused(real_bare_plane, first)  # past kube-apiserver's token cache
                refused = REQUESTS_TOTAL.labels("401", "POST", urlsplit(real_bare_plane.url).netloc)
                before = refused._value.get()
                await kube.request("POST", path, body=review)  # 401, new credentials, the same request again
                assert refused._value.get() == before + 1  # the server did refuse the old token once
            finally:
                await kube.close()
        finally:
            for name in ("first", "second"):
                try:
                    await admin.delete(SERVICEACCOUNTS, name, namespace="default")
                except Exception:
                    pass
            await admin.close()
