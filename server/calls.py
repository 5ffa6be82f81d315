"""CALL, CALL_16 and EVAL: find the handler, check rights, run it, reply.

Owns: the path of a function call through the registry and the rights
check (`admit`: ER_NO_SUCH_PROC, ER_ACCESS_DENIED, ER_READONLY; callas.py
runs the same for in-process callers), the inline-or-later decision, the durability barrier
before a reply, the CALL_16 shaping, and the reply bytes of anything a
handler produced: results, errors (unexpected ones logged with their
traceback), a failed barrier. Must not know any particular function, nor do
I/O: a request handler here takes the request and the `Session` and returns
the reply bytes, a `Held` reply (sent once its barrier is done), or a
coroutine that produces the reply (a call that waits); the connection does
the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any

from queuebox import protocol
from queuebox.protocol import (
    KEY_FUNCTION_NAME,
    KEY_TUPLE,
    ErrorCode,
    call16_shape,
    encode_packed_data,
)
from queuebox.storage.packed import Packed, spliced

from .config import READ
from .dispatch import Handler, Resolved, TakesData
from .errors import CallError, error_code_and_message, read_only_error
from .logs import get_logger
from .rights import access_denied
from .session import Session

log = get_logger("queuebox.calls")

ER_SHUTDOWN_TEXT = "queuebox is shutting down"


class Held:
    """`reply` to request `sync`, to be sent once `barrier` (group commit) completes."""

    __slots__ = ("barrier", "reply", "sync")

    def __init__(self, barrier: Awaitable[Any], sync: int, reply: bytes) -> None:
        self.barrier = barrier
        self.sync = sync
        self.reply = reply


def encode_result(s: Session, sync: int, values: Sequence[Any], call16: bool) -> bytes:
    data = call16_shape(values) if call16 else values
    try:
        return encode_packed_data(sync, s.schema_version, len(data), spliced(data))
    except (TypeError, ValueError, OverflowError) as exc:
        # What Tarantool says for a Lua value it cannot serialize, with our type.
        raise CallError(ErrorCode.ER_PROC_LUA, f"unsupported result value: {exc}") from None


def error_reply(s: Session, sync: int, exc: BaseException, name: str = "") -> bytes:
    """The error reply for an exception a handler raised; unexpected ones are logged."""
    found = error_code_and_message(exc)
    if found is None:
        log.error("request failed", conn_id=s.conn_id, function=name, error=repr(exc), exc_info=exc)
        found = (ErrorCode.ER_PROC_LUA, f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc))
    return protocol.encode_error(sync, s.schema_version, found[0], found[1])


def barrier_failed(s: Session, sync: int, exc: BaseException | None) -> bytes:
    # The change may not be on disk: the client must not get a success.
    log.error("durability barrier failed", conn_id=s.conn_id, error=repr(exc))
    found = error_code_and_message(exc) if exc is not None else None
    code, message = found if found else (ErrorCode.ER_WAL_IO, "Failed to write to disk")
    return protocol.encode_error(sync, s.schema_version, code, message)


class Deferred:
    """Run this request again at `at` (the guard's clock), and the requests after
    it only then: a throttled AUTH (authguard.py). The connection stops reading
    meanwhile, so a later request never runs as the user from before it."""

    __slots__ = ("at",)

    def __init__(self, at: float) -> None:
        self.at = at


Reply = bytes | Held | Deferred | Coroutine[Any, Any, bytes]


def admit(s: Session, name: str) -> Resolved:
    """The checks of a call, for every caller (a connection, callas.py), in
    Tarantool's order: some right at all (denied before the name is looked
    up), the name, the right on the call's tube, then read-only."""
    grant = s.grant
    if not grant.somewhere:
        # Like Tarantool without universal execute: denied before looking the name up.
        raise access_denied(name, s.user)
    found = s.registry.resolve(name)
    if found is None:
        raise CallError(ErrorCode.ER_NO_SUCH_PROC, f"Procedure '{name}' is not defined")
    access = found[1]
    if not grant.allows(access, found[2]):
        raise access_denied(name, s.user)
    if access != READ and s.app.refuses_changes() and not s.registry.works_read_only(name):
        raise read_only_error()
    return found


