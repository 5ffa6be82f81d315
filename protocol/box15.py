"""Tarantool 1.5's binary protocol: frames in, requests out, replies as bytes.

Owns the 1.5 wire (PROTOCOL15 below): the 12-byte header, the CALL body,
PING, the reply with its return code, tuples and error text, the BER varint,
the 1.5 return codes, and how a value becomes a 1.5 field. Sans-I/O like the
IPROTO codec: never imports asyncio, socket or time, nor another folder of
the project. Bad input only ever surfaces as `Box15Error`. Must not know
what a procedure does: the server maps names to the queue.

PROTOCOL15 (every integer little-endian u32 unless said otherwise):

    request  = header body
    header   = type, body length, request id          (12 bytes)
    CALL     = type 22: flags, name, field count, field*
    PING     = type 65280 (0xff00), empty body
    name, field = BER varint length + that many bytes (Perl's pack "w/a*")
    reply    = header with the request's type and id, then
               PING:  nothing (body length 0)
               OK:    return code 0, tuple count, tuple*
               error: return code (errcode << 8 | 2), message + NUL
    tuple    = byte size of its fields, field count, field*

Decoder states (a fatal error is the last item a feed returns):

              feed(): complete frames out, partial tail kept
              +---+
              |   v
           +-------+   body length > max_frame    +------+
    new -->| alive |----------------------------->| dead |  feed() raises Box15Error
           +-------+                              +------+
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import msgpack

HEADER = struct.Struct("<III")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
I64 = struct.Struct("<q")
HEADER_SIZE = HEADER.size

CALL = 22
PING = 0xFF00
DEFAULT_MAX_FRAME = 16 * 1024 * 1024
MAX_U32 = 2**32 - 1
MAX_VARINT_BYTES = 5  # a u32 in 7-bit groups

# 1.5 error codes (its errcode.h); on the wire as (code << 8) | 2, 2 meaning
# "permanent error" (a client retries only 1, "transient").
ER_NONMASTER = 1
ER_ILLEGAL_PARAMS = 2
ER_MEMORY_ISSUE = 7
ER_WAL_IO = 39
ER_NO_SUCH_PROC = 50
ER_PROC_LUA = 51
PERMANENT = 2

# The texts 1.5 formatted those codes with.
ILLEGAL_PARAMS = "Illegal parameters, {}"
NO_SUCH_PROC = "Procedure '{}' is not defined"
LUA_ERROR = "Lua error: {}"
# What 1.5 answered a request type it did not serve (an ER_ILLEGAL_PARAMS).
NONMASTER = "Can't modify data on a replication slave."
UNSUPPORTED = "unsupported command code, check the error log"


class Box15Error(Exception):
    """Bad bytes from the peer: an error reply for request `sync`, or (fatal) a closed stream."""

    __slots__ = ("code", "message", "sync", "type", "fatal")

    def __init__(
        self, code: int, message: str, *, sync: int = 0, type: int = 0, fatal: bool = False
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.sync = sync
        self.type = type
        self.fatal = fatal

    def __repr__(self) -> str:
        return f"Box15Error({self.code}, {self.message!r}, sync={self.sync}, fatal={self.fatal})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Box15Error):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[int, str, int, int, bool]:
        return (self.code, self.message, self.sync, self.type, self.fatal)


def illegal(message: str, frame: Frame) -> Box15Error:
    return Box15Error(
        ER_ILLEGAL_PARAMS, ILLEGAL_PARAMS.format(message), sync=frame.sync, type=frame.type
    )


@dataclass(frozen=True, slots=True)
class Frame:
    """One request as framed: its type, request id and undecoded body."""

    type: int
    sync: int
    body: bytes


@dataclass(frozen=True, slots=True)
class Call:
    """A decoded CALL: the procedure name and its arguments, every one a byte string."""

    sync: int
    flags: int
    name: str
    args: list[bytes]


class Box15Decoder:
    """feed(bytes) -> list of Frame, with at most one fatal Box15Error, last."""

    __slots__ = ("max_frame", "_tail", "_need", "_dead", "_frame_size")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._tail = bytearray()
        # Bytes the tail must hold before a frame can complete: a large body
        # arriving in many chunks is joined once, not once per chunk.
        self._need = HEADER_SIZE
        self._dead = False
        self._frame_size = 0

    @property
    def buffered(self) -> int:
        """Bytes of an unfinished frame held until the rest arrives."""
        return len(self._tail)

    @property
    def frame_size(self) -> int:
        """The whole size (header included) of the unfinished frame held, once its
        header is in; 0 otherwise. A caller may then take the bytes over
        (`take_partial`) and feed the whole frame back when it has it."""
        return self._frame_size

    def take_partial(self) -> bytes:
        tail = bytes(self._tail)
        self._tail = bytearray()
        self._need = HEADER_SIZE
        self._frame_size = 0
        return tail

    @property
    def dead(self) -> bool:
        return self._dead

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame | Box15Error]:
        if self._dead:
            raise Box15Error(ER_ILLEGAL_PARAMS, "decoder closed after a fatal error", fatal=True)
        tail = self._tail
        tail += data
        if len(tail) < self._need:
            return []
        buf = bytes(tail)
        tail.clear()
        out: list[Frame | Box15Error] = []
        pos, need, frame_size = 0, HEADER_SIZE, 0
        while len(buf) - pos >= HEADER_SIZE:
            type_, length, sync = HEADER.unpack_from(buf, pos)
            if length > self.max_frame:
                # Refused at the header: a peer cannot make us wait for or hold it.
                self._dead = True
                self._frame_size = 0
                message = f"received package is too big: {length}"
                out.append(Box15Error(ER_ILLEGAL_PARAMS, message, sync=sync, fatal=True))
                return out
            end = pos + HEADER_SIZE + length
            if end > len(buf):
                need = frame_size = end - pos
                break
            out.append(Frame(type_, sync, buf[pos + HEADER_SIZE : end]))
            pos = end
        self._need = need
        self._frame_size = frame_size
        tail += memoryview(buf)[pos:]
        return out


class _Reader:
    """Reads a CALL body; any shortfall is the 1.5 "packet too short" error."""

    __slots__ = ("frame", "data", "pos")

    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self.data = frame.body
        self.pos = 0

    def short(self, need: int) -> Box15Error:
        return illegal(f"packet too short (expected {need} bytes)", self.frame)

    def u32(self) -> int:
        if len(self.data) - self.pos < U32.size:
            raise self.short(U32.size)
        (value,) = U32.unpack_from(self.data, self.pos)
        self.pos += U32.size
        return int(value)

    def varint(self) -> int:
        value = 0
        for _ in range(MAX_VARINT_BYTES):
            if self.pos >= len(self.data):
                raise self.short(1)
            byte = self.data[self.pos]
            self.pos += 1
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                if value > MAX_U32:
                    break
                return value
        raise illegal("field length is not a 32-bit varint", self.frame)

    def field(self) -> bytes:
        size = self.varint()
        if len(self.data) - self.pos < size:
            raise self.short(size)
        start = self.pos
        self.pos += size
        return self.data[start : self.pos]

    def end(self) -> None:
        if self.pos != len(self.data):
            raise illegal("can't unpack request", self.frame)


def parse_call(frame: Frame) -> Call:
    """The CALL in a frame of type CALL; a malformed body raises Box15Error (not fatal)."""
    reader = _Reader(frame)
    flags = reader.u32()
    name = reader.field().decode("utf-8", "replace")
    count = reader.u32()
    # Every field takes at least one byte: a huge count fails here, not after a long loop.
    if count > len(frame.body) - reader.pos:
        raise reader.short(count)
    args = [reader.field() for _ in range(count)]
    reader.end()
    return Call(frame.sync, flags, name, args)


# --- encoding ---


def encode_varint(value: int) -> bytes:
    """BER: big-endian 7-bit groups, the high bit set on all but the last."""
    if not 0 <= value <= MAX_U32:
        raise ValueError(f"varint out of range: {value}")
    groups = [value & 0x7F]
    value >>= 7
    while value:
        groups.append(0x80 | (value & 0x7F))
        value >>= 7
    return bytes(reversed(groups))


def encode_fields(fields: list[bytes]) -> bytes:
    return b"".join(encode_varint(len(f)) + f for f in fields)


def encode_ping(sync: int) -> bytes:
    return HEADER.pack(PING, 0, sync)


def encode_tuples(type: int, sync: int, tuples: list[list[bytes]]) -> bytes:
    """A successful reply: return code 0 and the tuples."""
    parts = [U32.pack(0), U32.pack(len(tuples))]
    for fields in tuples:
        data = encode_fields(fields)
        parts += [U32.pack(len(data)), U32.pack(len(fields)), data]
    body = b"".join(parts)
    return HEADER.pack(type, len(body), sync) + body


def encode_error(type: int, sync: int, code: int, message: str) -> bytes:
    body = U32.pack((code << 8) | PERMANENT) + message.encode("utf-8", "replace") + b"\0"
    return HEADER.pack(type, len(body), sync) + body


def encode_call(sync: int, name: str, args: list[bytes], flags: int = 0) -> bytes:
    """A CALL request (what a 1.5 client sends); for tests and tools."""
    body = U32.pack(flags) + encode_fields([name.encode()]) + U32.pack(len(args))
    body += encode_fields(args)
    return HEADER.pack(CALL, len(body), sync) + body


def as_field(value: object) -> bytes:
    """A value as 1.5 put it in a tuple field.

    Strings as their bytes; integers as a u32 when they fit and a u64
    otherwise (Lua numbers and 64-bit cdata); anything 1.5 could not hold
    (floats, negatives, nested values sent by a modern client) as msgpack,
    so nothing is lost.
    """
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_U32:
        return U32.pack(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64:
        return U64.pack(value)
    return bytes(msgpack.packb(value, use_bin_type=True))


def time64(value: int) -> bytes:
    """A time (µs) or counter as 1.5 stored it: box.pack('l'), 8 bytes."""
    return I64.pack(value) if value < 0 else U64.pack(value)


# --- reading replies: the client side, for tests and tools ---


@dataclass(frozen=True, slots=True)
class Reply:
    type: int
    sync: int
    code: int  # the raw return code; 0 is success
    tuples: list[list[bytes]]
    message: str

    @property
    def errcode(self) -> int:
        return self.code >> 8


def parse_reply(frame: Frame) -> Reply:
    """A reply frame (from Box15Decoder on the client side) as a Reply."""
    if frame.type == PING and not frame.body:
        return Reply(frame.type, frame.sync, 0, [], "")
    reader = _Reader(frame)
    code = reader.u32()
    if code:
        text = frame.body[reader.pos :]
        if not text.endswith(b"\0"):
            raise illegal("error message is not NUL-terminated", frame)
        return Reply(frame.type, frame.sync, code, [], text[:-1].decode("utf-8", "replace"))
    tuples = []
    for _ in range(reader.u32()):
        size, count = reader.u32(), reader.u32()
        stop = reader.pos + size
        fields = [reader.field() for _ in range(count)]
        if reader.pos != stop:
            raise illegal("tuple size does not match its fields", frame)
        tuples.append(fields)
    reader.end()
    return Reply(frame.type, frame.sync, 0, tuples, "")
