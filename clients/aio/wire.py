"""The asyncio side of one TCP connection to an IPROTO server, for `clients.aio.link`.

Owns: `Wire`, the `asyncio.Protocol` that reads the greeting, frames replies with
`protocol.ResponseDecoder`, hands each reply to the future waiting for its sync (or to
the orphan handler a call that gave up left behind), each push (an IPROTO chunk, code
0x80) to the push handler of its sync, and batches writes. A plain OK reply to
requests sent at once (`send_many`) goes to their sink undecoded: the sink reads
only what it needs. Knows nothing
of reconnects, timeouts or the queue; must not import server/, drivers/ or storage/.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, cast

from queuebox import protocol
from queuebox.clients import iproto
from queuebox.clients.errors import ConnectionLost

__all__ = ["Orphan", "Sink", "Wire"]

Orphan = Callable[[protocol.Response], None]
PushHandler = Callable[[protocol.Response], None]


class Sink(Protocol):
    """Where the replies of many requests sent at once go (`Wire.send_many`): one
    object for all of them, no future each (clients.aio.bulk)."""

    def reply(self, response: protocol.Response) -> None: ...

    def frame(self, sync: int, payload: bytes, body: int) -> None:
        """The plain OK reply (code 0) to `sync`, undecoded: its body starts at
        `payload[body]` (`protocol.reply_head`)."""

    def lost(self, error: BaseException) -> None:
        """The connection went with some of them unanswered."""


class Wire(asyncio.Protocol):
    """One TCP connection: the greeting, reply framing and the replies' waiters.

    Requests written in one loop iteration leave together, at most `write_every` to a
    write when that is set (iproto.Options.write_every), else all in one. A reply
    nobody waits for any more (its call timed out or was cancelled) goes to that
    call's orphan handler, if it left one, else it is dropped.
    """

    def __init__(self, on_lost: Callable[[Wire], None], write_every: int | None = None) -> None:
        self._write_every = write_every or 0  # 0: one write a turn, however many requests
        self._loop = asyncio.get_running_loop()
        self.greeting: asyncio.Future[bytes] = self._loop.create_future()
        self._head = bytearray()
        self._decoder = protocol.ResponseDecoder()
        self._waiters: dict[int, asyncio.Future[protocol.Response]] = {}
        self._orphans: dict[int, Orphan] = {}
        self._pushes: dict[int, PushHandler] = {}
        self._sinks: dict[int, Sink] = {}
        self._out: list[bytes] = []
        self._queued = 0  # requests in _out (a payload of send_many holds many)
        self._transport: asyncio.Transport | None = None
        self._on_lost = on_lost
        self._closing = False
        self.lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.greeting.done():
            self._head += data
            if len(self._head) < iproto.GREETING_SIZE:
                return
            self.greeting.set_result(bytes(self._head[: iproto.GREETING_SIZE]))
            data = bytes(self._head[iproto.GREETING_SIZE :])
            if not data:
                return
        payloads, fatal = self._decoder.frames(data)
        for payload in payloads:
            # A plain OK reply to a call of send_many goes to its sink undecoded (the
            # sink reads what it needs: clients.putmany); any other is decoded here.
            code, sync, body = protocol.reply_head(payload) if self._sinks else (-1, 0, 0)
            if code == 0 and (sink := self._sinks.pop(sync, None)) is not None:
                if self._pushes:
                    self._pushes.pop(sync, None)
                sink.frame(sync, payload, body)
                continue
            try:
                response = protocol.decode_response(payload)
            except protocol.ProtocolError as exc:
                self._decoder.kill()
                fatal = exc
                break
            self._dispatch(response)
        if fatal is not None:
            self.abort(ConnectionLost(f"bad reply from the server: {fatal}"))
            return
        if self._closing:
            self._close_if_idle()

    def _dispatch(self, response: protocol.Response) -> None:
        if response.is_chunk:  # a box.session.push; the final reply follows
            pushed = self._pushes.get(response.sync)
            if pushed is not None:
                pushed(response)
            return
        if self._pushes:
            self._pushes.pop(response.sync, None)
        waiter = self._waiters.pop(response.sync, None)
        if waiter is not None:
            if not waiter.done():
                waiter.set_result(response)
        elif self._sinks and (sink := self._sinks.pop(response.sync, None)) is not None:
            sink.reply(response)
        elif self._orphans:
            orphan = self._orphans.pop(response.sync, None)
            if orphan is not None:
                orphan(response)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = self.lost or ConnectionLost(f"connection lost: {exc or 'closed by the server'}")
        self.lost = reason
        if not self.greeting.done():
            self.greeting.set_exception(reason)
            # Retrieved here: a dial given up meanwhile (the link closed while it
            # reconnected) never awaits it; one that does still gets the error.
            self.greeting.exception()
        waiters, self._waiters = self._waiters, {}
        self._orphans.clear()
        self._pushes.clear()
        for waiter in waiters.values():
            if not waiter.done():
                waiter.set_exception(reason)
        sinks, self._sinks = self._sinks, {}
        for sink in {id(sink): sink for sink in sinks.values()}.values():
            sink.lost(reason)
        self._on_lost(self)

    def send(
        self, sync: int, payload: bytes, on_push: PushHandler | None = None
    ) -> asyncio.Future[protocol.Response]:
        """Queue a request for writing; the future gets its reply (or ConnectionLost),
        `on_push` each push that comes before it."""
        if self.lost is not None or self._transport is None:
            raise ConnectionLost(str(self.lost or "not connected"))
        waiter = self._loop.create_future()
        self._waiters[sync] = waiter
        if on_push is not None:
            self._pushes[sync] = on_push
        self._queue(payload, 1)
        return waiter

    def send_many(self, sync: int, count: int, payload: bytes, sink: Sink) -> None:
        """Queue `count` requests (syncs `sync`, `sync` + 1, ...) encoded in `payload`;
        their replies go to `sink`, in the order they come."""
        if self.lost is not None or self._transport is None:
            raise ConnectionLost(str(self.lost or "not connected"))
        sinks = self._sinks
        for each in range(sync, sync + count):
            sinks[each] = sink
        self._queue(payload, count)

    def _queue(self, payload: bytes, count: int) -> None:
        out = self._out
        if not out:
            self._loop.call_soon(self._flush)
        out.append(payload)
        self._queued += count
        if self._write_every and self._queued >= self._write_every:
            self._flush()

    def _flush(self) -> None:
        out, self._out = self._out, []
        self._queued = 0
        if self.lost is None and self._transport is not None and out:
            self._transport.write(out[0] if len(out) == 1 else b"".join(out))

    def abandon(self, sync: int, orphan: Orphan | None) -> None:
        """Stop waiting for `sync`; its late reply goes to `orphan`, if given."""
        self._waiters.pop(sync, None)
        self._pushes.pop(sync, None)
        if orphan is not None and self.lost is None:
            self._orphans[sync] = orphan

    def close_when_idle(self) -> None:
        """Send nothing more; close once every call sent has its reply."""
        self._closing = True
        self._close_if_idle()

    def _close_if_idle(self) -> None:
        if not self._waiters and not self._sinks and self._transport is not None:
            self._transport.close()

    def abort(self, reason: BaseException) -> None:
        self.lost = self.lost or reason
        if self._transport is not None:
            self._transport.abort()
