"""The secure port's certificate: KCM's self-signed pair, made in memory unless a place is given."""

from __future__ import annotations

import os
import signal
import ssl
import sys
from pathlib import Path

import aiohttp
import anyio
import pytest
from cryptography import x509

from controller_manager import servingcert
from realcluster.ports import free_port
from tests.support.waiting import eventually


def _leaf(pair: servingcert.CertKey) -> x509.Certificate:
    return x509.load_pem_x509_certificates(pair.cert_pem)[0]


def test_generated_pair_is_a_ca_signed_serving_certificate_for_loopback() -> None:
    pair, source = servingcert.resolve(cert_file="", key_file="", cert_dir="", bind_address="10.1.2.3")
    assert source == "generated self-signed in memory"
    leaf, ca = x509.load_pem_x509_certificates(pair.cert_pem)
    assert leaf.issuer == ca.subject and leaf.subject.rfc4514_string().startswith("CN=localhost@")
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "10.1.2.3"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert (leaf.not_valid_after_utc - leaf.not_valid_before_utc).days == 365
    context = servingcert.server_context(pair)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_cert_dir_keeps_the_pair_private_and_reuses_it(tmp_path: Path) -> None:
    first, _ = servingcert.resolve(cert_file="", key_file="", cert_dir=str(tmp_path), bind_address="0.0.0.0")
    key = tmp_path / "kube-controller-manager.key"
    assert key.stat().st_mode & 0o777 == 0o600
    again, source = servingcert.resolve(
        cert_file="", key_file="", cert_dir=str(tmp_path), bind_address="0.0.0.0"
    )
    assert again == first and str(key) in source
    given, _ = servingcert.resolve(
        cert_file=str(tmp_path / "kube-controller-manager.crt"),
        key_file=str(key),
        cert_dir="/nonexistent",
        bind_address="0.0.0.0",
    )
    assert given == first


def test_unusable_files_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(servingcert.CertificateError, match="cannot read"):
        servingcert.resolve(
            cert_file=str(tmp_path / "no.crt"),
            key_file=str(tmp_path / "no.key"),
            cert_dir="",
            bind_address="",
        )
    other = servingcert.generate_self_signed()
    mismatched = servingcert.CertKey(_pem_of_other_leaf(), other.key_pem)
    with pytest.raises(servingcert.CertificateError, match="not usable"):
        servingcert.server_context(mismatched)


def _pem_of_other_leaf() -> bytes:
    return servingcert.generate_self_signed().cert_pem


async def test_no_private_key_is_left_on_disk_after_sigkill(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {
        "TMPDIR": str(tmp_path),
        "HOME": str(tmp_path),
    }
    args = [
        sys.executable,
        "-m",
        "controller_manager",
        "run",
        "--master=http://127.0.0.1:9",
        "--controllers=",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
    ]
    async with await anyio.open_process(args, env=env, cwd=tmp_path) as proc:
        try:

            async def healthy() -> bool:
                try:
                    async with (
                        aiohttp.ClientSession() as s,
                        s.get(f"https://127.0.0.1:{port}/healthz", ssl=False) as r,
                    ):
                        assert r.status == 200
                        return True
                except aiohttp.ClientConnectionError:
                    return False

            await eventually(healthy, "/healthz served", timeout=30)
        finally:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
    assert _files_holding_a_key(tmp_path) == []


def _files_holding_a_key(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and b"PRIVATE KEY" in p.read_bytes()]
