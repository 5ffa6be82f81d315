"""TLS: the certificate every listening port presents, and the ones this server dials with.

Owns: `ServerTls`, the one `ssl.SSLContext` the IPROTO, 1.5 and HTTP ports
share (made from `tls_cert`/`tls_key`, asking for client certificates signed
by `tls_ca`), its reload from the same files on SIGHUP, the user a verified
client certificate names (`certificate_user`), and `client_context`, the
context of an outgoing connection (a replica to its primary). Must not know
a port, a request or a user's rights: it takes file names and gives contexts.

Why one context, changed in place: every listening socket keeps the context
it was created with, and OpenSSL copies a context's certificate into each new
connection when its handshake starts. Loading new files into the same
context therefore changes what new handshakes present, while connections
already open keep theirs and are never dropped. The files are first loaded
into a scratch context, so a bad pair is refused and the old one stays.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

# tarantool-python offers TLS 1.2 only; nothing older is accepted.
MIN_VERSION = ssl.TLSVersion.TLSv1_2
CLIENT_AUTH = {"optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsError(Exception):
    """A certificate, key or CA file that cannot be used; the text says which and why."""


@dataclass(frozen=True)
class TlsFiles:
    cert: str
    key: str
    ca: str = ""  # client certificates must be signed by it; "": none asked for
    client_auth: str = "optional"  # with ca: "optional" or "required"


def _load(context: ssl.SSLContext, files: TlsFiles) -> None:
    try:
        context.load_cert_chain(files.cert, files.key)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"tls_cert {files.cert} / tls_key {files.key}: {_reason(exc)}") from None
    if files.ca:
        try:
            context.load_verify_locations(cafile=files.ca)
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(f"tls_ca {files.ca}: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc)


def _new_server_context(files: TlsFiles) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MIN_VERSION
    if files.ca:
        context.verify_mode = CLIENT_AUTH[files.client_auth]
    _load(context, files)
    return context


class ServerTls:
    """The listening ports' context; `reload()` re-reads its files into it."""

    def __init__(self, files: TlsFiles) -> None:
        self.files = files
        self.context = _new_server_context(files)
        self.reloads = 0

    def reload(self) -> None:
        """Present the files' current certificate from the next handshake on;
        TlsError (and the old certificate kept) when they cannot be used. A CA
        is added to the trusted ones: one taken out stays trusted until a restart."""
        _new_server_context(self.files)  # refused here, before the live one changes
        _load(self.context, self.files)
        self.reloads += 1


def certificate_user(ssl_object: Any) -> str | None:
    """The common name (CN) of a client's verified certificate, None without one."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def client_context(ca: str = "", cert: str = "", key: str = "") -> ssl.SSLContext:
    """An outgoing connection's context: the server verified against `ca` (else the
    system's CAs) and its name checked; `cert`/`key` presented when given."""
    try:
        context = ssl.create_default_context(cafile=ca or None)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"CA file {ca}: {_reason(exc)}") from None
    context.minimum_version = MIN_VERSION
    if cert:
        try:
            context.load_cert_chain(cert, key or None)
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(f"certificate {cert} / key {key}: {_reason(exc)}") from None
    return context
