"""One load-generator connection: many requests in flight, replies matched by SYNC.

Owns: `BenchConnection` (an asyncio Protocol: greeting, optional AUTH, then a
stream of pre-encoded requests) and `open_connection`. Requests are appended
to one output buffer and written once per loop turn, so a burst of replies
that triggers a burst of new requests costs one send() instead of hundreds.
Each request's send time is kept next to its callback; the reply time is
read once per received chunk, which is what a reader of the socket would
see anyway. Must not know what a request means: callers bring a `Template`
and a callback `on_reply(response, latency_ns)`.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any, cast

from queuebox import protocol

from .frames import Template

GREETING_SIZE = 128

OnReply = Callable[[Any, int], None]

_pack_sync = struct.Struct(">Q").pack_into


class BenchError(Exception):
    """The benchmark cannot go on: no connection, refused login, a broken stream."""


class BenchConnection(asyncio.Protocol):
    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.greeting: asyncio.Future[Any] = self._loop.create_future()
        self.lost: asyncio.Future[None] = self._loop.create_future()
        self._head = bytearray()  # greeting bytes until all 128 arrived
        self._decoder = protocol.ResponseDecoder()
        self._pending: dict[int, tuple[OnReply, int]] = {}
        self._sync = 0
        self._out = bytearray()
        self._flush_queued = False
        self.lost_reason: BenchError | None = None
        self.now = 0  # perf_counter_ns() when the latest chunk of replies arrived

    # --- sending ---

    def send(self, template: Template, on_reply: OnReply, slot: bytes = b"") -> None:
        """Queue one request built from `template`; `slot` fills its patchable field."""
        self._sync = sync = self._sync + 1
        out = self._out
        at = len(out)
        out += template.frame
        _pack_sync(out, at + template.sync_at, sync)
        if slot:
            at += template.slot_at
            out[at : at + template.slot_len] = slot
        self._pending[sync] = (on_reply, perf_counter_ns())
        if not self._flush_queued:
            self._flush_queued = True
            self._loop.call_soon(self._flush)

    def send_encoded(self, encode: Callable[[int], bytes], on_reply: OnReply) -> None:
        """Queue a request that is not pre-encoded: `encode(sync)` gives its bytes."""
        self._sync = sync = self._sync + 1
        self._out += encode(sync)
        self._pending[sync] = (on_reply, perf_counter_ns())
        if not self._flush_queued:
            self._flush_queued = True
            self._loop.call_soon(self._flush)

    async def request(self, encode: Callable[[int], bytes]) -> Any:
        """Send one request and wait for its reply (setup and checks, not load)."""
        reply: asyncio.Future[Any] = self._loop.create_future()

        def done(response: Any, _latency: int) -> None:
            if not reply.done():
                reply.set_result(response)

        self.send_encoded(encode, done)
        waiters: set[asyncio.Future[Any]] = {reply, self.lost}
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if not reply.done():
            raise BenchError("connection lost while waiting for a reply")
        return reply.result()

    def _flush(self) -> None:
        self._flush_queued = False
        if self._out and self.transport is not None and not self.lost.done():
            # Hand the buffer over and start a new one: the transport may keep
            # a reference to unsent bytes, so they must never change again.
            out, self._out = self._out, bytearray()
            self.transport.write(out)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # --- asyncio.Protocol ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; same methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.greeting.done():
            self._head += data
            if len(self._head) < GREETING_SIZE:
                return
            head, data = bytes(self._head[:GREETING_SIZE]), bytes(self._head[GREETING_SIZE:])
            self._head = bytearray()
            try:
                self.greeting.set_result(protocol.parse_greeting(head))
            except protocol.ProtocolError as exc:
                self.greeting.set_exception(BenchError(f"not an IPROTO server: {exc}"))
                self.close()
                return
            if not data:
                return
        try:
            responses = self._decoder.feed(data)
        except protocol.ProtocolError as exc:
            self._fail(BenchError(f"cannot decode the server's replies: {exc}"))
            return
        self.now = now = perf_counter_ns()
        pending = self._pending
        for response in responses:
            entry = pending.pop(response.sync, None)
            if entry is not None:
                entry[0](response, now - entry[1])
        if self._out:
            # Replies usually trigger new requests: send them now rather than
            # on the next loop turn.
            self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(BenchError(f"connection lost: {exc}" if exc else "connection closed"))

    def _fail(self, error: BenchError) -> None:
        if not self.greeting.done():
            self.greeting.set_exception(error)
        if not self.lost.done():
            self.lost.set_result(None)
            self.lost_reason = error
        self.close()


async def open_connection(
    host: str, port: int, user: str | None, password: str | None, timeout: float = 10.0
) -> BenchConnection:
    """Connect, read the greeting and log in when a user is given."""
    loop = asyncio.get_running_loop()
    try:
        _, conn = await asyncio.wait_for(
            loop.create_connection(BenchConnection, host, port), timeout
        )
        greeting = await asyncio.wait_for(conn.greeting, timeout)
    except (OSError, TimeoutError) as exc:
        raise BenchError(f"cannot connect to {host}:{port}: {exc or 'timeout'}") from None
    if user:
        scramble = protocol.scramble(greeting.salt, password or "")
        reply = await asyncio.wait_for(
            conn.request(lambda sync: protocol.encode_auth(sync, user, scramble)), timeout
        )
        if not reply.ok:
            conn.close()
            raise BenchError(f"login as {user!r} refused: {reply.error_message}")
    return conn
