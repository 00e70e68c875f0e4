"""client-go's certificate frame: what `NewSelfSignedCACert` and the serving certificate carry."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubeutil.certs import certificate_builder


@pytest.mark.parametrize("ca", [True, False])
def test_a_certificate_carries_client_gos_constraints_and_key_usage(ca: bool) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    cert = certificate_builder(
        name, name, key.public_key(), not_before=start, not_after=start + dt.timedelta(days=365), ca=ca
    ).sign(key, hashes.SHA256())
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert constraints.critical and constraints.value.ca is ca
    assert usage.critical
    assert (usage.value.digital_signature, usage.value.key_encipherment) == (True, True)
    assert usage.value.key_cert_sign is ca  # only a CA signs certificates
    assert (cert.not_valid_before_utc, cert.not_valid_after_utc) == (start, start + dt.timedelta(days=365))
