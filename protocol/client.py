"""Client side: requests as bytes, server replies back as Response objects.

Owns what the bundled client and the load generator put on the wire
(0xce length prefix, header {0: type, 1: sync}, one helper per request they
send) and the decoding of replies from any IPROTO server, whole or (an unsigned int, an
array's length, one value: `uint_at`, ...; the header: replyhead.py) read
from its bytes as far as a caller needs. Strings in
replies keep their raw bytes through surrogateescape; as_bytes() gets them
back. Must not depend on the server side (request.py, response.py) nor do
I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from .codec import as_bytes, new_unpacker, pack
from .constants import (
    AUTH_METHOD_CHAP_SHA1,
    ERROR_CODE_MASK,
    ERROR_FLAG,
    ERROR_FRAME_MESSAGE,
    ERROR_STACK,
    KEY_DATA,
    KEY_ERROR,
    KEY_ERROR_24,
    KEY_EXPR,
    KEY_FUNCTION_NAME,
    KEY_REQUEST_TYPE,
    KEY_SCHEMA_VERSION,
    KEY_SYNC,
    KEY_TUPLE,
    KEY_USER_NAME,
    RESPONSE_CHUNK,
    RequestType,
)
from .errors import MSG_PACKET_BODY, MSG_PACKET_HEADER, ProtocolError
from .framing import DEFAULT_MAX_FRAME, FrameSplitter
from .rawmsgpack import container_at, int_at, is_array_head, value_end

__all__ = [
    "Response",
    "ResponseDecoder",
    "array_at",
    "as_bytes",
    "call_prefix",
    "encode_auth",
    "encode_call",
    "encode_calls",
    "encode_eval",
    "encode_ping",
    "encode_request",
    "uint_at",
    "value_at",
]

_PREFIX = struct.Struct(">BI")
_unpackb = msgpack.unpackb
_PAIR = b"\x92"  # see request.py: header and body decoded in one C call


def encode_request(type: int, sync: int, body: dict[int, Any] | None) -> bytes:
    """`ce <u32 len>` + {0: type, 1: sync} + body (none at all when body is None)."""
    payload = pack({KEY_REQUEST_TYPE: type, KEY_SYNC: sync})
    if body is not None:
        payload += pack(body)
    return _PREFIX.pack(0xCE, len(payload)) + payload


def encode_ping(sync: int) -> bytes:
    return encode_request(RequestType.PING, sync, None)


def encode_auth(sync: int, user: str, scramble: bytes | None) -> bytes:
    """AUTH chap-sha1; scramble goes as MP_BIN. None sends TUPLE [] (back to guest)."""
    tuple_: list[Any] = [] if scramble is None else [AUTH_METHOD_CHAP_SHA1, bytes(scramble)]
    return encode_request(RequestType.AUTH, sync, {KEY_USER_NAME: user, KEY_TUPLE: tuple_})


# The fixed bytes of a CALL: its header without the sync's value, and the body's keys.
# Packing the two maps whole costs about twice as much (a worker sends one call per
# take and one per ack); the bytes are the same (a unit test compares them).
_CALL_HEAD = {
    False: pack({KEY_REQUEST_TYPE: RequestType.CALL, KEY_SYNC: 0})[:-1],
    True: pack({KEY_REQUEST_TYPE: RequestType.CALL_16, KEY_SYNC: 0})[:-1],
}
_CALL_NAME = b"\x82" + pack(KEY_FUNCTION_NAME)  # a map of two: the name, then the args
_CALL_ARGS = pack(KEY_TUPLE)


def encode_call(sync: int, name: str, args: Iterable[Any] = (), call16: bool = False) -> bytes:
    return encode_calls(sync, call_prefix(name), [pack(list(args))], call16)


def call_prefix(name: str) -> bytes:
    """A CALL's body up to its arguments: what every call of `name` starts with."""
    return _CALL_NAME + pack(name) + _CALL_ARGS


def encode_calls(
    sync: int,
    prefix: bytes,
    args: list[bytes],
    call16: bool = False,
    after: bytes = b"",
    lasts: list[bytes] | None = None,
) -> bytes:
    """The CALL frames of one function (`prefix`: call_prefix(name), and what
    every call's argument array starts with after it, if the same), one per item
    of `args`, with the syncs `sync`, `sync` + 1, ...: call n's arguments are
    args[n] + `after` + lasts[n] (put_many's puts: the name and the options are
    packed once, not once per put; per put only its data and key)."""
    head = _CALL_HEAD[call16]
    fixed = len(head) + len(prefix) + len(after)
    frames: list[bytes] = []
    for n, packed in enumerate(args):
        sync_bytes = pack(sync + n)
        last = b"" if lasts is None else lasts[n]
        size = fixed + len(sync_bytes) + len(packed) + len(last)
        frames += (_PREFIX.pack(0xCE, size), head, sync_bytes, prefix, packed, after, last)
    return b"".join(frames)


def encode_eval(sync: int, expr: str, args: Iterable[Any] = ()) -> bytes:
    return encode_request(RequestType.EVAL, sync, {KEY_EXPR: expr, KEY_TUPLE: list(args)})


