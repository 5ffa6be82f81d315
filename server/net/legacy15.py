"""The Tarantool 1.5 port: programs written for 1.5 + queue reach queuebox unchanged.

Owns: `Box15Connection`, the shared connection shell (`shell.py`) around the
sans-I/O 1.5 codec (protocol/box15.py); `factory`, what the start-up hands
the listener for `legacy_listen`; the request-type table (PING, CALL; any
other type gets 1.5's unsupported-command error); the call of a legacy queue
function with the CALL's byte strings as arguments; and the packing of its
answer, its error or a failed durability barrier as 1.5 replies.

Must not know queue semantics or parse numbers: a name is resolved by the
queue glue (`QueueCalls.resolve_legacy`) to the same legacy core, waiting
takes, durability barrier and sessions as on the IPROTO port, whose argument
parsing already reads numbers from decimal strings and names from bytes, as
1.5's `tonumber` did. So the tasks are the same whichever port reaches them,
and a disconnect gives back what the connection took. Must not touch the main
port: the listener's shutdown stops and closes these connections too, since
they sit in `app.connections`.

1.5 had no login: every connection here is guest, with guest's rights, checked
by the same Grant and handlers as on the IPROTO port (legacy tubes are named
`space<N>.<tube>` in grants: rights.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from queuebox.protocol import box15
from queuebox.protocol.box15 import Box15Error, Frame

from ..access.rights import access_denied
from ..core.app import App
from ..core.dispatch import ER_SHUTDOWN_TEXT, Held, Reply, failed_log
from ..core.session import Session
from ..queue.queue_calls import QueueCalls
from ..runtime.errors import error_code_and_message
from ..settings.config import READ
from .shell import ConnectionShell, bad_frame_log

# meta's fields the 1.5 module stored with box.pack('l') and returned as they
# were: next_event, created, ttl, ttr, cbury, ctaken, now (QUEUE.md §12).
META_TIME64 = frozenset({3, 7, 8, 9, 10, 11, 12})
WAL_FAILED = "Failed to write to disk"

Handler15 = Callable[[Frame, Session, QueueCalls], Reply]


class Box15Connection(ConnectionShell):
    kind = "legacy connection"
    port = "1.5"

    def __init__(self, app: App, queue_of: Callable[[], QueueCalls | None]) -> None:
        super().__init__(app)
        # Asked per read: a replica has no queue until it is promoted.
        self.queue_of = queue_of
        # Its own name for its own type: reading.py knows it as `decoder`.
        self._box15 = box15.Box15Decoder(app.config.max_frame)
        self.decoder = self._box15

    def barrier_failed(self, sync: int, error: BaseException | None) -> bytes:
        return wal_failed(self.session, sync, error)

    def frame_dropped(self, head: bytes, size: int) -> bytes:
        type_, _, sync = box15.HEADER.unpack_from(head) if len(head) >= 12 else (0, 0, 0)
        message = f"Failed to allocate {size} bytes in buffer_budget for a request"
        return box15.encode_error(type_, sync, box15.ER_MEMORY_ISSUE, message)

    def decode(self, data: bytes) -> list[Frame | Box15Error]:
        return self._box15.feed(data)

    def decode_frame(self, frame: memoryview) -> list[Frame | Box15Error]:
        return self._box15.feed(bytes(frame))

    def handle(self, items: list[Any]) -> None:
        session, queue = self.session, self.queue_of()
        for item in items:
            if isinstance(item, Box15Error):  # the only kind feed returns is fatal
                bad_frame_log.warning(
                    "bad frame, closing",
                    conn_id=self.conn_id,
                    peer=session.peer,
                    error=item.message,
                )
                self.close()
                return
            if item.type != box15.PING and not self.connlog.loud:
                self.connlog.promote()  # more than a health check: worth an info line
            try:
                if queue is None and item.type != box15.PING:
                    raise Box15Error(box15.ER_NONMASTER, box15.NONMASTER)
                assert queue is not None or item.type == box15.PING
                reply = REQUESTS.get(item.type, handle_unsupported)(item, session, queue)  # type: ignore[arg-type]
            except Box15Error as error:
                reply = box15.encode_error(item.type, item.sync, error.code, error.message)
            except Exception as exc:
                reply = error_reply(item, exc)
            self.answer(reply)
        self.done_reading(bool(items))


# --- requests: (frame, session, queue) -> reply bytes, Held or a coroutine ---


def handle_ping(frame: Frame, s: Session, queue: QueueCalls) -> Reply:
    return box15.encode_ping(frame.sync)


def handle_unsupported(frame: Frame, s: Session, queue: QueueCalls) -> Reply:
    raise box15.illegal(box15.UNSUPPORTED, frame)


def handle_call(frame: Frame, s: Session, queue: QueueCalls) -> Reply:
    """Like dispatch.run_handler: inline, or a coroutine for a waiting take; the
    reply waits for the durability barrier, so no change is acked before it is
    on disk."""
    call = box15.parse_call(frame)
    name = call.name
    found = queue.resolve_legacy(name)
    if found is None:
        raise Box15Error(box15.ER_NO_SUCH_PROC, box15.NO_SUCH_PROC.format(name))
    access = found.right
    if not s.grant.allows(access, found.tube):  # the tube itself: the handler checks it
        denied = access_denied(name, s.user).message
        raise Box15Error(box15.ER_PROC_LUA, box15.LUA_ERROR.format(denied))
    if access != READ and s.app.refuses_changes():
        raise Box15Error(box15.ER_NONMASTER, box15.NONMASTER)
    try:
        result = found.call(s, list(call.args))
        if not isinstance(result, list):
            return _finish(frame, s, name, result, found.writes)
        reply = encode_result(frame, name, result)
    except Exception as exc:
        reply = error_reply(frame, exc)
    barrier = s.app.durability.barrier(found.writes)
    return reply if barrier is None else Held(barrier, frame.sync, reply)


async def _finish(
    frame: Frame, s: Session, name: str, waiting: Awaitable[list[Any]], writes: bool
) -> bytes | Held:
    """A waiting take: its answer, held for the durability barrier like an inline
    one (dispatch._finish)."""
    try:
        reply = encode_result(frame, name, await waiting)
    except asyncio.CancelledError:  # only shutdown cancels a waiting call
        reply = lua_error(frame, ER_SHUTDOWN_TEXT)
    except Exception as exc:
        reply = error_reply(frame, exc)
    try:
        barrier = s.app.durability.barrier(writes)
    except Exception as exc:  # never ack what may not be durable
        return wal_failed(s, frame.sync, exc)
    return reply if barrier is None else Held(barrier, frame.sync, reply)


REQUESTS: dict[int, Handler15] = {
    box15.PING: handle_ping,
    box15.CALL: handle_call,
}


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


# --- errors ---


def lua_error(frame: Frame, text: str) -> bytes:
    return box15.encode_error(
        frame.type, frame.sync, box15.ER_PROC_LUA, box15.LUA_ERROR.format(text)
    )


def error_reply(frame: Frame, exc: BaseException) -> bytes:
    """A queue error is what 1.5's Lua `error()` became: ER_PROC_LUA, "Lua error: <text>"."""
    found = error_code_and_message(exc)
    if found is None:  # our bug, not the client's: logged with its traceback
        failed_log.error("legacy request failed", type(exc), error=repr(exc), exc_info=exc)
        return lua_error(frame, f"{type(exc).__name__}: {exc}")
    return lua_error(frame, found[1])


def wal_failed(s: Session, sync: int, exc: BaseException | None) -> bytes:
    # The change may not be on disk: the client must not get a success. Only a
    # CALL changes anything, so only a CALL's reply is ever held.
    failed_log.error("durability barrier failed", type(exc), conn_id=s.conn_id, error=repr(exc))
    return box15.encode_error(box15.CALL, sync, box15.ER_WAL_IO, WAL_FAILED)
