"""A replica's IPROTO connection to its primary: connect, log in, call, read.

Owns: one asyncio stream to one address (over TLS when this instance has a
certificate: `dial`), the greeting and chap-sha1 login, sending CALLs with
fresh syncs, and reading the replies and pushed chunks as
`protocol.Response`s, each read bounded by a timeout. Must not know what the
calls mean (applier.py does).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from queuebox import protocol
from queuebox.protocol import Response, ResponseDecoder
from queuebox.protocol.greeting import GREETING_SIZE

from ..runtime.tls import TlsError, client_context
from ..settings.config import Config


class LinkError(Exception):
    """The primary cannot be reached, refused us, or went quiet."""


def dial(config: Config, host: str, port: int, timeout_s: float) -> Link:
    """A link to a peer of this cluster. The instances of a cluster share their TLS:
    with `tls_cert` set, the peer's certificate is checked against `tls_ca` (else
    the system's CAs) and for its host name, and ours is shown to it, so a
    certificate whose CN is `replication_user` logs in without a password."""
    tls = None
    if config.tls_cert:
        try:
            tls = client_context(config.tls_ca, config.tls_cert, config.tls_key)
        except TlsError as exc:  # the files changed since the start
            raise LinkError(f"{host}:{port}: {exc}") from None
    return Link(host, port, timeout_s, tls)


class Link:
    def __init__(
        self, host: str, port: int, timeout_s: float, tls: ssl.SSLContext | None = None
    ) -> None:
        self.address = f"{host}:{port}"
        self._host, self._port = host, port
        self._tls = tls
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._decoder = ResponseDecoder(64 << 20)
        self._ready: list[Response] = []
        self._sync = 0

    async def open(self, user: str, password: str) -> None:
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self._host, self._port, ssl=self._tls), self.timeout_s
            )
            greeting = protocol.parse_greeting(await self._read_exactly(GREETING_SIZE))
        except (OSError, TimeoutError, protocol.ProtocolError) as e:
            self.close()
            raise LinkError(f"{self.address}: {e or type(e).__name__}") from None
        if user:
            sync = self.send_auth(user, protocol.scramble(greeting.salt, password))
            reply = await self.reply_to(sync)
            if not reply.ok:
                self.close()
                raise LinkError(f"{self.address}: login as {user!r}: {reply.error_message}")

    def send_auth(self, user: str, scramble: bytes) -> int:
        self._sync += 1
        self._write(protocol.encode_auth(self._sync, user, scramble))
        return self._sync

    def call(self, name: str, *args: Any) -> int:
        """Send a CALL; returns its sync."""
        self._sync += 1
        self._write(protocol.encode_call(self._sync, name, args))
        return self._sync

    @property
    def next_sync(self) -> int:
        return self._sync + 1

    async def reply_to(self, sync: int) -> Response:
        """The final reply to `sync` (chunks and other replies are dropped)."""
        while True:
            got = await self.next()
            if got.sync == sync and not got.is_chunk:
                return got

    async def next(self, timeout_s: float | None = None) -> Response:
        """The next reply or chunk; LinkError on silence past the timeout or a close."""
        while not self._ready:
            assert self._reader is not None
            try:
                data = await asyncio.wait_for(
                    self._reader.read(1 << 20), timeout_s or self.timeout_s
                )
            except (OSError, TimeoutError) as e:
                raise LinkError(f"{self.address}: {e or 'no word within the timeout'}") from None
            if not data:
                raise LinkError(f"{self.address}: connection closed")
            try:
                self._ready = self._decoder.feed(data)
            except protocol.ProtocolError as e:
                raise LinkError(f"{self.address}: {e}") from None
        return self._ready.pop(0)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _write(self, data: bytes) -> None:
        if self._writer is None:
            raise LinkError(f"{self.address}: not connected")
        self._writer.write(data)

    async def _read_exactly(self, n: int) -> bytes:
        assert self._reader is not None
        try:
            return await asyncio.wait_for(self._reader.readexactly(n), self.timeout_s)
        except asyncio.IncompleteReadError:
            raise LinkError(f"{self.address}: closed during the greeting") from None
