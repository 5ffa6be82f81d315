"""Reply bytes for what a handler produced: results, errors, and held replies.

Owns: the CALL result encoding (CALL_16 shaping, a value msgpack cannot
carry), the error reply of any exception a handler raised (unexpected ones
are logged with their traceback), the reply of a failed durability barrier,
and `Held`: a reply that may go out only once its barrier is done. Must not
do I/O: the connection writes what these return.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from queuebox import protocol
from queuebox.protocol import ErrorCode, call16_shape, encode_data

from .errors import CallError, error_code_and_message
from .logs import get_logger
from .session import Session

log = get_logger("queuebox.calls")


class Held:
    """`reply` to request `sync`, to be sent once `barrier` (group commit) completes."""

    __slots__ = ("barrier", "reply", "sync")

    def __init__(self, barrier: Awaitable[Any], sync: int, reply: bytes) -> None:
        self.barrier = barrier
        self.sync = sync
        self.reply = reply


def encode_result(s: Session, sync: int, values: list[Any], call16: bool) -> bytes:
    data = call16_shape(values) if call16 else values
    try:
        return encode_data(sync, s.schema_version, data)
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
