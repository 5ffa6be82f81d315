"""CALL, CALL_16 and EVAL: find the handler, check rights, run it, reply.

Owns: the path of a function call through the registry (ER_NO_SUCH_PROC,
ER_ACCESS_DENIED), the inline-or-task decision, the durability barrier
before a reply, the CALL_16 shaping, and turning exceptions into error
replies. Must not know any particular function, nor do I/O itself: replies
go back through the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from queuebox import protocol
from queuebox.protocol import KEY_FUNCTION_NAME, KEY_TUPLE, ErrorCode, call16_shape, encode_data

from .dispatch import CallContext, Handler
from .errors import CallError, error_code_and_message
from .logs import get_logger

if TYPE_CHECKING:
    from .connection import Connection

log = get_logger("queuebox.calls")

ER_SHUTDOWN_TEXT = "queuebox is shutting down"


def handle_call(conn: Connection, req: Any, call16: bool = False) -> bytes | None:
    # The hot path: the body is read directly, not through Request's properties.
    body = req.body
    name = body.get(KEY_FUNCTION_NAME)
    if name is None:
        raise CallError(
            ErrorCode.ER_MISSING_REQUEST_FIELD, "Missing mandatory field 'function name' in request"
        )
    rights = conn.rights
    if not rights:
        # Like Tarantool without universal execute: denied before looking the name up.
        raise _denied("function", name, conn.user)
    found = conn.registry.resolve(name)
    if found is None:
        raise CallError(ErrorCode.ER_NO_SUCH_PROC, f"Procedure '{name}' is not defined")
    if found[1] not in rights:
        raise _denied("function", name, conn.user)
    args = body.get(KEY_TUPLE)
    return run_handler(conn, req.sync, name, found[0], [] if args is None else args, call16)


def handle_call16(conn: Connection, req: Any) -> bytes | None:
    return handle_call(conn, req, True)


def handle_eval(conn: Connection, req: Any) -> bytes | None:
    if not req.has(protocol.KEY_EXPR):
        raise CallError(
            ErrorCode.ER_MISSING_REQUEST_FIELD, "Missing mandatory field 'expression' in request"
        )
    expr = req.expr
    found = conn.app.registry.resolve_eval(expr)
    if found is None:
        shown = expr if len(expr) <= 200 else expr[:200] + "..."
        raise CallError(
            ErrorCode.ER_PROC_LUA, f"queuebox does not run Lua: EVAL of {shown!r} is not supported"
        )
    handler, access = found
    if access not in conn.rights:
        raise _denied("universe", "", conn.user)
    return run_handler(conn, req.sync, expr, handler, req.args, call16=False)


def _denied(object_type: str, object_name: str, user: str) -> CallError:
    return CallError(
        ErrorCode.ER_ACCESS_DENIED,
        f"Execute access to {object_type} '{object_name}' is denied for user '{user}'",
    )


def run_handler(
    conn: Connection, sync: int, name: str, handler: Handler, args: list[Any], call16: bool
) -> bytes | None:
    """Run `handler` inline; if it returns an awaitable, finish in a task.

    After the handler, the reply waits for `app.durability_barrier()` when
    that returns something, so no change is acknowledged before it is durable.
    """
    app = conn.app
    ctx = CallContext(app, conn.conn_id, conn.user, name, conn.closed)
    try:
        result = handler(ctx, args)
        if type(result) is list and not call16:
            reply = encode_data(sync, conn.schema_version, result)
        elif isinstance(result, list | tuple):
            reply = encode_result(conn, sync, list(result), call16)
        elif isinstance(result, Awaitable):
            conn.spawn(_finish(conn, sync, name, result, call16))
            return None
        else:
            raise TypeError(f"handler of {name!r} returned {type(result).__name__}, not a list")
    except Exception as exc:
        reply = error_reply(conn, sync, exc, name)
    barrier = app.durability_barrier()
    if barrier is None:
        return reply
    conn.reply_after(sync, barrier, reply)
    return None


async def _finish(
    conn: Connection, sync: int, name: str, awaitable: Awaitable[Any], call16: bool
) -> None:
    try:
        try:
            result = await awaitable
            if not isinstance(result, list | tuple):
                raise TypeError(f"handler of {name!r} returned {type(result).__name__}, not a list")
            reply = encode_result(conn, sync, list(result), call16)
        except asyncio.CancelledError:
            # Only shutdown cancels a waiting request; the client still gets an answer.
            reply = protocol.encode_error(
                sync, conn.schema_version, ErrorCode.ER_PROC_LUA, ER_SHUTDOWN_TEXT
            )
        except Exception as exc:
            reply = error_reply(conn, sync, exc, name)
        barrier = conn.app.durability_barrier()
        if barrier is not None:
            await barrier
    except BaseException as exc:  # the barrier failed or was cancelled: never ack
        reply = conn.barrier_failed(sync, exc)
    finally:
        conn.finished()
    conn.send(reply)


def encode_result(conn: Connection, sync: int, values: list[Any], call16: bool) -> bytes:
    data = call16_shape(values) if call16 else values
    try:
        return encode_data(sync, conn.schema_version, data)
    except (TypeError, ValueError, OverflowError) as exc:
        # What Tarantool says for a Lua value it cannot serialize, with our type.
        raise CallError(ErrorCode.ER_PROC_LUA, f"unsupported result value: {exc}") from None


def error_reply(conn: Connection, sync: int, exc: BaseException, name: str = "") -> bytes:
    """The error reply for an exception a handler raised; unexpected ones are logged."""
    found = error_code_and_message(exc)
    if found is None:
        log.error(
            "request failed", conn_id=conn.conn_id, function=name, error=repr(exc), exc_info=exc
        )
        found = (ErrorCode.ER_PROC_LUA, f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc))
    return protocol.encode_error(sync, conn.schema_version, found[0], found[1])
