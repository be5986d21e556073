"""Certificates made by the tests (``cryptography``): a private CA and server certificates
signed by it, for loopback hubs over TLS."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Pki:
    """The files of one test PKI."""

    ca: Path  # the CA certificate (what clients trust)
    cert: Path  # the server certificate for 127.0.0.1 and localhost
    key: Path
    expired_cert: Path  # same names, validity over
    other_host_cert: Path  # valid, for another host name only
    foreign_ca: Path  # a CA that signed none of them


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _server(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    key: ec.EllipticCurvePrivateKey,
    names: list[x509.GeneralName],
    *,
    expired: bool = False,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    start, end = (
        (now - dt.timedelta(days=10), now - dt.timedelta(days=1))
        if expired
        else (
            now - dt.timedelta(hours=1),
            now + dt.timedelta(days=7),
        )
    )
    return (
        x509.CertificateBuilder()
        .subject_name(_name("memviewer hub"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _pem(path: Path, cert: x509.Certificate) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def make_pki(folder: Path) -> Pki:
    """A CA and the server certificates the tests need, written under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = _ca("memviewer test CA")
    foreign, _ = _ca("someone else's CA")
    key = _key()
    local = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    key_path = folder / "hub.key"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return Pki(
        ca=_pem(folder / "ca.pem", ca),
        cert=_pem(folder / "hub.pem", _server(ca, ca_key, key, local)),
        key=key_path,
        expired_cert=_pem(folder / "expired.pem", _server(ca, ca_key, key, local, expired=True)),
        other_host_cert=_pem(
            folder / "other.pem", _server(ca, ca_key, key, [x509.DNSName("hub.example.org")])
        ),
        foreign_ca=_pem(folder / "foreign-ca.pem", foreign),
    )
