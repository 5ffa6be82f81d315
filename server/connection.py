"""One client connection: an asyncio.Protocol shell around the sans-I/O decoder.

Owns: the greeting, feeding received bytes to `protocol.RequestDecoder`,
running each request through the request-type table (`requests.py`) with the
connection's `Session`, batching replies into one transport write per loop
turn, replies held until their durability barrier, the tasks of requests
that wait, the in-flight accounting and back-pressure. Must not know what a
request does: handlers get the request and the session, never the
connection, and return what to send (`calls.Reply`).

Requests are answered out of order, matched by sync: a handler that returns
bytes is answered inline; a held reply goes out when its barrier completes;
a coroutine (a call that must wait) runs as a task and its reply goes out
when done, so a blocked call never holds up the next request.

Back-pressure, so a client that sends without reading cannot make us buffer
without bound:

    reading ──(transport above write_high_water: pause_writing)──▶ paused
    reading ──(max_in_flight_per_conn requests waiting)──────────▶ paused
    paused ──(every reason above cleared)────────────────────────▶ reading
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any, cast

from queuebox import protocol
from queuebox.protocol import ProtocolError, Request

from .app import App
from .calls import Held, barrier_failed, error_reply
from .logs import get_logger
from .requests import REQUEST_TABLE, handle_unknown
from .session import Session

log = get_logger("queuebox.conn")


class Connection(asyncio.Protocol):
    def __init__(self, app: App) -> None:
        self.app = app
        config = app.config
        self.loop = asyncio.get_running_loop()
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self.session = Session(app, 0, self.closed)
        self.conn_id = 0
        self.decoder = protocol.RequestDecoder(config.max_frame)
        self.transport: asyncio.Transport | None = None
        self.in_flight = 0
        self._max_in_flight = config.max_in_flight_per_conn
        self._out: list[bytes] = []
        # Replies waiting for a durability barrier, per barrier future.
        self._held: dict[asyncio.Future[Any], list[Held]] = {}
        self._flush_scheduled = False
        self._write_paused = False
        self._reading_paused = False
        self._closing = False
        self._stopped = False  # shutdown: no more requests, replies still go out

    # --- asyncio.Protocol ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.session.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        app = self.app
        if app.shutting_down or len(app.connections) >= app.config.max_connections:
            # Refused before the greeting: a client sees the socket close at
            # once instead of a half-working session.
            log.warning(
                "connection refused",
                peer=self.session.peer,
                reason="shutting down" if app.shutting_down else "max_connections reached",
                max_connections=app.config.max_connections,
            )
            self._closing = True
            transport.abort()
            return
        self.conn_id = self.session.conn_id = app.next_conn_id()
        transport.set_write_buffer_limits(high=app.config.write_high_water)
        transport.write(
            protocol.make_greeting(
                app.config.greeting_version, app.instance_uuid, self.session.salt
            )
        )
        app.connections[self.conn_id] = self
        log.info("connection opened", conn_id=self.conn_id, peer=self.session.peer)
        app.on_connect(self.conn_id)

    def data_received(self, data: bytes) -> None:
        if self._closing or self._stopped:
            return
        try:
            items = self.decoder.feed(data)
        except Exception:
            # The decoder promises ProtocolError items only; anything else is
            # our bug, and this connection's stream position is lost.
            log.exception("decoder failed", conn_id=self.conn_id)
            self.close()
            return
        out = self._out
        table = REQUEST_TABLE
        session = self.session
        for item in items:
            if type(item) is Request:
                try:
                    reply = table.get(item.type, handle_unknown)(item, session)
                except Exception as exc:
                    reply = error_reply(session, item.sync, exc)
                if type(reply) is bytes:
                    out.append(reply)
                elif type(reply) is Held:
                    self._hold(reply)
                else:
                    self._spawn(cast(Coroutine[Any, Any, bytes], reply))
            else:
                self._protocol_error(cast(ProtocolError, item))
                if self._closing:
                    break
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._out.clear()
        if not self.closed.done():
            self.closed.set_result(None)
        if self.conn_id:
            log.info(
                "connection closed",
                conn_id=self.conn_id,
                peer=self.session.peer,
                user=self.session.user,
                error=str(exc) if exc else None,
            )
            self.app.on_disconnect(self.conn_id)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    # --- the shell: replies, flushing, shutdown ---

    def send(self, reply: bytes) -> None:
        """Queue a reply produced outside data_received; written at the end of this loop turn."""
        if self._closing:
            return
        self._out.append(reply)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if not out:
            return
        self._out = []
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(out[0] if len(out) == 1 else b"".join(out))

    def stop_reading(self) -> None:
        self._stopped = True
        self._update_reading()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Write what is queued, then close."""
        self._closing = True
        self.flush()
        if self.transport is not None:
            self.transport.close()

    # --- replies that go out later, counted in flight ---

    def _hold(self, held: Held) -> None:
        """Send `held.reply` once its barrier completes."""
        self._started()
        barrier = held.barrier
        if asyncio.isfuture(barrier):
            # Group commit hands many requests the same future: one callback per
            # connection and batch, holding the batch's replies in order.
            batch = self._held.get(barrier)
            if batch is None:
                batch = self._held[barrier] = []
                barrier.add_done_callback(self._after_barrier)
            batch.append(held)
        else:
            self._run(self._await_barrier(held))

    def _spawn(self, coro: Coroutine[Any, Any, bytes]) -> None:
        self._started()
        self._run(coro)

    def _run(self, coro: Coroutine[Any, Any, bytes]) -> None:
        """A counted reply produced by a task; kept in app.tasks so shutdown sees it."""
        task = self.loop.create_task(self._answer(coro))
        tasks = self.app.tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def _answer(self, coro: Coroutine[Any, Any, bytes]) -> None:
        try:
            reply = await coro
        finally:
            self._finished()
        self.send(reply)

    def _after_barrier(self, fut: asyncio.Future[Any]) -> None:
        batch = self._held.pop(fut, ())
        failed = fut.cancelled() or fut.exception() is not None
        for held in batch:
            self._finished()
            reply = held.reply
            if failed:
                error = None if fut.cancelled() else fut.exception()
                reply = barrier_failed(self.session, held.sync, error)
            self.send(reply)

    async def _await_barrier(self, held: Held) -> bytes:
        try:
            await cast(Awaitable[Any], held.barrier)
        except BaseException as exc:  # a failed barrier must not ack
            return barrier_failed(
                self.session, held.sync, exc if isinstance(exc, Exception) else None
            )
        return held.reply

    def _started(self) -> None:
        self.in_flight += 1
        if self.in_flight >= self._max_in_flight and not self._reading_paused:
            self._update_reading()

    def _finished(self) -> None:
        self.in_flight -= 1
        if self._reading_paused:
            self._update_reading()

    # --- internals ---

    def _protocol_error(self, error: ProtocolError) -> None:
        self._out.append(
            protocol.encode_error(
                error.sync, self.session.schema_version, error.code, error.message
            )
        )
        if error.fatal:
            log.warning(
                "bad frame, closing",
                conn_id=self.conn_id,
                peer=self.session.peer,
                error=error.message,
            )
            self.close()
        else:
            log.debug("bad request", conn_id=self.conn_id, error=error.message)

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None or self._closing:
            return
        should_pause = self._write_paused or self._stopped or self.in_flight >= self._max_in_flight
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
