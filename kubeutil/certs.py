"""client-go's `util/cert`: the certificates Kubernetes components make for themselves.

`NewSelfSignedCACert` and `GenerateSelfSignedCertKeyWithFixtures` give a CA and a serving
certificate the same frame: critical basic constraints, and a critical key usage of digital
signature and key encipherment, plus certificate signing for a CA only. The manager's
self-signed serving pair and the local cluster's root CA are both built on it.
"""

from __future__ import annotations

import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes


def key_usage(*, ca: bool) -> x509.KeyUsage:
    """`x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature`, with `KeyUsageCertSign` for a CA."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=True,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def certificate_builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: CertificatePublicKeyTypes,
    *,
    not_before: dt.datetime,
    not_after: dt.datetime,
    ca: bool,
) -> x509.CertificateBuilder:
    """A certificate as client-go frames one, ready for extensions of the caller's and signing."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(key_usage(ca=ca), critical=True)
    )
