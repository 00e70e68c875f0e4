"""A client-certificate kubeconfig authenticates over mutual TLS and leaves no key on disk.

kubernetes_asyncio writes inline `client-key-data` to a file in `$TMPDIR` and removes it only at a
clean exit, so a killed manager left its private key behind. The server here is a small aiohttp
server that demands a client certificate signed by the test's CA and answers with the
certificate's common name; the client runs as its own process with an empty `$TMPDIR`, which is
still empty while the process works and after it is killed.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import yaml
from aiohttp import web

from apiclient import KubeClient
from apiclient.config import build_api_client
from apiclient.resources import NAMESPACES

REPO = Path(__file__).resolve().parents[2]


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        str(d / "ca.key"),
        "-out",
        str(d / "ca.crt"),
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
    )
    for name, extra in (
        ("server", ["-addext", "subjectAltName=IP:127.0.0.1"]),
        ("client", []),
        ("client2", []),
    ):
        _openssl(
            "req",
            *ec,
            "-keyout",
            str(d / f"{name}.key"),
            "-out",
            str(d / f"{name}.csr"),
            "-subj",
            f"/CN=aiokcm-{name}",
            *extra,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            str(d / f"{name}.csr"),
            "-CA",
            str(d / "ca.crt"),
            "-CAkey",
            str(d / "ca.key"),
            "-CAcreateserial",
            "-out",
            str(d / f"{name}.crt"),
            "-days",
            "1",
            "-copy_extensions",
            "copy",
        )
    return d


REVOKED: set[str] = set()


@pytest.fixture
async def mtls_server(pki: Path) -> AsyncIterator[str]:
    """Answers GET namespace with the client certificate's CN; 401 for a CN in `REVOKED`."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "server.crt"), str(pki / "server.key"))
    context.verify_mode = ssl.CERT_REQUIRED

    async def namespace(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        subject = dict(item[0] for item in (peer or {}).get("subject", ()))
        if subject.get("commonName") in REVOKED:
            return web.json_response(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "Unauthorized",
                    "code": 401,
                    "message": "Unauthorized",
                },
                status=401,
            )
        return web.json_response(
            {
                "kind": "Namespace",
                "apiVersion": "v1",
                "metadata": {
                    "name": request.match_info["name"],
                    "labels": {"cn": subject.get("commonName", "")},
                },
            }
        )

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{name}", namespace)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        REVOKED.clear()
        await runner.cleanup()


def _kubeconfig(tmp_path: Path, pki: Path, server: str) -> Path:
    def b64(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [
            {"name": "c", "cluster": {"server": server, "certificate-authority-data": b64("ca.crt")}}
        ],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [
            {
                "name": "u",
                "user": {"client-certificate-data": b64("client.crt"), "client-key-data": b64("client.key")},
            }
        ],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_inline_certificates_authenticate_over_mutual_tls(
    tmp_path: Path, pki: Path, mtls_server: str
) -> None:
    kube = KubeClient(await build_api_client(kubeconfig=str(_kubeconfig(tmp_path, pki, mtls_server))))
    try:
        ns = await kube.get(NAMESPACES, "default")
    finally:
        await kube.close()
    assert ns["metadata"]["labels"]["cn"] == "aiokcm-client"


CLIENT = """\
import asyncio, json, sys
from apiclient import KubeClient
from apiclient.config import build_api_client
from apiclient.resources import NAMESPACES

async def main():
    kube = KubeClient(await build_api_client(kubeconfig=sys.argv[1]))
    ns = await kube.get(NAMESPACES, "default")
    print(json.dumps(ns["metadata"]["labels"]), flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


async def test_no_key_file_is_left_in_tmpdir_after_sigkill(
    tmp_path: Path, pki: Path, mtls_server: str
) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(REPO)}
    args = [sys.executable, str(script), str(_kubeconfig(tmp_path, pki, mtls_server))]
    async with await anyio.open_process(args, env=env, cwd=str(tmp_path)) as proc:
        try:
            assert proc.stdout is not None
            with anyio.fail_after(60):
                line = await proc.stdout.receive()
            assert json.loads(line) == {"cn": "aiokcm-client"}
            assert list(tmpdir.iterdir()) == []  # connected with the key, and no file holds it
        finally:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
    assert list(tmpdir.iterdir()) == []
    key_text = (pki / "client.key").read_text()
    for folder in (tmp_path,):
        for path in folder.rglob("*"):
            if path.is_file() and path.name != "kubeconfig":
                assert key_text.strip() not in path.read_text(errors="replace"), path


async def test_an_exec_plugin_may_hand_out_the_client_certificate(
    tmp_path: Path, pki: Path, mtls_server: str
) -> None:
    answer = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {
            "clientCertificateData": (pki / "client.crt").read_text(),
            "clientKeyData": (pki / "client.key").read_text(),
        },
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": mtls_server,
                    "certificate-authority-data": base64.b64encode((pki / "ca.crt").read_bytes()).decode(),
                },
            }
        ],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "interactiveMode": "Never",
                        "command": sys.executable,
                        "args": ["-c", f"import json; print(json.dumps({answer!r}))"],
                    }
                },
            }
        ],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    kube = KubeClient(await build_api_client(kubeconfig=str(path)))
    try:
        ns = await kube.get(NAMESPACES, "default")
    finally:
        await kube.close()
    assert ns["metadata"]["labels"]["cn"] == "aiokcm-client"


ROTATING_PLUGIN = """\
import json, os, sys
counter, pki = sys.argv[1], sys.argv[2]
runs = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
open(counter, "w").write(str(runs))
name = "client" if runs == 1 else "client2"
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {
    "clientCertificateData": open(os.path.join(pki, name + ".crt")).read(),
    "clientKeyData": open(os.path.join(pki, name + ".key")).read()}}))
"""


async def test_a_401_rotates_a_plugin_certificate_onto_new_connections(
    tmp_path: Path, pki: Path, mtls_server: str
) -> None:
    plugin, counter = tmp_path / "plugin.py", tmp_path / "runs"
    plugin.write_text(ROTATING_PLUGIN)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": mtls_server,
                    "certificate-authority-data": base64.b64encode((pki / "ca.crt").read_bytes()).decode(),
                },
            }
        ],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "interactiveMode": "Never",
                        "command": sys.executable,
                        "args": [str(plugin), str(counter), str(pki)],
                    }
                },
            }
        ],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    kube = KubeClient(await build_api_client(kubeconfig=str(path)))
    try:
        assert (await kube.get(NAMESPACES, "default"))["metadata"]["labels"]["cn"] == "aiokcm-client"
        REVOKED.add("aiokcm-client")  # the open keep-alive connection still carries the old certificate
        assert (await kube.get(NAMESPACES, "default"))["metadata"]["labels"]["cn"] == "aiokcm-client2"
        assert counter.read_text() == "2"
    finally:
        await kube.close()
