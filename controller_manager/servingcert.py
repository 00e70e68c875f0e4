"""The serving certificate of the secure port: given files, or self-signed as KCM makes it.

k8s.io/apiserver's `SecureServingOptions.MaybeDefaultWithSelfSignedCerts`: with
`--tls-cert-file`/`--tls-private-key-file` those are served; otherwise, with `--cert-dir`, the
pair `<cert-dir>/kube-controller-manager.{crt,key}` is reused when readable and generated and
written there when not; with neither (KCM's default, `--cert-dir=""`), a pair is generated in
memory. The generated pair is client-go's `GenerateSelfSignedCertKey`: a CA `<host>-ca@<unix>`
signing a serving certificate `<host>@<unix>` for `localhost` and 127.0.0.1 (plus the bind
address when it is a specific IP), valid one year, RSA 2048.

Python's `ssl` reads keys from files only. An in-memory key must not land on disk (a SIGKILL
would leave it there), so it is handed to OpenSSL through an anonymous memory file
(`memfd_create`) read by its `/proc/self/fd` path and closed at once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubeutil.certs import certificate_builder

PAIR_NAME = "kube-controller-manager"
_VALIDITY = dt.timedelta(days=365)


class CertificateError(ValueError):
    """The configured certificate or key cannot be used (the CLI reports one line, exit 2)."""


@dataclass(frozen=True)
class CertKey:
    """PEM bytes of a certificate chain (leaf first) and its private key."""

    cert_pem: bytes
    key_pem: bytes


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def generate_self_signed(
    host: str = "localhost", *, ips: tuple[str, ...] = ("127.0.0.1",), dns: tuple[str, ...] = ()
) -> CertKey:
    """client-go's `GenerateSelfSignedCertKey`: a one-year CA and a serving certificate it signs."""
    now = dt.datetime.now(dt.UTC)
    stamp = int(now.timestamp())
    start = now - dt.timedelta(hours=1)  # as client-go: tolerate clock skew with the scraper
    ca_key = _new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}-ca@{stamp}")])
    ca_cert = certificate_builder(
        ca_name, ca_name, ca_key.public_key(), not_before=start, not_after=start + _VALIDITY, ca=True
    ).sign(ca_key, hashes.SHA256())
    key = _new_key()
    alt_ips = [ipaddress.ip_address(ip) for ip in dict.fromkeys(ips)]
    alt_dns = list(dict.fromkeys((*dns, host) if not _is_ip(host) else dns))
    if _is_ip(host):
        alt_ips.insert(0, ipaddress.ip_address(host))
    names: list[x509.GeneralName] = [x509.IPAddress(ip) for ip in alt_ips]
    names += [x509.DNSName(name) for name in alt_dns]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{stamp}")])
    cert = (
        certificate_builder(
            subject, ca_name, key.public_key(), not_before=start, not_after=start + _VALIDITY, ca=False
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM)
    return CertKey(chain, _key_pem(key))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def resolve(*, cert_file: str, key_file: str, cert_dir: str, bind_address: str) -> tuple[CertKey, str]:
    """The pair to serve and a description for the log (where it came from, never its content)."""
    if bool(cert_file) != bool(key_file):
        raise CertificateError("--tls-cert-file and --tls-private-key-file must be given together")
    if cert_file:
        return _read_pair(Path(cert_file), Path(key_file)), f"{cert_file}, {key_file}"
    ips = ["127.0.0.1"]
    if _is_ip(bind_address) and not ipaddress.ip_address(bind_address).is_unspecified:
        ips.append(bind_address)
    if cert_dir:
        crt, key = Path(cert_dir) / f"{PAIR_NAME}.crt", Path(cert_dir) / f"{PAIR_NAME}.key"
        if crt.is_file() and key.is_file():
            return _read_pair(crt, key), f"{crt}, {key}"
        pair = generate_self_signed(ips=tuple(ips))
        try:
            Path(cert_dir).mkdir(parents=True, exist_ok=True, mode=0o755)
            crt.write_bytes(pair.cert_pem)
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(pair.key_pem)
        except OSError as exc:
            raise CertificateError(
                f"--cert-dir {cert_dir}: cannot write the self-signed pair: {exc.strerror}"
            ) from None
        return pair, f"generated self-signed {crt}, {key}"
    return generate_self_signed(ips=tuple(ips)), "generated self-signed in memory"


def _read_pair(cert: Path, key: Path) -> CertKey:
    try:
        return CertKey(cert.read_bytes(), key.read_bytes())
    except OSError as exc:
        raise CertificateError(f"cannot read {exc.filename}: {exc.strerror}") from None


def server_context(pair: CertKey, *, client_ca_pem: str | None = None) -> ssl.SSLContext:
    """A TLS 1.2+ server context serving `pair`; with a client CA, client certificates are
    requested (not required) and verified against it, as the delegated x509 authenticator."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        with _memory_file(pair.cert_pem) as cert_path, _memory_file(pair.key_pem) as key_path:
            context.load_cert_chain(cert_path, key_path)
    except ssl.SSLError as exc:
        raise CertificateError(f"the serving certificate or key is not usable: {exc.reason or exc}") from None
    if client_ca_pem:
        try:
            context.load_verify_locations(cadata=client_ca_pem)
        except ssl.SSLError as exc:
            raise CertificateError(f"the client CA bundle is not usable: {exc.reason or exc}") from None
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[str]:
    """A path OpenSSL can open whose bytes live in memory only (Linux memfd), else a private
    temporary file removed as soon as it has been read."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("aiokcm-serving", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix="aiokcm-serving-")
    try:
        os.write(fd, data)
        yield path
    finally:
        os.close(fd)
        os.unlink(path)