def handle_call(req: Any, s: Session, call16: bool = False) -> Reply:
    # The hot path: the body is read directly, not through Request's properties.
    body = req.body
    name = body.get(KEY_FUNCTION_NAME)
    if name is None:
        raise CallError(
            ErrorCode.ER_MISSING_REQUEST_FIELD, "Missing mandatory field 'function name' in request"
        )
    handler = admit(s, name)[0]
    args = body.get(KEY_TUPLE)
    if type(handler) is TakesData:
        handler = handler.handler
        if args:
            # The data goes on as the client's bytes: whatever msgpack it is, it
            # comes back the same (QUEUE.md §2), and is never decoded again.
            args = [Packed(req.raw_arg(0)), *args[1:]]
    return run_handler(s, req.sync, name, handler, [] if args is None else args, call16)


def handle_call16(req: Any, s: Session) -> Reply:
    return handle_call(req, s, True)


def handle_eval(req: Any, s: Session) -> Reply:
    if not req.has(protocol.KEY_EXPR):
        raise CallError(
            ErrorCode.ER_MISSING_REQUEST_FIELD, "Missing mandatory field 'expression' in request"
        )
    expr = req.expr
    found = s.registry.resolve_eval(expr)
    if found is None:
        shown = expr if len(expr) <= 200 else expr[:200] + "..."
        raise CallError(
            ErrorCode.ER_PROC_LUA, f"queuebox does not run Lua: EVAL of {shown!r} is not supported"
        )
    handler, access, _ = found
    if not s.grant.allows(access):
        raise access_denied("", s.user, "universe")
    if access != READ and s.app.refuses_changes():
        raise read_only_error()
    return run_handler(s, req.sync, expr, handler, req.args, call16=False)


def run_handler(
    s: Session, sync: int, name: str, handler: Handler, args: list[Any], call16: bool
) -> Reply:
    """Run `handler` inline; if it returns an awaitable, finish in a coroutine.

    After the handler, the reply waits for `app.durability_barrier()` when
    that returns something, so no change is acknowledged before it is durable.
    """
    try:
        # object: the checks below are the contract (the compiled build trusts annotations).
        result: object = handler(s, args)
        if type(result) is list and not call16:
            reply = encode_packed_data(sync, s.schema_version, len(result), spliced(result))
        elif isinstance(result, list | tuple):
            reply = encode_result(s, sync, list(result), call16)
        elif isinstance(result, Awaitable):
            return _finish(s, sync, name, result, call16)
        else:
            raise TypeError(f"handler of {name!r} returned {type(result).__name__}, not a list")
    except Exception as exc:
        reply = error_reply(s, sync, exc, name)
    barrier = s.app.durability_barrier()
    if barrier is None:
        return reply
    return Held(barrier, sync, reply)


async def _finish(
    s: Session, sync: int, name: str, awaitable: Awaitable[Any], call16: bool
) -> bytes:
    try:
        try:
            result = await awaitable
            if not isinstance(result, list | tuple):
                raise TypeError(f"handler of {name!r} returned {type(result).__name__}, not a list")
            reply = encode_result(s, sync, list(result), call16)
        except asyncio.CancelledError:
            # Only shutdown cancels a waiting request; the client still gets an answer.
            reply = protocol.encode_error(
                sync, s.schema_version, ErrorCode.ER_PROC_LUA, ER_SHUTDOWN_TEXT
            )
        except Exception as exc:
            reply = error_reply(s, sync, exc, name)
        barrier = s.app.durability_barrier()
        if barrier is not None:
            await barrier
    except BaseException as exc:  # the barrier failed or was cancelled: never ack
        reply = barrier_failed(s, sync, exc)
    return reply
