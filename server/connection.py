"""One client connection: an asyncio.Protocol shell around the sans-I/O decoder.

Owns: the greeting, feeding received bytes to `protocol.RequestDecoder`,
running each request through the request-type table (`requests.py`),
batching replies into one transport write per loop turn, per-connection
back-pressure, and the session state (id, logged-in user, salt). Must not
know what a function does: calls go through `calls.py` and the registry.

Requests are answered out of order, matched by sync: a handler that returns
at once is answered inline; one that must wait becomes a task and answers
when done, so a blocked call never holds up the next request.

Back-pressure, so a client that sends without reading cannot make us buffer
without bound:

    reading ──(transport above write_high_water: pause_writing)──▶ paused
    reading ──(max_in_flight_per_conn requests waiting)──────────▶ paused
    paused ──(every reason above cleared)────────────────────────▶ reading
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from time import perf_counter
from typing import Any, cast

from queuebox import protocol
from queuebox.protocol import ProtocolError, Request

from .app import App
from .calls import error_reply
from .connlog import HANDSHAKE_TYPES, ConnectionLog
from .errors import error_code_and_message
from .logs import get_logger
from .requests import REQUEST_TABLE, handle_unknown
from .users import GUEST

log = get_logger("queuebox.conn")

ER_WAL_IO = 40  # "Failed to write to disk": a durability barrier failed


class Connection(asyncio.Protocol):
    def __init__(self, app: App) -> None:
        self.app = app
        config = app.config
        self.schema_version = config.schema_version
        self.registry = app.registry
        self.conn_id = 0
        self.peer = ""
        self.user = GUEST
        self.rights = app.users.rights(GUEST)
        self.salt = protocol.new_salt()
        self.decoder = protocol.RequestDecoder(config.max_frame)
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self.in_flight = 0
        self._max_in_flight = config.max_in_flight_per_conn
        self._out: list[bytes] = []
        # Replies waiting for a durability barrier, per barrier future.
        self._held: dict[asyncio.Future[Any], list[tuple[int, bytes]]] = {}
        self._flush_scheduled = False
        self._write_paused = False
        self._reading_paused = False
        self._closing = False
        self._stopped = False  # shutdown: no more requests, replies still go out
        self.connlog = ConnectionLog(self)

    # --- asyncio.Protocol ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        app = self.app
        if app.shutting_down or len(app.connections) >= app.config.max_connections:
            # Refused before the greeting: a client sees the socket close at
            # once instead of a half-working session.
            log.warning(
                "connection refused",
                peer=self.peer,
                reason="shutting down" if app.shutting_down else "max_connections reached",
                max_connections=app.config.max_connections,
            )
            self._closing = True
            transport.abort()
            return
        self.conn_id = app.next_conn_id()
        transport.set_write_buffer_limits(high=app.config.write_high_water)
        transport.write(
            protocol.make_greeting(app.config.greeting_version, app.instance_uuid, self.salt)
        )
        app.connections[self.conn_id] = self
        self.connlog.opened()
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
        observe = self.app.observe_request  # metrics: None when off
        connlog = self.connlog
        for item in items:
            if type(item) is Request:
                if not connlog.loud and item.type not in HANDSHAKE_TYPES:
                    connlog.promote()  # more than a health check: worth an info line
                started = perf_counter() if observe is not None else 0.0
                # requests.handle_request, inlined: one call less per request.
                try:
                    reply = table.get(item.type, handle_unknown)(self, item)
                except Exception as exc:
                    reply = error_reply(self, item.sync, exc)
                if observe is not None:
                    observe(item.type, perf_counter() - started)
                if reply is not None:
                    out.append(reply)
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
            self.connlog.closed(exc)
            self.app.on_disconnect(self.conn_id)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    # --- used by request handlers ---

    def set_user(self, user: str) -> None:
        self.user = user
        self.rights = self.app.users.rights(user)

    def send(self, reply: bytes) -> None:
        """Queue a reply produced outside data_received; written at the end of this loop turn."""
        if self._closing:
            return
        self._out.append(reply)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def reply_after(self, sync: int, waitable: Awaitable[Any], reply: bytes) -> None:
        """Send `reply` once `waitable` (a durability barrier) completes."""
        self._started()
        if asyncio.isfuture(waitable):
            # Group commit hands many requests the same future: one callback per
            # connection and batch, holding the batch's replies in order.
            held = self._held.get(waitable)
            if held is None:
                held = self._held[waitable] = []
                waitable.add_done_callback(self._after_barrier)
            held.append((sync, reply))
        else:
            self.spawn(self._await_barrier(sync, waitable, reply), counted=False)

    def spawn(self, coro: Any, counted: bool = True) -> None:
        """Run a waiting request as a task; it must call `finished()` when done."""
        if counted:
            self._started()
        task = self.loop.create_task(coro)
        tasks = self.app.tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def finished(self) -> None:
        self.in_flight -= 1
        if self._reading_paused:
            self._update_reading()

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

    # --- internals ---

    def _protocol_error(self, error: ProtocolError) -> None:
        self._out.append(
            protocol.encode_error(error.sync, self.schema_version, error.code, error.message)
        )
        if error.fatal:
            log.warning(
                "bad frame, closing", conn_id=self.conn_id, peer=self.peer, error=error.message
            )
            self.close()
        else:
            log.debug("bad request", conn_id=self.conn_id, error=error.message)

    def _started(self) -> None:
        self.in_flight += 1
        if self.in_flight >= self._max_in_flight and not self._reading_paused:
            self._update_reading()

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

    def _after_barrier(self, fut: asyncio.Future[Any]) -> None:
        held = self._held.pop(fut, ())
        failed = fut.cancelled() or fut.exception() is not None
        for sync, reply in held:
            self.finished()
            if failed:
                error = None if fut.cancelled() else fut.exception()
                reply = self.barrier_failed(sync, error)
            self.send(reply)

    async def _await_barrier(self, sync: int, waitable: Awaitable[Any], reply: bytes) -> None:
        try:
            await waitable
        except BaseException as exc:  # a failed barrier must not ack
            reply = self.barrier_failed(sync, exc if isinstance(exc, Exception) else None)
        finally:
            self.finished()
        self.send(reply)

    def barrier_failed(self, sync: int, exc: BaseException | None) -> bytes:
        # The change may not be on disk: the client must not get a success.
        log.error("durability barrier failed", conn_id=self.conn_id, error=repr(exc))
        found = error_code_and_message(exc) if exc is not None else None
        code, message = found if found else (ER_WAL_IO, "Failed to write to disk")
        return protocol.encode_error(sync, self.schema_version, code, message)
