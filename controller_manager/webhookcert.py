"""The admission webhook's serving certificate: managed by aiokcm, or given as files.

Managed (the default): a CA and a serving certificate for `<service>.<namespace>.svc` (plus
`--webhook-hosts`), generated as the secure port's self-signed pair is, kept in a
`kubernetes.io/tls` Secret (`tls.crt`, `tls.key`, and `ca.crt`: the CAs to trust) so every
replica and every restart serves the same pair, and the CA bundle patched into each webhook of
the ValidatingWebhookConfiguration. A pair with less than a third of its validity left (as
cert-manager's default `renewBefore`) or made for other names is replaced: the new CA is added to
the caBundle first, the old one stays there until it expires, so the API server trusts whichever
pair a replica serves during the change. Replicas racing on the Secret settle it through
`create` (409 AlreadyExists) and `update` with the resourceVersion read (409 Conflict): the loser
reads and serves the winner's pair.

Files (`--webhook-tls-cert-file` / `--webhook-tls-private-key-file`, e.g. a cert-manager
Certificate's Secret mounted in the pod): served as given and reloaded when they change;
the caBundle is then someone else's job (cert-manager's CA injector).

Either way the TLS context is one object whose chain is reloaded in place: new handshakes get the
new pair, open connections are not cut.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from apiclient import ApiError, KubeClient
from apiclient.resources import SECRETS, VALIDATINGWEBHOOKCONFIGURATIONS
from controller_manager import servingcert
from controllers.worker import is_expected_failure

log = structlog.get_logger()

CHECK_PERIOD = 3600.0  # look at the pair's validity and the caBundle hourly
RETRY_PERIOD = 10.0  # after a failure, or while the webhook configuration is not installed yet
FILE_CHECK_PERIOD = 60.0
RENEW_FRACTION = 1 / 3


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(value: Any) -> bytes:
    try:
        return base64.b64decode(str(value or ""), validate=True)
    except ValueError:
        return b""


def split_pem(bundle: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(bundle) if bundle.strip() else []
    except ValueError:
        return []


def _names(cert: x509.Certificate) -> set[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(n) for n in san.get_values_for_type(x509.DNSName)} | {
        str(ip) for ip in san.get_values_for_type(x509.IPAddress)
    }


@dataclass(frozen=True)
class Names:
    """What the serving certificate must be valid for."""

    host: str  # the subject: the Service's DNS name
    dns: tuple[str, ...]
    ips: tuple[str, ...]

    @classmethod
    def for_service(cls, service: str, namespace: str, hosts: tuple[str, ...]) -> Names:
        dns = [service, f"{service}.{namespace}", f"{service}.{namespace}.svc"]
        ips: list[str] = []
        for host in hosts:
            try:
                ips.append(str(ipaddress.ip_address(host)))
            except ValueError:
                dns.append(host)
        return cls(dns[2], tuple(dict.fromkeys(dns)), tuple(dict.fromkeys(ips)))

    def all(self) -> set[str]:
        return set(self.dns) | set(self.ips)


def needs_renewal(cert_pem: bytes, names: Names, now: dt.datetime) -> bool:
    """The leaf is missing, unreadable, made for other names, or has under a third of its life left."""
    certs = split_pem(cert_pem)
    if not certs:
        return True
    leaf = certs[0]
    start, end = leaf.not_valid_before_utc, leaf.not_valid_after_utc
    if now >= end - (end - start) * RENEW_FRACTION:
        return True
    return not names.all() <= _names(leaf)


def merge_bundle(new_ca: bytes, old_bundle: bytes, now: dt.datetime) -> bytes:
    """The new CA first, then the old ones still valid (each once)."""
    out = [new_ca.strip()]
    seen = {
        c.fingerprint(c.signature_hash_algorithm) if c.signature_hash_algorithm else b""
        for c in split_pem(new_ca)
    }
    for cert in split_pem(old_bundle):
        key = cert.fingerprint(cert.signature_hash_algorithm) if cert.signature_hash_algorithm else b""
        if cert.not_valid_after_utc > now and key not in seen:
            seen.add(key)
            out.append(cert.public_bytes(serialization.Encoding.PEM).strip())
    return b"\n".join(out) + b"\n"


class ReloadableContext:
    """One server-side TLS context whose certificate chain is replaced in place."""

    def __init__(self) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.loaded: bytes = b""
        self.ready = anyio.Event()

    def load(self, pair: servingcert.CertKey) -> bool:
        """Serve `pair` from now on; False when it is what is served already."""
        if pair.cert_pem == self.loaded:
            return False
        with (
            servingcert._memory_file(pair.cert_pem) as cert_path,
            servingcert._memory_file(pair.key_pem) as key_path,
        ):
            self.context.load_cert_chain(cert_path, key_path)
        self.loaded = pair.cert_pem
        self.ready.set()
        return True


class ManagedCertificate:
    """The Secret-kept pair and the caBundle of the webhook configuration (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        secret: str,
        configuration: str,
        names: Names,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.secret = secret
        self.configuration = configuration
        self.names = names
        self.clock = clock
        self.tls = ReloadableContext()
        self.bundle_installed = False
        self._missing_told = False

    async def _read(self) -> Mapping[str, Any] | None:
        return await self.client.get_or_none(SECRETS, self.secret, namespace=self.namespace)

    async def ensure(self, *, races: int = 3) -> None:
        """One pass: a valid pair in the Secret, served, and its CA in the caBundle."""
        now = self.clock()
        secret = await self._read()
        data = (secret or {}).get("data") or {}
        cert, key, bundle = (
            _unb64(data.get("tls.crt")),
            _unb64(data.get("tls.key")),
            _unb64(data.get("ca.crt")),
        )
        if secret is None or not key or needs_renewal(cert, self.names, now):
            fresh = servingcert.generate_self_signed(self.names.host, ips=self.names.ips, dns=self.names.dns)
            new_ca = b"".join(
                c.public_bytes(serialization.Encoding.PEM) for c in split_pem(fresh.cert_pem)[1:]
            )
            bundle = merge_bundle(new_ca, bundle, now)
            await self._install_bundle(bundle)  # trusted before it is served anywhere
            meta: dict[str, Any] = {"name": self.secret, "namespace": self.namespace}
            body = {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/tls",
                "metadata": meta,
                "data": {
                    "tls.crt": _b64(fresh.cert_pem),
                    "tls.key": _b64(fresh.key_pem),
                    "ca.crt": _b64(bundle),
                },
            }
            try:
                if secret is None:
                    await self.client.create(SECRETS, body, namespace=self.namespace)
                else:
                    meta["resourceVersion"] = (secret.get("metadata") or {}).get("resourceVersion")
                    await self.client.replace(SECRETS, body, namespace=self.namespace, name=self.secret)
            except ApiError as exc:
                if exc.status != 409 or races <= 0:
                    raise
                log.info("another replica wrote the webhook certificate first", secret=self.secret)
                return await self.ensure(races=races - 1)
            log.info(
                "webhook serving certificate generated",
                secret=f"{self.namespace}/{self.secret}",
                names=sorted(self.names.all()),
                replaced=secret is not None,
            )
            cert, key = fresh.cert_pem, fresh.key_pem
        await self._install_bundle(bundle)
        if self.tls.load(servingcert.CertKey(cert, key)):
            log.info(
                "serving the webhook certificate",
                secret=f"{self.namespace}/{self.secret}",
                not_after=split_pem(cert)[0].not_valid_after_utc.isoformat(),
            )
        return None

    async def _install_bundle(self, bundle: bytes) -> None:
        """Put `bundle` in every webhook of the configuration; tests guard each index by name."""
        try:
            config = await self.client.get(VALIDATINGWEBHOOKCONFIGURATIONS, self.configuration)
        except ApiError as exc:
            if not exc.not_found:
                raise
            if not self._missing_told:
                log.warning(
                    "webhook configuration not found: its caBundle cannot be set yet",
                    configuration=self.configuration,
                )
                self._missing_told = True
            self.bundle_installed = False
            return
        wanted = _b64(bundle)
        ops: list[dict[str, Any]] = []
        for i, webhook in enumerate(config.get("webhooks") or []):
            if (webhook.get("clientConfig") or {}).get("caBundle") == wanted:
                continue
            ops += [
                {"op": "test", "path": f"/webhooks/{i}/name", "value": webhook.get("name")},
                {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": wanted},
            ]
        if ops:
            await self.client.patch(
                VALIDATINGWEBHOOKCONFIGURATIONS, self.configuration, ops, patch_type="json"
            )
            log.info("webhook caBundle updated", configuration=self.configuration, webhooks=len(ops) // 2)
        self.bundle_installed = True
        self._missing_told = False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the pair and the bundle current until cancelled; `started` once a pair is served."""
        started = False
        while True:
            try:
                await self.ensure()
            except Exception as exc:
                log.warning(
                    "webhook certificate upkeep failed",
                    error=str(exc) or type(exc).__name__,
                    exc_info=not is_expected_failure(exc),
                )
            if self.tls.ready.is_set() and not started:
                started = True
                task_status.started()
            await anyio.sleep(CHECK_PERIOD if self.bundle_installed else RETRY_PERIOD)


class FileCertificate:
    """A pair given as files, reloaded when either file changes."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self.cert_file, self.key_file = Path(cert_file), Path(key_file)
        self.tls = ReloadableContext()
        self._stamp: tuple[float, float] = (0.0, 0.0)

    def reload(self) -> None:
        stamp = (os.stat(self.cert_file).st_mtime, os.stat(self.key_file).st_mtime)
        if stamp == self._stamp:
            return
        pair = servingcert.CertKey(self.cert_file.read_bytes(), self.key_file.read_bytes())
        if self.tls.load(pair):
            log.info("serving the webhook certificate", cert_file=str(self.cert_file))
        self._stamp = stamp

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        started = False
        while True:
            try:
                self.reload()
            except (OSError, ssl.SSLError) as exc:
                log.warning(
                    "cannot load the webhook certificate files", error=str(exc), cert_file=str(self.cert_file)
                )
            if self.tls.ready.is_set() and not started:
                started = True
                task_status.started()
            await anyio.sleep(FILE_CHECK_PERIOD)
