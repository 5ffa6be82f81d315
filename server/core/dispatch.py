"""The path of CALL, CALL_16 and EVAL: from a decoded request to its reply bytes.

Owns: `admit` (the checks, in Tarantool's order; callas.py runs the same for
in-process callers), the raw task data of a `Bound` that takes it, the
inline-or-later decision, the durability barrier before a reply, the CALL_16
shaping, and the reply bytes of anything a handler produced: results,
errors (unexpected ones logged with their traceback), a failed barrier.
What a name binds to (the registry, `Bound`, name parsing) is registry.py's.

Must not touch sockets, nor know any particular function or the queue. A
request handler here (requests.py's table holds them) takes the request and
the caller and returns the reply bytes, a `Held` reply (sent once its
barrier is done), or a coroutine that produces the reply (a call that
waits); the connection does the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, Final

from queuebox import protocol
from queuebox.protocol import (
    KEY_FUNCTION_NAME,
    KEY_TUPLE,
    ErrorCode,
    Request,
    call16_shape,
    encode_one_packed,
    encode_packed_data,
    encode_task_reply,
)
from queuebox.protocol.codec import pack
from queuebox.storage.packed import Packed, spliced

from ..access.rights import access_denied
from ..runtime.errors import CallError, error_code_and_message, read_only_error
from ..runtime.logs import RateLimitedLog, get_logger
from ..settings.config import READ
from .registry import Bound
from .session import Session

log = get_logger("queuebox.calls")
# A bug that one kind of call triggers every time, or a disk that fails every
# write, must not write a line (or a traceback) per request.
failed_log = RateLimitedLog(log, burst=5, every_s=10.0)

ER_SHUTDOWN_TEXT = "queuebox is shutting down"
# Final: the compiled build holds it in a static, not a module-dict lookup per use
# (storage.packed stays interpreted).
_PACKED: Final = Packed


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


def encode_answer(sync: int, schema_version: int, values: list[Any]) -> bytes:
    """The reply of a CALL that answered `values`. One task (fields, then its
    data as the client sent it: put, take, ack...) is the common answer: its
    fields are packed with a nil where the data goes, and the data's bytes
    follow them in the reply's one join (what `spliced` does, without its
    intermediate bytes); anything else goes through `spliced`."""
    if len(values) == 1:
        task = values[0]
        kind = type(task)
        if kind is tuple:
            task, kind = list(task), list
        if kind is list:  # what a tube answers: read natively (_one_task's type)
            reply = _one_task(sync, schema_version, task)
            if reply is not None:
                return reply
    return encode_packed_data(sync, schema_version, len(values), spliced(values))


def _one_task(sync: int, schema_version: int, task: list[Any]) -> bytes | None:
    """encode_answer of one task whose last field is its data as the client
    sent it; None for anything else."""
    if not task:
        return None
    data = task[-1]
    if type(data) is not _PACKED:
        return None
    # Most tasks answer (id, status, data): the reply in one struct call.
    if len(task) == 3:
        reply = encode_task_reply(sync, schema_version, task[0], task[1], data)
        if reply is not None:
            return reply
    head = pack((*task[:-1], None))[:-1]
    return encode_one_packed(sync, schema_version, head, data)


def error_reply(s: Session, sync: int, exc: BaseException, name: str = "") -> bytes:
    """The error reply for an exception a handler raised; unexpected ones are logged."""
    found = error_code_and_message(exc)
    if found is None:
        per = (name, type(exc))
        failed_log.error(
            "request failed", per, conn_id=s.conn_id, function=name, error=repr(exc), exc_info=exc
        )
        found = (ErrorCode.ER_PROC_LUA, f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc))
    return protocol.encode_error(sync, s.schema_version, found[0], found[1])


def barrier_failed(s: Session, sync: int, exc: BaseException | None) -> bytes:
    # The change may not be on disk: the client must not get a success.
    failed_log.error("durability barrier failed", type(exc), conn_id=s.conn_id, error=repr(exc))
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


# A coroutine's reply may be held too: the shell holds it as it holds an inline one.
Reply = bytes | Held | Deferred | Coroutine[Any, Any, bytes | Held]


def admit(s: Session, name: str) -> Bound:
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
    access = found.right
    if not grant.allows(access, found.tube):
        raise access_denied(name, s.user)
    if access != READ and s.app.refuses_changes() and not s.registry.works_read_only(name):
        raise read_only_error()
    return found


def handle_call(req: Request, s: Session, call16: bool = False) -> Reply:
    # The hot path: the body is read directly, not through Request's properties;
    # typed, so the compiled build reads the request's fields and the body's
    # keys natively, not as a method call by name each.
    body = req.body
    name = body.get(KEY_FUNCTION_NAME)
    if name is None:
        raise CallError(
            ErrorCode.ER_MISSING_REQUEST_FIELD, "Missing mandatory field 'function name' in request"
        )
    bound = admit(s, name)
    args = body.get(KEY_TUPLE)
    if bound.raw_data:
        if args:
            # The data goes on as the client's bytes: whatever msgpack it is, it
            # comes back the same (QUEUE.md §2), and is never decoded again.
            raw = req.raw_arg(0)
            assert raw is not None  # args has a first item
            data = _PACKED(raw)
            args = [data] if len(args) == 1 else [data, *args[1:]]
    elif bound.pushes:
        s.sync = req.sync  # read by the handler before it first waits
    return run_handler(s, req.sync, name, bound, [] if args is None else args, call16)


def handle_call16(req: Request, s: Session) -> Reply:
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
    access = found.right
    if not s.grant.allows(access):
        raise access_denied("", s.user, "universe")
    if access != READ and s.app.refuses_changes():
        raise read_only_error()
    return run_handler(s, req.sync, expr, found, req.args, call16=False)


def run_handler(
    s: Session, sync: int, name: str, bound: Bound, args: list[Any], call16: bool
) -> Reply:
    """Run `bound`'s handler inline; if it returns an awaitable, finish in a coroutine.

    After the handler, the reply waits for `app.durability.barrier(bound.writes)`
    when that returns something: what it waits for (the WAL write, the quorum)
    is durability's rule, the same for every call.
    """
    try:
        # object: the checks below are the contract (the compiled build trusts annotations).
        result: object = bound.call(s, args)
        if type(result) is list and not call16:
            reply = encode_answer(sync, s.schema_version, result)
        elif isinstance(result, list | tuple):
            reply = encode_result(s, sync, list(result), call16)
        elif isinstance(result, Awaitable):
            return _finish(s, sync, name, result, call16, bound.writes)
        else:
            raise TypeError(f"handler of {name!r} returned {type(result).__name__}, not a list")
    except Exception as exc:
        reply = error_reply(s, sync, exc, name)
    barrier = s.app.durability.barrier(bound.writes)
    if barrier is None:
        return reply
    return Held(barrier, sync, reply)


async def _finish(
    s: Session, sync: int, name: str, awaitable: Awaitable[Any], call16: bool, writes: bool
) -> bytes | Held:
    """The reply of a call that waited; held for the durability barrier like an
    inline one (the connection sends it after the turn's WAL write, in the same
    turn, not from this task once more turns have passed)."""
    try:
        result = await awaitable
        if type(result) is list and not call16:
            reply = encode_answer(sync, s.schema_version, result)
        elif isinstance(result, list | tuple):
            reply = encode_result(s, sync, list(result), call16)
        else:
            raise TypeError(f"handler of {name!r} returned {type(result).__name__}, not a list")
    except asyncio.CancelledError:
        # Only shutdown cancels a waiting request; the client still gets an answer.
        reply = protocol.encode_error(
            sync, s.schema_version, ErrorCode.ER_PROC_LUA, ER_SHUTDOWN_TEXT
        )
    except Exception as exc:
        reply = error_reply(s, sync, exc, name)
    try:
        barrier = s.app.durability.barrier(writes)
    except Exception as exc:  # never ack what may not be durable
        return barrier_failed(s, sync, exc)
    return reply if barrier is None else Held(barrier, sync, reply)
