"""Building an API client parses no trust store it does not use, and is the client the generated
constructor would make.

The manager builds a client per controller and every CLI command one more; kubernetes_asyncio's own
REST client parsed the system's trust store (about 27 ms of CPU) for a context that was replaced at
once. The counts here are calls to `SSLContext.load_default_certs`, the parse itself.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client as k8s_client

from apiclient import KubeClient, tls
from apiclient.config import build_api_client
from apiclient.resources import NAMESPACES
from apiclient.restclient import SessionApiClient
from localcluster.cluster import LocalCluster


@pytest.fixture
def trust_store_loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    loads: list[int] = []
    real = ssl.SSLContext.load_default_certs

    def counting(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_default_certs", counting)
    tls._system_roots.cache_clear()
    yield loads
    tls._system_roots.cache_clear()


def _context(api: k8s_client.ApiClient) -> ssl.SSLContext:
    """The SSL context the client's connections are made with."""
    connector: Any = api.rest_client.pool_manager.connector
    context = connector._ssl
    assert isinstance(context, ssl.SSLContext)
    return context


def _kubeconfig(path: Path, cluster: dict[str, Any]) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


async def test_clients_of_one_process_parse_the_system_trust_store_once(
    tmp_path: Path, trust_store_loads: list[int]
) -> None:
    path = _kubeconfig(tmp_path / "k", {"server": "https://api.example.com:6443"})
    clients = [await build_api_client(kubeconfig=path) for _ in range(5)]
    try:
        assert len(trust_store_loads) == 1
        verifying = {id(_context(c)) for c in clients}
        assert len(verifying) == 1  # one shared context, which verifies against the system's roots
        context = _context(clients[0])
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    finally:
        for c in clients:
            await c.close()


async def test_an_insecure_kubeconfig_loads_no_trust_store_and_verifies_nothing(
    tmp_path: Path, trust_store_loads: list[int]
) -> None:
    path = _kubeconfig(
        tmp_path / "k", {"server": "https://api.example.com:6443", "insecure-skip-tls-verify": True}
    )
    api = await build_api_client(kubeconfig=path)
    try:
        context = _context(api)
        assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname
        assert trust_store_loads == []
    finally:
        await api.close()


async def test_the_client_has_what_the_generated_constructor_gives_and_talks_to_a_server(
    trust_store_loads: list[int],
) -> None:
    stock = k8s_client.ApiClient(configuration=k8s_client.Configuration())
    try:
        async with LocalCluster(
            nodes=0, scheduler=False, kubelets=False, gc=False, controllers=False
        ) as cluster:
            api = await build_api_client(kubeconfig=cluster.kubeconfig_path)
            assert isinstance(api, SessionApiClient)
            assert sorted(vars(api)) == sorted(vars(stock))
            assert sorted(vars(api.rest_client)) == sorted(vars(stock.rest_client))
            assert str(api.user_agent).startswith("aiokcm/")
            client = KubeClient(api, qps=100, burst=100)
            try:
                names = {n["metadata"]["name"] for n in await client.list_all(NAMESPACES)}
                assert "default" in names
            finally:
                await client.close()
    finally:
        await stock.close()
