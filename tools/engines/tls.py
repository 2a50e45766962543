"""TLS material of the local engines: a CA made here, and a server and a client certificate it signs.

`python -m tools.engines start --tls` makes them once under `engines_dir()/tls` and each engine
started that way serves TLS with them. The server certificate names every loopback spelling
(`localhost`, `127.0.0.1`, `::1`), so clients verify it whichever they connect to. Private keys
are written 0600; the CA's key stays in the directory only to sign renewals.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from tools.engines.base import TlsFiles, tls_dir, write_private

#: What the server certificate names, and the name clients verify it by.
SERVER_NAME = "localhost"
_SERVER_ADDRESSES = ("127.0.0.1", "::1")
#: Renew when a certificate has less than this left, so a long-lived checkout never meets an expired one.
_RENEW_BEFORE = datetime.timedelta(days=30)
_VALID_FOR = datetime.timedelta(days=825)
#: The client certificate's common name: the admin user of the engines that map it to a user (none do yet).
CLIENT_NAME = "devstack-client"


def ensure_tls_files(directory: Path | None = None) -> TlsFiles:
    """The CA, server and client certificates under `directory` (default `engines_dir()/tls`), made
    when missing or close to expiry; a new CA re-signs both leaves."""
    files = TlsFiles(directory or tls_dir())
    files.dir.mkdir(parents=True, exist_ok=True)
    fresh_ca = not _still_valid(files.ca) or not files.ca_key.exists()
    if fresh_ca:
        _write_ca(files)
    if fresh_ca or not _still_valid(files.cert) or not files.key.exists():
        _write_leaf(files, files.cert, files.key, SERVER_NAME, server=True)
    if fresh_ca or not _still_valid(files.client_cert) or not files.client_key.exists():
        _write_leaf(files, files.client_cert, files.client_key, CLIENT_NAME, server=False)
    return files


def _still_valid(path: Path) -> bool:
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return False
    return cert.not_valid_after_utc - _RENEW_BEFORE > datetime.datetime.now(datetime.timezone.utc)


def _new_key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key) -> str:
    from cryptography.hazmat.primitives import serialization

    # PKCS#8: what PostgreSQL, Redis, MinIO, NATS, Kafka (PEM keystores) and Python's ssl all read.
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _name(common_name: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "devstack local engines"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject, issuer, public_key):
    from cryptography import x509

    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALID_FOR))


def _write_ca(files: TlsFiles) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    key = _new_key()
    name = _name("devstack local CA")
    cert = (_builder(name, name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    write_private(files.ca_key, _key_pem(key))
    files.ca.write_text(cert.public_bytes(serialization.Encoding.PEM).decode())


def _write_leaf(files: TlsFiles, cert_path: Path, key_path: Path, common_name: str, server: bool) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca_cert = x509.load_pem_x509_certificate(files.ca.read_bytes())
    ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    key = _new_key()
    builder = (_builder(_name(common_name), ca_cert.subject, key.public_key())
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False))
    if server:
        names = [x509.DNSName(SERVER_NAME), *(x509.IPAddress(ipaddress.ip_address(a)) for a in _SERVER_ADDRESSES)]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    # Both usages on both: Kafka's and NATS's inter-server links present the server certificate as a client.
    builder = builder.add_extension(
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    write_private(key_path, _key_pem(key))
    cert_path.write_text(cert.public_bytes(serialization.Encoding.PEM).decode())
