"""The connection shell both ports share: an asyncio.BufferedProtocol around a sans-I/O codec.

Owns: a client's place in `app.connections` (its slot: slots.py; refused
while shutting down), its `Session`, batching replies into one transport
write per loop turn (queued on `Replies`: replies.py), replies held until
their durability barrier, the tasks of requests that wait (kept in
`app.tasks`, so shutdown sees them), the in-flight accounting and
back-pressure, and stop_reading/close/abort for the
listener's shutdown.
Reading under the buffer budget is `reading.py`'s part of the same object,
the watchdog (time limits, and the connection's side of slots.py)
`watchdog.py`'s.
Must not know a wire format: a port subclasses it (`connection.py`: IPROTO;
`legacy15.py`: Tarantool 1.5), has a `decoder`, decodes bytes and runs its
request table (reading.py's hooks), hands each handler's answer to the
shell, and says what a failed barrier answers (`barrier_failed`).

Requests are answered out of order, matched by sync: bytes go out at the end
of this loop turn; a held reply goes out when its barrier completes (with
wal_mode=write, the turn's one WAL write is followed by the flush() of every
connection waiting for it, or `app.durability.commit_now()` writes the WAL
inside flush(); so held replies go out with the rest, or as errors if the
write failed); a
coroutine (a call that must wait) runs as a task and its reply goes out when
done, so a blocked call never holds up the next request.

Back-pressure, so a client that sends without reading cannot make us buffer
without bound:

    reading ──(transport above write_high_water: pause_writing)──▶ paused
    reading ──(max_in_flight_per_conn requests waiting)──────────▶ paused
    reading ──(a frame waits for buffer_budget: reading.py)──────▶ paused
    reading ──(a throttled AUTH waits its turn: authguard.py)────▶ paused
    paused ──(every reason above cleared)────────────────────────▶ reading
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from time import monotonic
from typing import Any, cast

from ..core.app import App
from ..core.dispatch import Held, Reply
from ..core.session import Session
from ..runtime.logs import RateLimitedLog, get_logger
from .connlog import ConnectionLog
from .replies import Replies
from .watchdog import WatchedConnection

log = get_logger("queuebox.conn")
# Lines a flood of sockets would repeat: a few a second, with counts.
refused_log = RateLimitedLog(log, burst=5, every_s=1.0)
bad_frame_log = RateLimitedLog(log, burst=10, every_s=0.2)


class ConnectionShell(WatchedConnection):
    # How the log names this port's connections ("legacy connection opened").
    kind = "connection"
    port = "iproto"  # app.LiveConnection

    def __init__(self, app: App) -> None:
        self.app = app
        self.loop = asyncio.get_running_loop()
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self.session = Session(app, 0, self.closed)
        self.session.outlet = self
        self.conn_id = 0
        self.transport: asyncio.Transport | None = None
        self.in_flight = 0
        self._max_in_flight = app.config.max_in_flight_per_conn
        # This turn's replies; with wal_mode=write some wait in place for the
        # turn's WAL write, and flush() writes first.
        self.replies = Replies()
        # Replies waiting for a durability barrier, per barrier future.
        self._held: dict[asyncio.Future[Any], list[Held]] = {}
        self._flush_scheduled = False
        self._write_paused = False
        self._reading_paused = False
        self._closing = False
        self._stopped = False  # shutdown: no more requests, replies still go out
        self._init_reading(app.buffer_budget)
        # Requests waiting for a throttled AUTH to run first (connection.py).
        self._deferred: list[Any] | None = None
        self._init_watchdog()
        self.connlog = ConnectionLog(self.session, self.loop, self.kind)

    # --- what a port says ---

    def opened(self, transport: asyncio.Transport) -> None:
        """The connection is accepted: write what the port says first (a greeting)."""

    def barrier_failed(self, sync: int, error: BaseException | None) -> bytes:
        """The reply to request `sync` whose change may not be on disk."""
        raise NotImplementedError

    # --- asyncio.Protocol ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        session = self.session
        session.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        address = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        app = self.app
        reason = "shutting down" if app.shutting_down else app.slots.admit(self, address)
        if reason is not None:
            # Refused before anything is written: a client sees the socket close
            # at once instead of a half-working session.
            refused_log.warning(
                f"{self.kind} refused",
                reason,
                peer=session.peer,
                reason=reason,
                max_connections=app.config.max_connections,
                from_address=app.slots.held_by(address),
            )
            self._closing = True
            transport.abort()
            return
        self.conn_id = session.conn_id = app.next_conn_id()
        transport.set_write_buffer_limits(high=app.config.write_high_water)
        self.opened(transport)
        app.connections[self.conn_id] = self
        self.connlog.opened()
        self._arm_watchdog(app.config.handshake_timeout_s)
        app.on_connect(self.conn_id)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self.replies.clear()
        if not self.closed.done():
            self.closed.set_result(None)
        self._stop_watchdog()
        self._stop_reading_frames()
        if self.conn_id:
            self.app.slots.release(self)
            self._budget.remove(self)
            self.connlog.closed(exc)
            self.app.on_disconnect(self.conn_id)  # its taken tasks go back

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()
        self._account()

    # --- limits ---

    def done_reading(self, any_request: bool) -> None:
        """End of a read: write the replies, keep the limits."""
        if any_request:
            self._last_request = monotonic()  # idle from now (slots.py, the watchdog)
            if not self._spoken:
                self._end_handshake()
            if self.session.close_requested:
                self.close()
                return
        if self.replies.awaiting_write() and self._schedule_flush():
            return
        self.flush()

    def _schedule_flush(self) -> bool:
        """Replies wait for this turn's WAL write: True if a flush comes after
        it (one write for every connection of the turn, then their replies, not
        one write per connection: commit.py), or is coming already; False if
        no write is coming (the caller flushes, which writes first)."""
        if self._flush_scheduled:
            return True
        if self.app.durability.flush_after_write(self.flush):
            self._flush_scheduled = True
            return True
        return False

    def _flush_soon(self) -> None:
        """Flush at the end of this loop turn (a reply made outside a read)."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    # --- replies ---

    def answer(self, reply: Reply) -> None:
        """Send what a handler returned: now, after its barrier, or when its task is done.

        Queued, not written: a read ends with flush()."""
        if type(reply) is bytes:
            self.replies.add(reply)
        elif type(reply) is Held:
            self._hold(reply)
        else:
            self._spawn(cast(Coroutine[Any, Any, bytes | Held], reply))

    def send(self, reply: bytes) -> None:
        """Queue a reply produced outside a read; written at the end of this loop turn."""
        if self._closing:
            return
        self.replies.add(reply)
        self._flush_soon()

    def unsent(self) -> int:
        """Reply bytes queued or buffered by the transport, not yet sent."""
        transport = self.transport
        buffered = transport.get_write_buffer_size() if transport is not None else 0
        return buffered + self.replies.size()

    def flush(self) -> None:
        self._flush_scheduled = False
        replies = self.replies
        if replies.awaiting_write():
            # Write the WAL now (if this turn's write has not come yet); a reply
            # whose barrier failed becomes its error, one not written by
            # commit_now after all is held until it is.
            self.app.durability.commit_now()
            for held in replies.settle(self.barrier_failed):
                self._hold_until_done(held)
        out = replies.take()
        if not out:
            return
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(out[0] if len(out) == 1 else b"".join(out))
        self._account()  # what the peer has not taken counts in the buffer budget

    # --- what the listener's shutdown uses ---

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
        # wal_mode=write: the turn's changes are written by flush() itself,
        # before the replies go out, so the reply waits in place.
        if not (self.app.durability.on_loop and self.replies.add_in_place(held)):
            self._hold_until_done(held)

    def _hold_until_done(self, held: Held) -> None:
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

    def _spawn(self, coro: Coroutine[Any, Any, bytes | Held]) -> None:
        self._started()
        self._run(coro)

    def _run(self, coro: Coroutine[Any, Any, bytes | Held]) -> None:
        """A counted reply produced by a task; kept in app.tasks so shutdown sees it."""
        task = self.loop.create_task(self._answer_later(coro))
        tasks = self.app.tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def _answer_later(self, coro: Coroutine[Any, Any, bytes | Held]) -> None:
        try:
            reply = await coro
        finally:
            self._finished()
        if type(reply) is Held:
            self._send_held(reply)
        else:
            self.send(cast(bytes, reply))

    def _send_held(self, held: Held) -> None:
        """A task's reply held for its barrier: as a read's (`_hold`), so with
        wal_mode=write it goes out right after this turn's WAL write, not from
        the task once the barrier's callbacks have run (two turns later)."""
        if self._closing:
            return
        self._hold(held)
        if self.replies.awaiting_write() and not self._schedule_flush():
            self._flush_soon()

    def _after_barrier(self, fut: asyncio.Future[Any]) -> None:
        batch = self._held.pop(fut, ())
        failed = fut.cancelled() or fut.exception() is not None
        for held in batch:
            self._finished()
            reply = held.reply
            if failed:
                reply = self.barrier_failed(held.sync, None if fut.cancelled() else fut.exception())
            self.send(reply)

    async def _await_barrier(self, held: Held) -> bytes:
        try:
            await cast(Awaitable[Any], held.barrier)
        except BaseException as exc:  # a failed barrier must not ack
            return self.barrier_failed(held.sync, exc if isinstance(exc, Exception) else None)
        return held.reply

    def _started(self) -> None:
        self.in_flight += 1
        if self.in_flight >= self._max_in_flight and not self._reading_paused:
            self._update_reading()

    def _finished(self) -> None:
        self.in_flight -= 1
        if not self.in_flight:
            # Idle from its last answer, not from when the request came: a take
            # that waited longer than idle_timeout_s must leave its client time
            # to send the next one (the watchdog closed it at once).
            self._last_request = monotonic()
        if self._reading_paused:
            self._update_reading()

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None or self._closing:
            return
        should_pause = (
            self._write_paused
            or self._stopped
            or self._waiting_frame > 0
            or self._deferred is not None
            or self.in_flight >= self._max_in_flight
        )
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
