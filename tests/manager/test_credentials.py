"""Credentials that keep working: exec plugins renewed, token files re-read, keys never on disk.

The local cluster enforces authentication and RBAC here (`authz=True`): a fake credential plugin,
a Python script written into the test's folder, issues HMAC-signed tokens that live three seconds;
the cluster's token webhook maps a valid one to a user of `system:masters` and refuses any token
past its expiry (a 401), and a request with no token at all is the anonymous user (a 403). The manager runs as a user runs it
(`aiokcm run --kubeconfig`) through several renewals and keeps reconciling.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from apiclient import ApiError, KubeClient
from apiclient.config import build_api_client
from apiclient.credentials import TokenFileCredentials
from apiclient.execplugin import ExecCredentials
from apiclient.kubeconfig import ClusterInfo, ExecConfig
from apiclient.metrics import EXEC_PLUGIN_CALLS
from apiclient.resources import NAMESPACES, PODS, Resource
from localcluster.auth.rbac import User
from localcluster.cluster import LocalCluster
from tests.support.objects import replicaset
from tests.support.waiting import eventually

REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet", True)
SECRET = "not-a-real-signing-key"

PLUGIN = """\
import hashlib, hmac, json, os, sys, time
lifetime, log, version = float(sys.argv[1]), sys.argv[2], sys.argv[3]
expires = time.time() + lifetime
payload = "%.3f" % expires
token = payload + "." + hmac.new(os.environ["TOKEN_SECRET"].encode(), payload.encode(), hashlib.sha256).hexdigest()
with open(log, "a") as f:
    f.write(json.dumps({"token": token, "info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]),
                        "stdin_tty": os.isatty(0)}) + "\\n")
stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(expires)) + ("%.6f" % (expires % 1))[1:] + "Z"
print(json.dumps({"apiVersion": version, "kind": "ExecCredential",
                  "status": {"token": token, "expirationTimestamp": stamp}}))
