"""The Tarantool 1.5 port: programs written for 1.5 + queue reach queuebox unchanged.

Owns: the `legacy_listen` listener, one `Box15Connection` per client (an
asyncio.Protocol shell around the sans-I/O codec, protocol/box15.py), the
request-type table (PING, CALL; any other type gets 1.5's unsupported-command
error), the call of a legacy queue function with the CALL's byte strings as
arguments, and the packing of its answer as 1.5 tuples.

Must not know queue semantics or parse numbers: a call goes to the same legacy
core, waiting takes and connect/disconnect listeners as on the IPROTO port
(`app.queue`, server/queue_calls.py), whose argument parsing already reads
numbers from decimal strings and names from bytes, as 1.5's `tonumber` did.
So the tasks are the same whichever port reaches them. Must not touch the
main port: the main listener's shutdown closes these connections too, since
they sit in `app.connections`.

1.5 had no login: every connection here is guest, with guest's rights.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

from queuebox.protocol import box15
from queuebox.protocol.box15 import Box15Error, Frame

from .app import App
from .calls import ER_SHUTDOWN_TEXT
from .dispatch import CallContext
from .errors import error_code_and_message
from .logs import get_logger
from .queue_calls import QueueCalls
from .users import GUEST

log = get_logger("queuebox.legacy15")

STATISTICS = "queue.statistics"
READ = "read"
# meta's fields the 1.5 module stored with box.pack('l') and returned as they
# were: next_event, created, ttl, ttr, cbury, ctaken, now (QUEUE.md §12).
META_TIME64 = frozenset({3, 7, 8, 9, 10, 11, 12})
WAL_FAILED = "Failed to write to disk"


class Box15Connection(asyncio.Protocol):
    def __init__(self, app: App) -> None:
        self.app = app
        self.conn_id = 0
        self.peer = ""
        self.rights = app.users.rights(GUEST)
        self.decoder = box15.Box15Decoder(app.config.max_frame)
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self.in_flight = 0
        self._max_in_flight = app.config.max_in_flight_per_conn
        self._write_paused = False
        self._reading_paused = False
        self._closing = False
        self._stopped = False  # shutdown: no more requests, replies still go out

    # --- asyncio.Protocol ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        app = self.app
        if app.shutting_down or len(app.connections) >= app.config.max_connections:
            log.warning("legacy connection refused", peer=self.peer)
            self._closing = True
            transport.abort()
            return
        self.conn_id = app.next_conn_id()
        transport.set_write_buffer_limits(high=app.config.write_high_water)
        app.connections[self.conn_id] = self
        log.info("legacy connection opened", conn_id=self.conn_id, peer=self.peer)
        app.on_connect(self.conn_id)

    def data_received(self, data: bytes) -> None:
        if self._closing or self._stopped:
            return
        for item in self.decoder.feed(data):
            if isinstance(item, Box15Error):  # the only kind feed returns is fatal
                log.warning(
                    "bad frame, closing", conn_id=self.conn_id, peer=self.peer, error=item.message
                )
                self.close()
                return
            try:
                REQUESTS.get(item.type, handle_unsupported)(self, item)
            except Box15Error as error:
                self.send(box15.encode_error(item.type, item.sync, error.code, error.message))

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if not self.closed.done():
            self.closed.set_result(None)
        if self.conn_id:
            log.info("legacy connection closed", conn_id=self.conn_id, peer=self.peer)
            self.app.on_disconnect(self.conn_id)  # its taken tasks go back, as on IPROTO

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    # --- what handlers and the main listener's shutdown use ---

    def send(self, reply: bytes) -> None:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(reply)

    def spawn(self, coro: Any) -> None:
        """Finish a request in a task (kept in app.tasks, so shutdown waits for it)."""
        self.in_flight += 1
        self._update_reading()
        task = self.loop.create_task(coro)
        self.app.tasks.add(task)
        task.add_done_callback(self.app.tasks.discard)

    def finished(self) -> None:
        self.in_flight -= 1
        self._update_reading()

    def stop_reading(self) -> None:
        self._stopped = True
        self._update_reading()

    def close(self) -> None:
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _update_reading(self) -> None:
        # Back-pressure, as on the main port: a client that sends without
        # reading, or piles up waiting takes, stops being read.
        transport = self.transport
        if transport is None or self._closing:
            return
        pause = self._write_paused or self._stopped or self.in_flight >= self._max_in_flight
        if pause != self._reading_paused:
            self._reading_paused = pause
            (transport.pause_reading if pause else transport.resume_reading)()


# --- requests ---


def handle_ping(conn: Box15Connection, frame: Frame) -> None:
    conn.send(box15.encode_ping(frame.sync))


def handle_unsupported(conn: Box15Connection, frame: Frame) -> None:
    raise box15.illegal(box15.UNSUPPORTED, frame)


def handle_call(conn: Box15Connection, frame: Frame) -> None:
    call = box15.parse_call(frame)
    name = call.name
    queue: QueueCalls = conn.app.queue  # type: ignore[attr-defined]
    if name == STATISTICS:
        access = READ
    elif queue.legacy.has_name(name):
        access = queue.legacy.access_of(name)
    else:
        raise Box15Error(box15.ER_NO_SUCH_PROC, box15.NO_SUCH_PROC.format(name))
    if access not in conn.rights:
        raise Box15Error(
            box15.ER_PROC_LUA,
            box15.LUA_ERROR.format(
                f"Execute access to function '{name}' is denied for user '{GUEST}'"
            ),
        )
    ctx = CallContext(conn.app, conn.conn_id, GUEST, name, conn.closed)
    try:
        if name == STATISTICS:
            # Always the legacy form here: with no argument, every legacy space.
            result: list[Any] | Awaitable[list[Any]] = [queue.legacy.statistics(call.args)]
        else:
            result = queue.run("legacy", ctx, name, list(call.args))
    except Exception as exc:
        conn.send(error_reply(frame, exc))
        return
    if isinstance(result, list):
        reply = encode_result(frame, name, result)
        barrier = conn.app.durability_barrier()
        if barrier is None:
            conn.send(reply)
        else:
            conn.spawn(_reply_when_durable(conn, frame, barrier, reply))
        return
    conn.spawn(_finish(conn, frame, name, result))


async def _finish(
    conn: Box15Connection, frame: Frame, name: str, waiting: Awaitable[list[Any]]
) -> None:
    """A waiting take: its answer, then the durability barrier, then the reply."""
    try:
        reply = encode_result(frame, name, await waiting)
    except asyncio.CancelledError:  # only shutdown cancels a waiting call
        reply = lua_error(frame, ER_SHUTDOWN_TEXT)
    except Exception as exc:
        reply = error_reply(frame, exc)
    await _reply_when_durable(conn, frame, conn.app.durability_barrier(), reply)


async def _reply_when_durable(
    conn: Box15Connection, frame: Frame, barrier: Awaitable[Any] | None, reply: bytes
) -> None:
    try:
        if barrier is not None:
            await barrier
    except BaseException as exc:  # the change may not be on disk: never a success
        log.error("durability barrier failed", conn_id=conn.conn_id, error=repr(exc))
        reply = box15.encode_error(frame.type, frame.sync, box15.ER_WAL_IO, WAL_FAILED)
    finally:
        conn.finished()
    conn.send(reply)


# --- answers as 1.5 tuples ---


def encode_result(frame: Frame, name: str, result: list[Any]) -> bytes:
    """Each value the function returned is one tuple, a list one with its items as fields."""
    shape = SHAPES.get(name, _fields)
    tuples = [shape(v) if isinstance(v, list | tuple) else [box15.as_field(v)] for v in result]
    return box15.encode_tuples(frame.type, frame.sync, tuples)


def _fields(values: list[Any] | tuple[Any, ...]) -> list[bytes]:
    return [box15.as_field(v) for v in values]


def _meta(values: list[Any] | tuple[Any, ...]) -> list[bytes]:
    return [
        box15.time64(v) if i in META_TIME64 else box15.as_field(v) for i, v in enumerate(values)
    ]


SHAPES: dict[str, Callable[[list[Any] | tuple[Any, ...]], list[bytes]]] = {"queue.meta": _meta}


def lua_error(frame: Frame, text: str) -> bytes:
    return box15.encode_error(
        frame.type, frame.sync, box15.ER_PROC_LUA, box15.LUA_ERROR.format(text)
    )


def error_reply(frame: Frame, exc: BaseException) -> bytes:
    """A queue error is what 1.5's Lua `error()` became: ER_PROC_LUA, "Lua error: <text>"."""
    found = error_code_and_message(exc)
    if found is None:  # our bug, not the client's: logged with its traceback
        log.error("legacy request failed", error=repr(exc), exc_info=exc)
        return lua_error(frame, f"{type(exc).__name__}: {exc}")
    return lua_error(frame, found[1])


REQUESTS: dict[int, Callable[[Box15Connection, Frame], None]] = {
    box15.PING: handle_ping,
    box15.CALL: handle_call,
}


async def install(app: App) -> None:
    """Listen on `legacy_listen` when it is set; the main listener's shutdown ends it."""
    address = app.config.legacy_listen
    if address is None:
        return
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: Box15Connection(app), address[0], address[1], reuse_address=True, backlog=1024
    )
    app.add_shutdown_hook(server.close)
    host, port = server.sockets[0].getsockname()[:2]
    log.info("legacy port listening", protocol="tarantool 1.5", address=f"{host}:{port}", port=port)
