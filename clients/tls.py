"""TLS for the client: the context a connection to a server with `tls_cert` uses.

Owns: `tls_context`, made from the files an application or the command
lines name (`--tls-ca`, `--tls-cert`, `--tls-key`): the server's certificate
is checked against the CA (the system's CAs without one) and must name the
host dialled; a client certificate logs in as the user its common name
names, when the server trusts its CA. Must not open sockets.
"""

from __future__ import annotations

import ssl

__all__ = ["tls_context"]


def tls_context(
    ca: str | None = None, cert: str | None = None, key: str | None = None
) -> ssl.SSLContext:
    """A client context; OSError or ssl.SSLError when a file cannot be used.

    `cert` (PEM, with its key in `key` or in the same file) is shown to a server
    that asks for a client certificate. TLS 1.2 at least: the server offers nothing
    older."""
    context = ssl.create_default_context(cafile=ca or None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert:
        context.load_cert_chain(cert, key or None)
    elif key:
        raise ValueError("a TLS key without its certificate: give the certificate too")
    return context
