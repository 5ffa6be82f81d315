"""One IPROTO client connection: the shared shell (`shell.py`) around `protocol.RequestDecoder`.

Owns: the greeting, feeding received bytes to the decoder, logging in the
user a verified TLS client certificate names (runtime/tls.py: its CN; an
unknown one stays guest), the request loop (each request through the
request-type table, `requests.py`, with the connection's `Session`; its
reply queued on the shell's `Replies`), deferring a throttled AUTH and what
follows it (authguard.py), the IPROTO error reply of a bad frame (closing on
a fatal one), of a failed durability barrier and of a frame the buffer
budget dropped. Must not know what a request does: handlers get the request
and the session, never the connection, and return what to send
(`dispatch.Reply`); batching, held replies, waiting tasks and back-pressure
are the shell's.
"""

from __future__ import annotations

import asyncio
from time import perf_counter
from typing import cast

from queuebox import protocol
from queuebox.protocol import ErrorCode, ProtocolError, Request

from ..core.app import App
from ..core.dispatch import Deferred, Held, barrier_failed, error_reply
from ..core.requests import REQUEST_TABLE, handle_unknown
from ..runtime.logs import get_logger
from ..runtime.tls import certificate_user
from .connlog import HANDSHAKE_TYPES
from .shell import ConnectionShell, bad_frame_log

log = get_logger("queuebox.conn")


class Connection(ConnectionShell):
    def __init__(self, app: App) -> None:
        super().__init__(app)
        self._requests = protocol.RequestDecoder(app.config.max_frame)
        # reading.py's `decoder` is what cuts frames: the splitter, asked
        # straight (no property that asks it on every read).
        self.decoder = self._requests.splitter

    def opened(self, transport: asyncio.Transport) -> None:
        app = self.app
        user = certificate_user(transport.get_extra_info("ssl_object"))
        if user is not None:
            self._log_in_by_certificate(user)
        transport.write(
            protocol.make_greeting(
                app.config.greeting_version, app.instance_uuid, self.session.salt
            )
        )

    def _log_in_by_certificate(self, user: str) -> None:
        """The handshake verified the certificate against tls_ca: its CN is
        proof enough, as a password would be; the user's rights still hold."""
        if not self.app.users.exists(user):
            log.warning(
                "client certificate names no user: stays guest", peer=self.session.peer, cn=user
            )
            return
        self.session.set_user(user)

    def barrier_failed(self, sync: int, error: BaseException | None) -> bytes:
        return barrier_failed(self.session, sync, error)

    def frame_dropped(self, head: bytes, size: int) -> bytes:
        message = f"Failed to allocate {size} bytes in buffer_budget for a request"
        sync = protocol.sync_of_partial(head)
        return protocol.encode_error(
            sync, self.session.schema_version, ErrorCode.ER_MEMORY_ISSUE, message
        )

    def decode(self, data: bytes) -> list[Request | ProtocolError]:
        try:
            return self._requests.feed(data)
        except Exception:
            return self._decoder_failed()

    def decode_frame(self, frame: memoryview) -> list[Request | ProtocolError]:
        try:
            return [self._requests.feed_frame(frame)]
        except Exception:
            return self._decoder_failed()

    def _decoder_failed(self) -> list[Request | ProtocolError]:
        # The decoder promises ProtocolError items only; anything else is
        # our bug, and this connection's stream position is lost.
        log.exception("decoder failed", conn_id=self.conn_id)
        self.close()
        return []

    def handle(self, items: list[Request | ProtocolError]) -> None:
        """The request loop: run each request through the table in order and
        queue its reply (`Replies`: bytes, and with wal_mode=write a reply held
        for this turn's WAL write, in place); hand the shell what goes out later
        (`answer`), defer a throttled AUTH and what follows it, answer a bad frame."""
        if self._deferred is not None:  # read before the pause took effect: wait too
            self._deferred.extend(items)
            return
        session = self.session
        replies = self.replies
        table, unknown = REQUEST_TABLE, handle_unknown  # module globals: read once a read
        observe = self.app.observe_request  # metrics: None when off
        in_place = self.app.durability.on_loop
        connlog = self.connlog
        quiet = not connlog.loud  # only promote() changes it, here or at its timer
        clock = self.app.clock
        clock.hold()  # the calls of one read are given one time (core/clock.py)
        try:
            index, count = 0, len(items)
            while index < count:
                item = items[index]
                if type(item) is not Request:
                    self._protocol_error(cast(ProtocolError, item))
                    if self._closing:
                        break
                    index += 1
                    continue
                if quiet and item.type not in HANDSHAKE_TYPES:
                    connlog.promote()  # more than a health check: worth an info line
                    quiet = False
                started = perf_counter() if observe is not None else 0.0
                try:
                    reply = table.get(item.type, unknown)(item, session)
                except Exception as exc:
                    reply = error_reply(session, item.sync, exc)
                if observe is not None:
                    observe(item.type, perf_counter() - started)
                if type(reply) is bytes:
                    replies.add(reply)
                elif type(reply) is Held and in_place and replies.add_in_place(reply):
                    pass
                elif type(reply) is Deferred:
                    self._defer(items[index:], reply.at)
                    break
                else:
                    self.answer(reply)
                index += 1
        finally:
            clock.release()
        self.done_reading(bool(items))

    def _defer(self, items: list[Request | ProtocolError], at: float) -> None:
        """Run `items` (a throttled AUTH first) at the guard's time `at`; read
        nothing meanwhile, so what follows the AUTH runs after it, as it would."""
        self._deferred = items
        self._update_reading()
        wait = max(0.0, at - self.app.auth_guard.clock())
        self.loop.call_later(wait, self._run_deferred)

    def _run_deferred(self) -> None:
        items = self._deferred
        if items is None or self._closing or self._stopped:
            return  # connection_lost gives the AUTH's reserved time back
        self._deferred = None
        self.handle(items)
        self._update_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deferred is not None:
            self._deferred = None
            if self.session.auth_reserved:
                self.session.auth_reserved = False
                self.app.auth_guard.withdrawn(self.session.address)
        super().connection_lost(exc)

    def _protocol_error(self, error: ProtocolError) -> None:
        self.replies.add(
            protocol.encode_error(
                error.sync, self.session.schema_version, error.code, error.message
            )
        )
        if error.fatal:
            bad_frame_log.warning(
                "bad frame, closing",
                conn_id=self.conn_id,
                peer=self.session.peer,
                error=error.message,
            )
            self.close()
        else:
            log.debug("bad request", conn_id=self.conn_id, error=error.message)