@dataclass(slots=True)
class Response:
    """One reply. code is the header code: 0 OK, 0x80 push CHUNK, 0x8000|errcode."""

    code: int
    sync: int
    schema_version: int
    body: dict[Any, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.code == 0

    @property
    def is_chunk(self) -> bool:
        """An out-of-band box.session.push; the final reply follows."""
        return self.code == RESPONSE_CHUNK

    @property
    def error_code(self) -> int:
        """The box error code of an error reply, 0 otherwise."""
        return self.code & ERROR_CODE_MASK if self.code & ERROR_FLAG else 0

    @property
    def error_message(self) -> str:
        """0x31 text, else the first stack frame's message, else ""."""
        message = self.body.get(KEY_ERROR_24)
        if isinstance(message, str):
            return message
        try:
            message = self.body[KEY_ERROR][ERROR_STACK][0][ERROR_FRAME_MESSAGE]
        except (KeyError, IndexError, TypeError):
            return ""
        return message if isinstance(message, str) else ""

    @property
    def data(self) -> Any:
        """DATA (0x30) of a success reply, None when the reply has none."""
        return self.body.get(KEY_DATA)


def _uint(value: Any) -> bool:
    return type(value) is int and value >= 0


def _response(header: Any, body: Any) -> Response:
    if type(header) is not dict:
        raise ProtocolError(MSG_PACKET_HEADER, fatal=True)
    code = header.get(KEY_REQUEST_TYPE, 0)
    sync = header.get(KEY_SYNC, 0)
    schema_version = header.get(KEY_SCHEMA_VERSION, 0)
    # Inlined uint checks (runs per reply); an OR of ints is negative iff one is.
    if (
        type(code) is not int
        or type(sync) is not int
        or type(schema_version) is not int
        or (code | sync | schema_version) < 0
    ):
        raise ProtocolError(MSG_PACKET_HEADER, sync=sync if _uint(sync) else 0, fatal=True)
    if type(body) is not dict:
        raise ProtocolError(MSG_PACKET_BODY, sync=sync, fatal=True)
    return Response(code, sync, schema_version, body)


def _decode_carefully(payload: bytes) -> Response:
    unpacker = new_unpacker(len(payload))
    unpacker.feed(payload)
    try:
        header = unpacker.unpack()
    except Exception:
        raise ProtocolError(MSG_PACKET_HEADER, fatal=True) from None
    if unpacker.tell() == len(payload):
        return _response(header, {})
    try:
        body = unpacker.unpack()
    except Exception:
        body = None
    if unpacker.tell() != len(payload):
        body = None
    return _response(header, body)


# A reply read only as far as its caller needs (put_many's puts: clients.putmany):
# no dict, list or Response is made for what is skipped. Its header: replyhead.py.


def uint_at(data: bytes, at: int) -> tuple[int, int]:
    """The msgpack unsigned integer at `at` and the index after it; (-1, at) when
    `data` holds none there (rawmsgpack reads it)."""
    if at >= len(data):
        return -1, at
    head = data[at]
    if head > 0x7F and not 0xCC <= head <= 0xCF:
        return -1, at
    after = value_end(data, at, len(data))
    if after < 0:
        return -1, at
    return int_at(data, at), after


def array_at(data: bytes, at: int) -> tuple[int, int]:
    """The length of the msgpack array that starts at `at` and the index of its
    first item; (-1, at) when no whole array head starts there."""
    if at >= len(data) or not is_array_head(data[at]):
        return -1, at
    head = data[at]
    if at + (0 if head <= 0x9F else 2 if head == 0xDC else 4) >= len(data):
        return -1, at
    count, first = container_at(data, at)
    return count, first


def value_at(data: bytes, at: int) -> Any:
    """The one msgpack value that fills `data` from `at` to its end, decoded as
    decode_response decodes a reply's values; raises when it is not one value."""
    return _unpackb(data[at:], raw=False, unicode_errors="surrogateescape", strict_map_key=False)


def decode_response(payload: bytes) -> Response:
    """One reply frame's payload (after the length prefix) -> Response."""
    try:
        header, body = _unpackb(
            _PAIR + payload, raw=False, unicode_errors="surrogateescape", strict_map_key=False
        )
    except Exception:
        return _decode_carefully(payload)
    return _response(header, body)


class ResponseDecoder:
    """Incremental decoder of a server's byte stream (after the greeting).

    feed(data) returns the replies completed so far. Garbage raises a fatal
    ProtocolError: a client cannot trust a stream it failed to parse, so
    the decoder is dead afterwards and every later feed() raises too.
    Replies completed in the same feed() before the garbage are dropped
    with it; the connection is going away anyway.
    """

    __slots__ = ("_splitter",)

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self._splitter = FrameSplitter(max_frame)

    @property
    def dead(self) -> bool:
        return self._splitter.dead

    def frames(
        self, data: bytes | bytearray | memoryview
    ) -> tuple[list[bytes], ProtocolError | None]:
        """The payloads of the replies completed so far, undecoded (decode_response
        reads each), and the error that comes after them (the decoder then dead)."""
        return self._splitter.split(data)

    def kill(self) -> None:
        """A payload did not decode: the stream cannot be trusted any more."""
        self._splitter.kill()

    def feed(self, data: bytes | bytearray | memoryview) -> list[Response]:
        payloads, fatal = self._splitter.split(data)
        try:
            out = [decode_response(payload) for payload in payloads]
        except ProtocolError:
            self._splitter.kill()
            raise
        if fatal is not None:
            raise fatal
        return out
