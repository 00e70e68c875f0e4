"""The API connection's proxy, chosen as client-go chooses it, and requests that never wait on a thread."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiclient.config import build_api_client
from apiclient.proxy import proxy_from_environment
from apiclient.resources import CONFIGMAPS
from localcluster.cluster import LocalCluster

PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# Go's httpproxy cases (golang.org/x/net/http/httpproxy): localhost and loopback are never
# proxied, NO_PROXY names hosts and domain suffixes, HTTPS_PROXY serves https servers.
@pytest.mark.parametrize(
    ("server", "no_proxy", "want"),
    [
        ("https://api.example.com:6443", "", "http://proxy.corp:3128"),
        ("https://api.example.com:6443", "api.example.com", None),
        ("https://api.example.com:6443", ".example.com", None),
        ("https://api.example.com:6443", "other.example.com", "http://proxy.corp:3128"),
        ("https://localhost:6443", "", None),
        ("https://127.0.0.1:6443", "", None),
        ("https://127.0.0.2:6443", "", None),
        ("https://[::1]:6443", "", None),
        ("https://10.0.0.1:6443", "", "http://proxy.corp:3128"),
    ],
)
def test_the_environment_names_the_proxy_as_in_go(
    env: pytest.MonkeyPatch, server: str, no_proxy: str, want: str | None
) -> None:
    env.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    if no_proxy:
        env.setenv("NO_PROXY", no_proxy)
    assert proxy_from_environment(server) == want


def test_no_proxy_variable_means_a_direct_connection(env: pytest.MonkeyPatch) -> None:
    assert proxy_from_environment("https://api.example.com:6443") is None


def test_proxy_credentials_are_kept(env: pytest.MonkeyPatch) -> None:
    env.setenv("HTTPS_PROXY", "http://user:s3cret@proxy.corp:3128")
    assert proxy_from_environment("https://api.example.com") == "http://user:s3cret@proxy.corp:3128"


def _kubeconfig(tmp_path: Path, cluster: dict[str, Any]) -> str:
    path = tmp_path / "config"
    path.write_text(
        yaml.safe_dump(
            {
                "current-context": "c",
                "clusters": [{"name": "c", "cluster": cluster}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    return str(path)


@pytest.mark.parametrize(
    ("proxy_url", "want"),
    [(None, "http://proxy.corp:3128"), ("http://from-kubeconfig:8080", "http://from-kubeconfig:8080")],
)
async def test_a_kubeconfig_proxy_url_replaces_the_environment(
    env: pytest.MonkeyPatch, tmp_path: Path, proxy_url: str | None, want: str
) -> None:
    env.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    cluster: dict[str, Any] = {"server": "https://api.example.com:6443", "insecure-skip-tls-verify": True}
    if proxy_url:
        cluster["proxy-url"] = proxy_url
    api = await build_api_client(kubeconfig=_kubeconfig(tmp_path, cluster))
    try:
        assert api.configuration.proxy == want
    finally:
        await api.close()


async def test_requests_never_wait_on_a_thread(cluster: LocalCluster, env: pytest.MonkeyPatch) -> None:
    """aiohttp's `trust_env` would read ~/.netrc in the default executor before every request."""
    loop = asyncio.get_running_loop()
    original = loop.run_in_executor
    handed: list[Any] = []

    def recording(executor: Any, func: Any, *args: Any) -> Any:
        handed.append(func)
        return original(executor, func, *args)

    env.setattr(loop, "run_in_executor", recording)
    client = await cluster.client()
    try:
        for i in range(5):
            await client.create(CONFIGMAPS, {"metadata": {"name": f"cm-{i}"}}, namespace="default")
            await client.get(CONFIGMAPS, f"cm-{i}", namespace="default")
    finally:
        await client.close()
    assert [getattr(f, "__name__", repr(f)) for f in handed] == []
