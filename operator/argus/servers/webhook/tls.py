"""A self-made serving certificate for the admission webhook, made with ``cryptography``.

kopf's own self-signed helper needs ``certbuilder``/``oscrypto``, which fail to load with
OpenSSL 3; this replaces it (``ArgusWebhookServer.build_certificate``). The certificate is
self-signed, so it is its own CA: the API server is given it as the ``caBundle``. ECDSA
P-256 keys: made in microseconds, accepted by kube-apiserver.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Collection

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)
BACKDATE = dt.timedelta(hours=1)   # tolerate clock skew between the operator and the API server


def _san(name: str) -> x509.GeneralName | None:
    try:
        ip = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return x509.DNSName(name) if name else None
    return None if ip.is_unspecified else x509.IPAddress(ip)


def self_signed_certificate(hostnames: Collection[str], password: str | None = None, *, now: dt.datetime,
                            validity: dt.timedelta = VALIDITY) -> tuple[bytes, bytes]:
    """(certificate PEM, private key PEM) for ``hostnames`` (DNS names and IP addresses),
    valid from shortly before ``now`` for ``validity``.

    The first DNS name (else the first IP) is the common name; all are SANs; unspecified
    addresses (0.0.0.0, ::) are left out. The key is encrypted with ``password`` if given.
    """
    sans: list[x509.GeneralName] = []
    for name in hostnames:
        san = _san(name)
        if san is not None and san not in sans:
            sans.append(san)
    if not sans:
        raise ValueError(f"no usable host name for a certificate among {list(hostnames)!r}")
    dns = [s.value for s in sans if isinstance(s, x509.DNSName)]
    common_name = dns[0] if dns else str(sans[0].value)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False,
        ), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    return cert.public_bytes(serialization.Encoding.PEM), key_pem
