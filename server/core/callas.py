"""Calls made inside the server as a given user: the HTTP console, plugins.

Owns: `LocalSession`, a session without a socket (a conn_id of its own and a
place in `app.connections`, so the queue sees it come and go like a client:
a task taken through it goes back when it closes, and shutdown closes it),
and `call_as`, which runs one call through exactly the path of an IPROTO
CALL: the same checks (`dispatch.admit`: the rights, the name, read-only), the
same handler, the same durability barrier before it returns. Task data goes
in as Python values, packed as a client packs them, and comes back decoded.
`call_now` is the same in one synchronous step, for code that runs inside a
request (a plugin's function or callback): no barrier of its own.

Must not touch sockets or the wire, nor check passwords: whoever makes a
LocalSession has already established who the user is (the console's login,
the caller of a plugin function); what that user may do is still rights.py's.

    async with LocalSession(app, "ops") as s:
        await call_as(s, "queue.tube.jobs:put", ["data"])   # -> [[0, "r", "data"]]
        # CallError(42, "Execute access ...") if ops may not write to jobs
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any

import msgpack

from queuebox.protocol import ErrorCode
from queuebox.storage.packed import Packed

from ..runtime.errors import CallError, error_code_and_message
from ..runtime.logs import get_logger
from .app import App
from .dispatch import admit
from .session import Session

log = get_logger("queuebox.callas")

_pack = msgpack.Packer(use_bin_type=True, unicode_errors="surrogateescape").pack


class LocalSession(Session):
    """A client inside the process, logged in as `user`."""

    __slots__ = ("in_flight",)
    port = "iproto"  # as the console lists it (app.LiveConnection)

    def __init__(self, app: App, user: str, peer: str = "in-process") -> None:
        closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        super().__init__(app, app.next_conn_id(), closed, peer)
        self.set_user(user)
        self.in_flight = 0  # calls running: shutdown waits for them
        app.connections[self.conn_id] = self
        app.on_connect(self.conn_id)

    # -- what the app and the listener's shutdown need (app.LiveConnection) --
    def stop_reading(self) -> None:
        """Nothing is read: the owner stops calling once the server shuts down."""

    def close(self) -> None:
        if not self.closed.done():
            self.closed.set_result(None)  # waiting takes stop waiting
            self.app.on_disconnect(self.conn_id)  # its taken tasks go back

    def abort(self) -> None:
        self.close()

    async def __aenter__(self) -> LocalSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


async def call_as(s: Session, name: str, args: Sequence[Any] = ()) -> list[Any]:
    """Call function `name` as the session's user: the result, or the CallError
    an IPROTO client would get (ER_ACCESS_DENIED, ER_NO_SUCH_PROC, ER_READONLY,
    the queue's own errors). Returns once the change is durable, like a reply."""
    if s.closed.done():
        raise CallError(ErrorCode.ER_PROC_LUA, "the session is closed")
    local = s if isinstance(s, LocalSession) else None
    if local is not None:
        local.in_flight += 1
    try:
        return await _call(s, name, list(args))
    finally:
        if local is not None:
            local.in_flight -= 1


def call_now(s: Session, name: str, args: Sequence[Any] = ()) -> Any:
    """Call `name` as the session's user in this very step, for code that runs
    inside a request (a plugin's function or callback): the same checks and
    handler as call_as, no wait for the WAL of its own (the request's reply
    waits for it, with the call's changes in the same write), so calls made
    one after another run with nothing in between. Answers the result as a
    client gets it (task data as the client's bytes: plugins/api.py's
    `unpack`), or an awaitable of it for a call that waits."""
    bound = admit(s, name)
    args = list(args)
    if bound.raw_data:
        if args:
            args[0] = Packed(_pack(args[0]))
    elif bound.pushes:
        raise CallError(ErrorCode.ER_UNSUPPORTED, f"{name} pushes to a client: not in process")
    return bound.call(s, args)


async def _call(s: Session, name: str, args: list[Any]) -> list[Any]:
    bound = admit(s, name)
    if bound.raw_data and args:
        args[0] = Packed(_pack(args[0]))  # the data as a client would send it
    failure: CallError | None = None
    result: object = None
    try:
        result = bound.call(s, args)
        if isinstance(result, Awaitable):
            result = await result
    except Exception as exc:
        failure = _as_call_error(exc, name)
    # Even after an error: the call may have changed data, or answered from
    # changes not yet confirmed.
    barrier = s.app.durability.barrier(bound.writes)
    if barrier is not None:
        try:
            await barrier
        except Exception as exc:
            log.error("durability barrier failed", conn_id=s.conn_id, error=repr(exc))
            found = error_code_and_message(exc)
            raise CallError(*(found or (ErrorCode.ER_WAL_IO, "Failed to write to disk"))) from None
    if failure is not None:
        raise failure
    if not isinstance(result, list | tuple):
        raise _as_call_error(TypeError(f"handler of {name!r} returned a {type(result)}"), name)
    return [unpacked(value) for value in result]


def _as_call_error(exc: Exception, name: str) -> CallError:
    found = error_code_and_message(exc)
    if found is None:  # our bug, not the caller's: logged with its traceback
        log.error("request failed", function=name, error=repr(exc), exc_info=exc)
        return CallError(ErrorCode.ER_PROC_LUA, f"{type(exc).__name__}: {exc}")
    return exc if isinstance(exc, CallError) else CallError(*found)


def unpacked(value: Any) -> Any:
    """A result with every task's data (kept as the client's msgpack) decoded."""
    if type(value) is Packed:
        return msgpack.unpackb(value, raw=False, unicode_errors="surrogateescape")
    if isinstance(value, list | tuple):
        return [unpacked(item) for item in value]
    if isinstance(value, dict):
        return {key: unpacked(item) for key, item in value.items()}
    return value
