"""Errors a server-side function raises to answer a call with an IPROTO error.

Owns: `CallError` and the duck-typed rule for "an exception that carries its
own error code" (the queue core raises its own `QueueError(code, message)`;
server code must not import drivers to recognise it). Must not touch sockets
or the wire format; the connection turns these into reply bytes.
"""

from __future__ import annotations


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

    Anything with an integer `.code` and a str `.message` counts, so errors of
    packages the server must not import (drivers) still keep their codes.
    """
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", None)
    if isinstance(code, int) and not isinstance(code, bool) and isinstance(message, str):
        return code, message
    return None
