"""The secure port as KCM serves it: TLS, callers vouched for by the API server, paths authorized by RBAC.

The manager runs in-process with `--authentication-kubeconfig`/`--authorization-kubeconfig`
pointing at the cluster; its callers are ServiceAccounts with tokens from the TokenRequest API,
one bound to a ClusterRole granting `get` on the non-resource URL `/metrics`, one bound to
nothing. The answers are those measured on kube-controller-manager v1.24 but one: no credential
is a 401 on /metrics (KCM reviews the anonymous user and answers 403; aiokcm answers as
controller-runtime's metrics filter and kube-rbac-proxy) and a 200 on the always-allowed
/healthz; a token the API server rejects is a 401, a valid token without the grant a 403.
"""

from __future__ import annotations

import datetime as dt
import functools
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from apiclient import KubeClient
from apiclient.errors import ApiError
from controller_manager.app import Manager
from controller_manager.options import LeaderElectionOptions, ManagerOptions, ServingOptions
from realcluster.ports import free_port
from tests.support.waiting import eventually

NS = "secure-serving"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


@dataclass
class Callers:
    scraper: str
    nobody: str


async def _token(kube: KubeClient, name: str) -> str:
    await kube.request(
        "POST",
        f"/api/v1/namespaces/{NS}/serviceaccounts",
        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    issued = await kube.request(
        "POST",
        f"/api/v1/namespaces/{NS}/serviceaccounts/{name}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    return str(issued["status"]["token"])


async def _delete(kube: KubeClient, path: str) -> None:
    try:
        await kube.request("DELETE", path)
    except ApiError as exc:
        if not exc.not_found:
            raise


@pytest.fixture
async def callers(kube: KubeClient) -> AsyncIterator[Callers]:
    await kube.request(
        "POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    )
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "secure-serving-metrics"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "secure-serving-metrics"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "secure-serving-metrics",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": NS}],
    }
    try:
        await kube.request("POST", f"{RBAC}/clusterroles", body=role)
        await kube.request("POST", f"{RBAC}/clusterrolebindings", body=binding)
        yield Callers(scraper=await _token(kube, "scraper"), nobody=await _token(kube, "nobody"))
    finally:
        await _delete(kube, f"{RBAC}/clusterrolebindings/secure-serving-metrics")
        await _delete(kube, f"{RBAC}/clusterroles/secure-serving-metrics")
        await _delete(kube, f"/api/v1/namespaces/{NS}")


async def _get(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # curl -k
    async with (
        aiohttp.ClientSession() as s,
        s.get(f"https://127.0.0.1:{port}{path}", headers=headers, ssl=context) as r,
    ):
        return r.status, await r.text()


@pytest.mark.backends("local", "real")
@pytest.mark.timeout(60)
async def test_metrics_need_an_authorized_token_and_health_does_not(
    cluster: Any, kube: KubeClient, callers: Callers
) -> None:
    serving = ServingOptions(
        authentication_kubeconfig=cluster.kubeconfig_path, authorization_kubeconfig=cluster.kubeconfig_path
    )
    opts = ManagerOptions(
        controllers=(),
        leader_election=LeaderElectionOptions(enabled=False),
        bind_address="127.0.0.1",
        secure_port=free_port(),
        serving=serving,
    )
    manager = Manager(opts, kube)
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(manager.run, handle_signals=False))
        await eventually(lambda: manager.bound_port is not None, "manager.bound_port is not None")
        port = manager.bound_port
        assert port is not None

        status, body = await _get(port, "/metrics", callers.scraper)
        assert status == 200 and "rest_client_requests_total" in body
        status, body = await _get(port, "/metrics")
        assert status == 401, body
        assert '"reason":"Unauthorized"' in body
        status, body = await _get(port, "/metrics", callers.nobody)
        assert status == 403 and f"system:serviceaccount:{NS}:nobody" in body
        assert (await _get(port, "/metrics", "not-a-token"))[0] == 401
        assert await _get(port, "/healthz") == (200, "ok")
        assert (await _get(port, "/readyz"))[0] == 200
        assert (await _get(port, "/livez"))[0] == 200
        assert (await _get(port, "/healthz/event-loop"))[0] == 401  # exact paths only, as KCM
        assert (await _get(port, "/no-such-path"))[0] == 401  # refused before routing
        assert (await _get(port, "/healthz/event-loop", callers.nobody))[0] == 403
        assert (await _get(port, "/no-such-path", callers.nobody))[0] == 403
        assert (await _get(port, "/healthz", "not-a-token"))[0] == 401  # a bad credential is never anonymous
        assert cluster.url not in body  # a refusal says nothing about the server behind
        manager.stop()


async def test_without_review_kubeconfigs_only_health_is_served(kube: KubeClient) -> None:
    """Outside a cluster and without the review kubeconfigs, as KCM v1.24 measured: a token is ignored
    (the request is anonymous), health is served, nothing else (401: no one can be authenticated)."""
    opts = ManagerOptions(
        controllers=(),
        leader_election=LeaderElectionOptions(enabled=False),
        bind_address="127.0.0.1",
        secure_port=free_port(),
    )
    manager = Manager(opts, kube)
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(manager.run, handle_signals=False))
        await eventually(lambda: manager.bound_port is not None, "manager.bound_port is not None")
        port = manager.bound_port
        assert port is not None
        assert await _get(port, "/healthz") == (200, "ok")
        assert (await _get(port, "/metrics"))[0] == 401
        assert (await _get(port, "/metrics", "some-token"))[0] == 401
        assert await _get(port, "/healthz", "some-token") == (200, "ok")
        manager.stop()


def _client_cert(tmp_path: Path, user: str) -> tuple[Path, ssl.SSLContext]:
    """A CA file, and a client context presenting a certificate it signed for `user`."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-client-ca")])
    now = dt.datetime.now(dt.UTC)
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "scrapers"),
            x509.NameAttribute(NameOID.COMMON_NAME, user),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, cert_file, key_file = tmp_path / "ca.crt", tmp_path / "client.crt", tmp_path / "client.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.load_cert_chain(cert_file, key_file)
    return ca_file, context


@pytest.mark.timeout(60)
async def test_a_client_certificate_signed_by_the_client_ca_names_the_user(
    cluster: Any, kube: KubeClient, tmp_path: Path
) -> None:
    """`--client-ca-file`: the certificate's CN is the user (its O the groups), then RBAC decides."""
    ca_file, with_cert = _client_cert(tmp_path, "cert-scraper")
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "cert-scraper"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cert-scraper"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "scrapers"}],
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "cert-scraper"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }
    await kube.request("POST", f"{RBAC}/clusterroles", body=role)
    await kube.request("POST", f"{RBAC}/clusterrolebindings", body=binding)
    serving = ServingOptions(
        authentication_kubeconfig=cluster.kubeconfig_path,
        client_ca_file=str(ca_file),
        authorization_kubeconfig=cluster.kubeconfig_path,
    )
    opts = ManagerOptions(
        controllers=(),
        leader_election=LeaderElectionOptions(enabled=False),
        bind_address="127.0.0.1",
        secure_port=free_port(),
        serving=serving,
    )
    manager = Manager(opts, kube)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(manager.run, handle_signals=False))
            await eventually(lambda: manager.bound_port is not None, "manager.bound_port is not None")
            url = f"https://127.0.0.1:{manager.bound_port}/metrics"
            async with aiohttp.ClientSession() as s:
                async with s.get(url, ssl=with_cert) as r:
                    assert r.status == 200
                async with s.get(url, ssl=False) as r:
                    assert r.status == 401  # the same request without the certificate: no credential
            manager.stop()
    finally:
        await _delete(kube, f"{RBAC}/clusterrolebindings/cert-scraper")
        await _delete(kube, f"{RBAC}/clusterroles/cert-scraper")