"""


PLUGIN_USER = User("plugin-user", ("system:masters",))


def _valid(token: str) -> bool:
    payload, _, signature = token.rpartition(".")
    expected = hmac.new(SECRET.encode(), payload.encode(), hashlib.sha256).hexdigest()
    try:
        return hmac.compare_digest(signature, expected) and float(payload) > time.time()
    except ValueError:
        return False


def _runs(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _exec_kubeconfig(
    tmp_path: Path, server: str, *, lifetime: float = 2.0, version: str = "client.authentication.k8s.io/v1"
) -> tuple[Path, Path]:
    plugin, log = tmp_path / "token-plugin.py", tmp_path / "issued.jsonl"
    plugin.write_text(PLUGIN)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "local",
        "clusters": [
            {
                "name": "local",
                "cluster": {
                    "server": server,
                    "extensions": [
                        {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "aiokcm"}}
                    ],
                },
            }
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "plugin"}}],
        "users": [
            {
                "name": "plugin",
                "user": {
                    "exec": {
                        "apiVersion": version,
                        "command": sys.executable,
                        "args": [str(plugin), str(lifetime), str(log), version],
                        "env": [{"name": "TOKEN_SECRET", "value": SECRET}],
                        "interactiveMode": "Never",
                        "provideClusterInfo": True,
                    }
                },
            }
        ],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path, log


async def _pods(kube: KubeClient) -> int:
    return len((await kube.list(PODS, namespace="default", label_selector="app=renewals"))["items"])


async def test_the_manager_keeps_working_through_exec_plugin_renewals(tmp_path: Path) -> None:
    async with LocalCluster(nodes=1, authz=True, tls=False) as cluster:  # the test's own client is the admin
        cluster.auth.tokens.add_webhook(lambda token: PLUGIN_USER if _valid(token) else None)
        kubeconfig, issued = _exec_kubeconfig(tmp_path, cluster.url, lifetime=3.0)
        output = tmp_path / "manager.log"
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        args = [
            sys.executable,
            "-m",
            "controller_manager",
            "run",
            f"--kubeconfig={kubeconfig}",
            "--controllers=replicaset",
            "--secure-port=0",
            "--log-format=json",
            "--v=5",
            "--leader-elect-lease-duration=8s",
            "--leader-elect-renew-deadline=6s",
            "--leader-elect-retry-period=500ms",
        ]
        kube = await cluster.client()
        with output.open("wb") as out:
            proc = await anyio.open_process(args, env=env, stdout=out, stderr=out, stdin=None)
        try:
            await kube.create(
                REPLICASETS, replicaset("renewals", 1, namespace="default", image="x"), namespace="default"
            )
            await _until_pods(kube, 1, proc)
            # Each token lives 3 s; the lease renewals every 500 ms outlive several of them.
            await eventually(
                lambda: len(_runs(issued)) >= 4 or proc.returncode is not None,
                "len(_runs(issued)) >= 4 or proc.returncode is not None",
                timeout=90,
            )
            assert proc.returncode is None, output.read_text()[-3000:]
            await kube.patch(REPLICASETS, "renewals", {"spec": {"replicas": 3}}, namespace="default")
            await _until_pods(kube, 3, proc)
            assert proc.returncode is None
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                with anyio.move_on_after(30):
                    await proc.wait()
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            await proc.aclose()
            await kube.close()
        assert proc.returncode == 0, output.read_text()[-3000:]
        runs = _runs(issued)
        assert len(runs) >= 4  # the first token and at least 3 renewals
        expiries = [float(run["token"].rpartition(".")[0]) for run in runs]
        assert expiries[-1] - expiries[0] > 2 * 3.0  # renewed as tokens ran out, over several lifetimes
        assert (
            cluster.auth.tokens.authenticate(runs[0]["token"])[0] is None
        )  # the first token is refused by now
        assert cluster.auth.rejected == 0  # no request went out with an expired token
        plugin_calls = sum(n for (user, *_), n in cluster.auth.decisions.items() if user == PLUGIN_USER.name)
        assert plugin_calls > len(runs)  # the manager's own requests, with the plugin's tokens
        info = runs[0]["info"]
        assert info["apiVersion"] == "client.authentication.k8s.io/v1" and info["kind"] == "ExecCredential"
        assert info["spec"]["interactive"] is False and runs[0]["stdin_tty"] is False
        assert info["spec"]["cluster"] == {"server": cluster.url, "config": {"audience": "aiokcm"}}
        logged = output.read_text()
        assert "caches synced" in logged
        for run in runs:
            assert run["token"] not in logged
            assert run["token"].rpartition(".")[2] not in logged  # the signature alone neither


async def _until_pods(kube: KubeClient, count: int, proc: Any) -> None:
    async def counted() -> bool:
        if await _pods(kube) == count:
            return True
        assert proc.returncode is None, "the manager exited"
        return False

    await eventually(counted, f"{count} pods", timeout=60, interval=0.1)


async def test_a_401_reruns_the_plugin_and_the_request_is_sent_again(tmp_path: Path) -> None:
    revoked: set[str] = set()
    async with LocalCluster(authz=True, tls=False) as cluster:
        cluster.auth.tokens.add_webhook(
            lambda token: PLUGIN_USER if _valid(token) and token not in revoked else None
        )
        kubeconfig, issued = _exec_kubeconfig(
            tmp_path, cluster.url, lifetime=3600, version="client.authentication.k8s.io/v1beta1"
        )
        kube = KubeClient(await build_api_client(kubeconfig=str(kubeconfig)))
        try:
            await kube.get(NAMESPACES, "default")
            revoked.add(_runs(issued)[0]["token"])  # valid for an hour, but the server no longer takes it
            await kube.get(NAMESPACES, "default")  # 401, the plugin runs, the same GET succeeds
            assert len(_runs(issued)) == 2
            assert cluster.auth.rejected == 1
            assert _runs(issued)[1]["info"]["apiVersion"] == "client.authentication.k8s.io/v1beta1"
        finally:
            await kube.close()


async def test_concurrent_requests_share_one_plugin_run() -> None:
    config = ExecConfig(
        command=sys.executable,
        api_version="client.authentication.k8s.io/v1",
        args=(
            "-c",
            "import json; print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
            "'kind': 'ExecCredential', 'status': {'token': 'abc'}}))",
        ),
        interactive_mode="Never",
    )
    creds = ExecCredentials(config, ClusterInfo(server="https://example"))
    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(creds.authorization)
    assert creds.runs == 1
    assert await creds.authorization() == "Bearer abc"
    assert await creds.unauthorized("Bearer abc") is False  # the plugin gave the same token again: no retry


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (
            '{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {"token": "t"}}',
            "exec plugin is configured to use API version client.authentication.k8s.io/v1, plugin returned version "
            "client.authentication.k8s.io/v1beta1",
        ),
        (
            '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential"}',
            "didn't return a status field",
        ),
        (
            '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {}}',
            "didn't return a token or cert/key pair",
        ),
        (
            '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"clientKeyData": "k"}}',
            "returned only certificate or key, not both",
        ),
        ("not json", "decoding stdout"),
    ],
)
async def test_a_bad_plugin_answer_is_refused_with_client_gos_message(output: str, message: str) -> None:
    from apiclient.credentials import CredentialError

    config = ExecConfig(
        command=sys.executable,
        api_version="client.authentication.k8s.io/v1",
        args=("-c", f"print({output!r})"),
        interactive_mode="Never",
    )
    with pytest.raises(CredentialError) as caught:
        await ExecCredentials(config, None).authorization()
    assert message in str(caught.value)


async def test_a_failing_plugin_names_its_exit_code() -> None:
    from apiclient.credentials import CredentialError

    config = ExecConfig(
        command=sys.executable,
        api_version="client.authentication.k8s.io/v1",
        args=("-c", "raise SystemExit(3)"),
        interactive_mode="Never",
    )
    failures = EXEC_PLUGIN_CALLS.labels("3", "plugin_execution_error")
    before = failures._value.get()
    with pytest.raises(CredentialError, match=f"exec: executable {sys.executable} failed with exit code 3"):
        await ExecCredentials(config, None).authorization()
    assert failures._value.get() == before + 1  # client-go's rest_client_exec_plugin_call_total


def _token_file_kubeconfig(tmp_path: Path, server: str, token_file: Path) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "local",
        "clusters": [{"name": "local", "cluster": {"server": server}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "file"}}],
        "users": [{"name": "file", "user": {"tokenFile": token_file.name}}],  # relative to the kubeconfig
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_a_rotated_token_file_is_read_again_after_a_401(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first-token\n")
    async with LocalCluster(authz=True, tls=False) as cluster:
        cluster.auth.tokens.add_static("first-token", "file-user", ["system:masters"])
        kube = KubeClient(
            await build_api_client(kubeconfig=str(_token_file_kubeconfig(tmp_path, cluster.url, token_file)))
        )
        try:
            await kube.get(NAMESPACES, "default")
            token_file.write_text("second-token\n")  # the issuer rotates the file, the server the token
            cluster.auth.tokens.add_static("second-token", "file-user", ["system:masters"])
            cluster.auth.tokens.revoke("first-token")
            await kube.get(NAMESPACES, "default")
            assert cluster.auth.rejected == 1  # one 401, then the same request with the new token
            await kube.get(NAMESPACES, "default")
            assert cluster.auth.rejected == 1
            cluster.auth.tokens.revoke("second-token")  # revoked, and the file has nothing newer
            with pytest.raises(ApiError) as refused:
                await kube.get(NAMESPACES, "default")
            assert refused.value.status == 401
            assert cluster.auth.rejected == 2  # the same token is not sent twice
        finally:
            await kube.close()


async def test_a_token_file_is_read_again_about_every_minute(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("one")
    now = [1000.0]
    creds = TokenFileCredentials(str(token_file), clock=lambda: now[0])
    assert await creds.authorization() == "Bearer one"
    token_file.write_text("two")
    now[0] += 49
    assert await creds.authorization() == "Bearer one"  # cached: within a minute less the 10 s leeway
    now[0] += 2
    assert await creds.authorization() == "Bearer two"
    token_file.unlink()  # a failed re-read keeps the last good token, as client-go does
    now[0] += 120
    assert await creds.authorization() == "Bearer two"


async def test_in_cluster_credentials_come_from_the_mounted_token_and_are_re_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apiclient import config as apiconfig

    (tmp_path / "token").write_text("service-account-token\n")
    (tmp_path / "ca.crt").write_bytes(b"")
    monkeypatch.setattr(apiconfig, "SERVICE_ACCOUNT_DIR", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    kc = apiconfig.resolve_kubeconfig(kubeconfig=None, master=None, context=None)
    assert kc.cluster.server == "https://10.96.0.1:443"
    assert kc.user.token_file == str(tmp_path / "token")
    creds, _ = await apiconfig._credentials(kc)
    assert isinstance(creds, TokenFileCredentials)
    assert await creds.authorization() == "Bearer service-account-token"
    (tmp_path / "token").write_text("rotated-by-the-kubelet")
    assert await creds.unauthorized("Bearer service-account-token") is True
    assert await creds.authorization() == "Bearer rotated-by-the-kubelet"
