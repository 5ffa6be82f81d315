"""Certificates for the TLS tests, made fresh with `cryptography` into a test's tmp_path.

`Authority(dir, name)` is a CA; `issue(cn)` writes a key and a certificate it
signed for `cn` (a server's names 127.0.0.1 and localhost, so hostname checks
pass on loopback; `days=-1` makes one that has already expired). Nothing here
is ever committed: every test makes its own.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import tarantool
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOOPBACK_NAMES = [
    x509.DNSName("localhost"),
    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
]


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


class Authority:
    """A self-signed CA in `directory`; its certificate is `self.cert`."""

    def __init__(self, directory: Path, name: str = "queuebox test CA") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = _name(name)
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.cert = directory / f"{name.replace(' ', '-')}.pem"
        self.cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, cn: str, *, server: bool = False, days: int = 30, tag: str = "") -> Issued:
        """A key and certificate for `cn`; server=True names loopback and allows
        serving; days < 0: expired that many days ago (valid the day before)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        end = now + datetime.timedelta(days=days)
        # A server's certificate is also the one a replica shows its primary.
        usage = [ExtendedKeyUsageOID.CLIENT_AUTH]
        if server:
            usage.append(ExtendedKeyUsageOID.SERVER_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(min(now, end) - datetime.timedelta(days=2))
            .not_valid_after(end)
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(LOOPBACK_NAMES), critical=False
            )
        certificate = builder.sign(self.key, hashes.SHA256())
        stem = self.directory / f"{cn}{tag}"
        issued = Issued(stem.with_suffix(".crt"), stem.with_suffix(".key"))
        issued.cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        _write_key(key, issued.key)
        return issued


@dataclass
class Pki:
    ca: Authority
    server: Issued
    tester: Issued
    reader: Issued
    stranger: Issued  # a CN that names no user
    other_ca: Authority
    forged_tester: Issued  # CN tester, signed by the other CA
    expired_tester: Issued


def make_pki(directory: Path) -> Pki:
    """A CA with a server, users' and a stranger's certificates, another CA, and bad ones."""
    ca = Authority(directory / "pki")
    other = Authority(directory / "other", "another CA")
    return Pki(
        ca,
        ca.issue("server", server=True),
        ca.issue("tester"),
        ca.issue("reader"),
        ca.issue("stranger"),
        other,
        other.issue("tester"),
        ca.issue("tester", days=-1, tag="-expired"),
    )


def tls_flags(pki: Pki, *extra: str) -> tuple[str, ...]:
    return (
        "--tls-cert", str(pki.server.cert), "--tls-key", str(pki.server.key),
        "--tls-ca", str(pki.ca.cert), *extra,
    )  # fmt: skip


def tarantool_tls(
    port: int, pki: Pki, cert: Issued | None = None, **kwargs: object
) -> tarantool.Connection:
    """tarantool-python's own TLS (transport="ssl", as for Tarantool Enterprise)."""
    files = {"ssl_cert_file": str(cert.cert), "ssl_key_file": str(cert.key)} if cert else {}
    return tarantool.Connection(
        "127.0.0.1", port, transport="ssl", ssl_ca_file=str(pki.ca.cert),
        socket_timeout=10, **files, **kwargs,
    )  # fmt: skip
