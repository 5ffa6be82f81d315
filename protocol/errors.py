"""ProtocolError: the one exception type the protocol package lets out.

Owns the error class and the exact Tarantool texts of framing errors. A
decoder either returns a ProtocolError in place of a bad frame (the server
replies with it and goes on) or raises one (the stream is unusable). Must
not import anything but constants: every other module depends on this one.
"""

from __future__ import annotations

from .constants import ErrorCode

# Texts exactly as Tarantool 2.6 writes them, so clients that match on them keep working.
MSG_PACKET_LENGTH = "Invalid MsgPack - packet length"
MSG_PACKET_HEADER = "Invalid MsgPack - packet header"
MSG_PACKET_BODY = "Invalid MsgPack - packet body"
MSG_TOO_BIG = "Invalid MsgPack - too big packet size in the header: {}"
MSG_DECODER_DEAD = "Invalid MsgPack - decoder closed after a fatal error"


class ProtocolError(Exception):
    """Bad bytes from the peer.

    code:    ErrorCode to put in the error reply (usually ER_INVALID_MSGPACK).
    message: the reply text, exactly as Tarantool words it.
    sync:    SYNC of the offending request, 0 when it could not be read.
    fatal:   True when the byte stream cannot be trusted any more; the
             connection must be closed right after the reply.
    """

    __slots__ = ("code", "message", "sync", "fatal")

    def __init__(
        self,
        message: str,
        *,
        code: int = ErrorCode.ER_INVALID_MSGPACK,
        sync: int = 0,
        fatal: bool = False,
    ) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message
        self.sync = sync
        self.fatal = fatal

    def __repr__(self) -> str:
        return (
            f"ProtocolError({self.message!r}, code={self.code}, "
            f"sync={self.sync}, fatal={self.fatal})"
        )

    def __eq__(self, other: object) -> bool:
        # Equality by content lets tests and callers compare decoded streams.
        if not isinstance(other, ProtocolError):
            return NotImplemented
        return (self.code, self.message, self.sync, self.fatal) == (
            other.code,
            other.message,
            other.sync,
            other.fatal,
        )

    def __hash__(self) -> int:
        return hash((self.code, self.message, self.sync, self.fatal))
