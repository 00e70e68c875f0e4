"""client-go credential plugins (`users[].user.exec`), as `plugin/pkg/client/auth/exec` runs them.

EKS (`aws eks get-token`), GKE (`gke-gcloud-auth-plugin`) and AKS (`kubelogin`) hand out tokens
that last minutes, so the plugin is not a start-up step but a credential source:

- The plugin runs with the process environment plus the stanza's `env`, and
  `KUBERNETES_EXEC_INFO` holding an `ExecCredential` of the configured `apiVersion`
  (`client.authentication.k8s.io/v1` or `v1beta1`) whose `spec.interactive` says whether stdin
  is passed on, and whose `spec.cluster` describes the cluster when `provideClusterInfo` is set.
- `interactiveMode`: `Never` runs without stdin; `IfAvailable` passes stdin when it is a
  terminal; `Always` fails unless stdin is a terminal. The plugin's stderr is the manager's.
- Its answer must be an `ExecCredential` of the same apiVersion with `status.token` or a
  `status.clientCertificateData`/`clientKeyData` pair. The answer is cached until
  `status.expirationTimestamp` (forever without one) and refreshed, once for all waiting
  requests, when that passes or when the server answers 401 to the cached credentials.
- A missing binary is reported with client-go's install hint and the stanza's `installHint`.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog
import yaml

from apiclient import metrics
from apiclient.credentials import CredentialError, Credentials
from apiclient.kubeconfig import ClusterInfo, ExecConfig

log = structlog.get_logger()

EXEC_INFO_ENV = "KUBERNETES_EXEC_INFO"
INSTALL_HINT_HELP = (
    "It looks like you are trying to use a client-go credential plugin that is not installed. "
    "To learn more about this feature, consult the documentation available at: "
    "https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins"
)


@dataclass(frozen=True)
class ExecResult:
    """One run's answer. `expires` is a wall-clock time (seconds since the epoch), None for never."""

    token: str = field(default="", repr=False)
    cert_data: bytes = field(default=b"", repr=False)
    key_data: bytes = field(default=b"", repr=False)
    expires: float | None = None


def _stdin_is_terminal() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        return False


def interactive(mode: str, *, is_terminal: Callable[[], bool] = _stdin_is_terminal) -> bool:
    """client-go's isInteractive: whether the plugin gets our stdin, or why it cannot run."""
    if mode == "Never":
        return False
    if mode == "IfAvailable":
        return is_terminal()
    if mode == "Always":
        if not is_terminal():
            raise CredentialError(
                "exec plugin cannot support interactive mode: standard input is not a terminal"
            )
        return True
    raise CredentialError(f"exec plugin cannot support interactive mode: unknown interactiveMode: {mode!r}")


def exec_info(config: ExecConfig, cluster: ClusterInfo | None, *, is_interactive: bool) -> dict[str, Any]:
    """The `ExecCredential` passed in `KUBERNETES_EXEC_INFO`."""
    spec: dict[str, Any] = {"interactive": is_interactive}
    if config.provide_cluster_info and cluster is not None:
        info: dict[str, Any] = {"server": cluster.server}
        if cluster.tls_server_name:
            info["tls-server-name"] = cluster.tls_server_name
        if cluster.insecure_skip_tls_verify:
            info["insecure-skip-tls-verify"] = True
        if cluster.ca_data:
            info["certificate-authority-data"] = base64.b64encode(cluster.ca_data).decode()
        if cluster.proxy_url:
            info["proxy-url"] = cluster.proxy_url
        if cluster.disable_compression:
            info["disable-compression"] = True
        if config.cluster_config is not None:
            info["config"] = config.cluster_config
        spec["cluster"] = info
    return {"kind": "ExecCredential", "apiVersion": config.api_version, "spec": spec}


def _parse_time(text: Any) -> float:
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise CredentialError(f"decoding stdout: invalid expirationTimestamp {text!r}") from None


