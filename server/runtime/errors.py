"""Errors a server-side function raises to answer a call with an IPROTO error.

Owns: `CallError` and the duck-typed rule for "an exception that carries its
own error code" (the queue core raises its own `QueueError(code_name,
message)`; server code must not import drivers to recognise it). Every code
number comes from protocol's `ErrorCode`: a name is mapped through it. Must
not touch sockets or the wire format; the connection turns these into reply
bytes.
"""

from __future__ import annotations

from queuebox.protocol import ErrorCode

_BY_NAME = ErrorCode.__members__


class CallError(Exception):
    """Answer the current request with IPROTO error `code` and `message`."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message

    def __repr__(self) -> str:
        return f"CallError({self.code}, {self.message!r})"


def error_code_and_message(exc: BaseException) -> tuple[int, str] | None:
    """(code, message) of an exception that carries them, else None.

    Anything with a str `.message` and a `.code` that is an integer or the
    name of an `ErrorCode` ("ER_PROC_LUA") counts, so errors of packages the
    server must not import (drivers) still keep their codes.
    """
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", None)
    if not isinstance(message, str):
        return None
    if type(code) is str:
        found = _BY_NAME.get(code)
        return None if found is None else (found, message)
    if isinstance(code, int) and not isinstance(code, bool):
        return code, message
    return None


READ_ONLY_TEXT = "Can't modify data because this instance is in read-only mode."


def read_only_error() -> CallError:
    """What a change answers on a replica, or on a primary that lost its lease."""
    return CallError(ErrorCode.ER_READONLY, READ_ONLY_TEXT)


LOADING_TEXT = "Instance bootstrap hasn't finished yet"


def loading_error() -> CallError:
    """What a read answers while the data directory is being loaded again (a
    replica re-bootstrapping from its primary): Tarantool's ER_LOADING."""
    return CallError(ErrorCode.ER_LOADING, LOADING_TEXT)
