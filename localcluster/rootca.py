"""The cluster's CA certificate, as `kube-root-ca.crt` publishes it in every namespace.

The embedded server speaks plain HTTP, so nothing verifies against this CA; it exists so that
what pods and clients read from `kube-root-ca.crt` is a well-formed CA bundle, as on a real
cluster. An EC P-256 key takes about a millisecond to make, so each cluster gets its own.
"""

from __future__ import annotations

import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubeutil.certs import certificate_builder


def make_root_ca(common_name: str = "kubernetes") -> str:
    """A self-signed CA certificate (PEM), valid for ten years from now, its key discarded."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        certificate_builder(
            name,
            name,
            key.public_key(),
            not_before=now - dt.timedelta(minutes=5),
            not_after=now + dt.timedelta(days=3650),
            ca=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()