def parse_output(config: ExecConfig, stdout: bytes) -> ExecResult:
    """Decode and check the plugin's answer as refreshCredsLocked does."""
    try:
        doc = json.loads(stdout)
    except ValueError:
        try:
            doc = yaml.safe_load(stdout)
        except yaml.YAMLError:
            doc = None
    if not isinstance(doc, dict):
        raise CredentialError("decoding stdout: the exec plugin did not print an ExecCredential object")
    version, kind = doc.get("apiVersion"), doc.get("kind")
    if kind != "ExecCredential":
        raise CredentialError(f"decoding stdout: expected kind ExecCredential, got {kind!r}")
    if version != config.api_version:
        raise CredentialError(
            f"exec plugin is configured to use API version {config.api_version}, plugin returned version {version}"
        )
    status = doc.get("status")
    if not isinstance(status, dict):
        raise CredentialError("exec plugin didn't return a status field")
    token = str(status.get("token") or "")
    cert = str(status.get("clientCertificateData") or "")
    key = str(status.get("clientKeyData") or "")
    if not token and not cert and not key:
        raise CredentialError("exec plugin didn't return a token or cert/key pair")
    if bool(cert) != bool(key):
        raise CredentialError("exec plugin returned only certificate or key, not both")
    expires = status.get("expirationTimestamp")
    return ExecResult(
        token=token,
        cert_data=cert.encode(),
        key_data=key.encode(),
        expires=_parse_time(expires) if expires else None,
    )


async def run_plugin(
    config: ExecConfig, cluster: ClusterInfo | None, *, environ: Mapping[str, str] | None = None
) -> ExecResult:
    """Run the plugin once (on the event loop: a child process and its pipes, nothing blocks)."""
    is_interactive = interactive(config.interactive_mode)
    env = dict(os.environ if environ is None else environ)
    env.update(dict(config.env))
    env[EXEC_INFO_ENV] = json.dumps(exec_info(config, cluster, is_interactive=is_interactive))
    try:
        done = await anyio.run_process(
            [config.command, *config.args],
            env=env,
            check=False,
            stdin=None if is_interactive else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError):
        metrics.EXEC_PLUGIN_CALLS.labels("1", "plugin_not_found_error").inc()
        hint = f" {config.install_hint.strip()}" if config.install_hint.strip() else ""
        message = f"exec: executable {config.command} not found. {INSTALL_HINT_HELP}{hint}"
        raise CredentialError(" ".join(message.split())) from None
    except OSError as exc:
        metrics.EXEC_PLUGIN_CALLS.labels("1", "client_internal_error").inc()
        raise CredentialError(f"exec: {exc.strerror or exc}") from None
    if done.returncode != 0:
        metrics.EXEC_PLUGIN_CALLS.labels(str(done.returncode), "plugin_execution_error").inc()
        raise CredentialError(f"exec: executable {config.command} failed with exit code {done.returncode}")
    metrics.EXEC_PLUGIN_CALLS.labels("0", "no_error").inc()
    return parse_output(config, done.stdout)


class ExecCredentials(Credentials):
    """The Authenticator: a cached plugin answer, refreshed once for everyone when due."""

    def __init__(
        self, config: ExecConfig, cluster: ClusterInfo | None, *, wall_clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config
        self.cluster = cluster
        self._now = wall_clock
        self._lock = anyio.Lock()
        self._cached: ExecResult | None = None
        self._on_certificate: Callable[[ExecResult], Awaitable[None]] | None = None
        self._cert_rotated = False
        self.runs = 0

    def on_rotated_certificate(self, callback: Callable[[ExecResult], Awaitable[None]]) -> None:
        """Call `callback` when a run hands out a client certificate other than the last one."""
        self._on_certificate = callback

    def _expired(self, creds: ExecResult) -> bool:
        return creds.expires is not None and self._now() > creds.expires

    async def _refresh_locked(self) -> ExecResult:
        result = await run_plugin(self.config, self.cluster)
        self.runs += 1
        old, self._cached = self._cached, result
        self._cert_rotated = bool(result.cert_data) and (
            old is None or (old.cert_data, old.key_data) != (result.cert_data, result.key_data)
        )
        if self._cert_rotated and old is not None and self._on_certificate is not None:
            await self._on_certificate(result)
        log.debug(
            "exec credential plugin ran",
            command=self.config.command,
            expires=None
            if result.expires is None
            else dt.datetime.fromtimestamp(result.expires, dt.UTC).isoformat(),
        )
        return result

    async def get(self) -> ExecResult:
        async with self._lock:
            cached = self._cached
            if cached is not None and not self._expired(cached):
                return cached
            return await self._refresh_locked()

    async def authorization(self) -> str | None:
        creds = await self.get()
        return f"Bearer {creds.token}" if creds.token else None

    async def unauthorized(self, used: str | None) -> bool:
        async with self._lock:
            current = self._cached
            if current is not None and (f"Bearer {current.token}" if current.token else None) != used:
                return True  # rotated already, by another request's refresh
            try:
                fresh = await self._refresh_locked()
            except CredentialError as exc:
                log.error("refreshing credentials", error=str(exc))
                return False
            rotated = self._cert_rotated
        return (f"Bearer {fresh.token}" if fresh.token else None) != used or rotated
