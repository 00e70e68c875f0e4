"""Kubeconfig files read as kubectl reads them: $KUBECONFIG merging, relative paths, server addresses."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from apiclient.config import resolve_kubeconfig
from apiclient.kubeconfig import KubeconfigError, validate_server


def _write(path: Path, doc: dict[str, object]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_the_first_file_to_name_an_entry_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _write(
        tmp_path / "a" / "config",
        {
            "clusters": [
                {
                    "name": "prod",
                    "cluster": {"server": "https://first:6443", "insecure-skip-tls-verify": True},
                }
            ],
            "users": [{"name": "me", "user": {"tokenFile": "token"}}],
        },
    )
    second = _write(
        tmp_path / "b" / "config",
        {
            "current-context": "prod",
            "clusters": [{"name": "prod", "cluster": {"server": "https://second:6443"}}],
            "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "me", "namespace": "apps"}}],
            "users": [{"name": "me", "user": {"token": "from-second"}}],
        },
    )
    (tmp_path / "a" / "token").write_text("t")
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing'}:{second}")
    kc = resolve_kubeconfig(kubeconfig=None, master=None, context=None)
    assert kc.cluster.server == "https://first:6443" and kc.cluster.insecure_skip_tls_verify
    assert kc.user.token_file == str(tmp_path / "a" / "token")  # relative to the file that named it
    assert kc.user.token is None
    assert (kc.context, kc.namespace) == ("prod", "apps")


def test_master_overrides_the_kubeconfig_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    path = _write(
        tmp_path / "config",
        {
            "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": "http://kubeconfig:8080"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c"}}],
        },
    )
    kc = resolve_kubeconfig(kubeconfig=path, master="10.0.0.1:6443", context=None)
    assert kc.cluster.server == "http://10.0.0.1:6443"


@pytest.mark.parametrize(
    ("server", "tls", "expected"),
    [
        ("https://api.example.com:6443/", False, "https://api.example.com:6443"),
        ("api.example.com:6443", True, "https://api.example.com:6443"),
        ("127.0.0.1:8080", False, "http://127.0.0.1:8080"),
        ("https://[::1]:6443", False, "https://[::1]:6443"),
        (
            "https://rancher.example.com/k8s/clusters/c-abc",
            False,
            "https://rancher.example.com/k8s/clusters/c-abc",
        ),
    ],
)
def test_a_server_is_a_url_or_a_host_and_port(server: str, tls: bool, expected: str) -> None:
    assert validate_server(server, tls=tls) == expected


@pytest.mark.parametrize(
    "server", ["not a url", "ftp://example.com", "https://", "http://host:port", "http://h:70000"]
)
def test_anything_else_is_refused(server: str) -> None:
    with pytest.raises(KubeconfigError, match="must be a URL or a host:port pair"):
        validate_server(server, tls=False)
