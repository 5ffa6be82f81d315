"""Server side decoding: bytes from a client -> Request objects.

Owns the Request value and RequestDecoder, which checks each frame's header
and body the way Tarantool 2.6 does (PROTOCOL.md §7) and turns a bad frame
into a ProtocolError in the stream instead of an exception, so the server
replies and keeps the connection. It does not decide whether a request is
complete enough to run (missing mandatory fields are the server's call,
see Request.has) and it does no I/O. One rule Tarantool lacks: a body
nested deeper than codec.MAX_NESTING is a bad body, so whatever the
server accepts it can also encode again.

    feed(data) ──▶ FrameSplitter ──▶ payloads ──▶ msgpack, _build ──▶ Request
                        │ bad length prefix / too big      │ bad header/body
                        ▼                                  ▼
              ProtocolError(fatal=True)         ProtocolError(fatal=False)
              decoder dead, feed() raises       decoding goes on
"""

from __future__ import annotations

from typing import Any, Final

import msgpack

from .codec import MAX_NESTING, nesting_exceeds, new_unpacker, unpack_with_tuple_keys
from .constants import (
    KEY_EXPR,
    KEY_FEATURES,
    KEY_FUNCTION_NAME,
    KEY_INDEX_BASE,
    KEY_INDEX_ID,
    KEY_ITERATOR,
    KEY_KEY,
    KEY_LIMIT,
    KEY_OFFSET,
    KEY_OPS,
    KEY_REQUEST_TYPE,
    KEY_SCHEMA_VERSION,
    KEY_SPACE_ID,
    KEY_SQL_BIND,
    KEY_SQL_TEXT,
    KEY_STMT_ID,
    KEY_SYNC,
    KEY_TIMESTAMP,
    KEY_TUPLE,
    KEY_USER_NAME,
    KEY_VERSION,
)
from .errors import MSG_PACKET_BODY, MSG_PACKET_HEADER, ProtocolError
from .framing import DEFAULT_MAX_FRAME, FrameSplitter, prefix_width
from .plainframe import decode_plain
from .value import Request

_unpackb: Final = msgpack.unpackb

# What Tarantool requires of each known key's value. Keys listed in no
# table are skipped, as 2.6 skips them. Header: 0x00..0x0a are uints except
# the replication TIMESTAMP (a double).
_UINT_HEADER_KEYS = frozenset(range(0x0B)) - {KEY_TIMESTAMP}
_TYPED_HEADER_KEYS: dict[int, type] = {KEY_TIMESTAMP: float}

_UINT_BODY_KEYS = frozenset(
    {
        KEY_SPACE_ID,
        KEY_INDEX_ID,
        KEY_LIMIT,
        KEY_OFFSET,
        KEY_ITERATOR,
        KEY_INDEX_BASE,
        KEY_STMT_ID,
        KEY_VERSION,
    }
)
_TYPED_BODY_KEYS: dict[int, type] = {
    KEY_KEY: list,
    KEY_TUPLE: list,
    KEY_OPS: list,
    KEY_SQL_BIND: list,
    KEY_FEATURES: list,
    KEY_FUNCTION_NAME: str,
    KEY_USER_NAME: str,
    KEY_EXPR: str,
    KEY_SQL_TEXT: str,
}

# Prepended to a payload so one C call decodes header and body together as
# a 2-element array; anything unusual falls back to the careful path.
_PAIR: Final = b"\x92"


def sync_of_partial(frame: bytes) -> int:
    """The SYNC of a frame (length prefix included) from its first bytes, or 0
    when they do not show it: the error reply to a frame dropped unread names
    its request."""
    unpacker = new_unpacker(len(frame))
    unpacker.feed(frame)
    try:
        unpacker.unpack()  # the length
        header = unpacker.unpack()
    except Exception:
        return 0
    return _read_sync(header) if type(header) is dict else 0


def _bad_header(sync: int = 0) -> ProtocolError:
    return ProtocolError(MSG_PACKET_HEADER, sync=sync)


def _bad_body(sync: int) -> ProtocolError:
    return ProtocolError(MSG_PACKET_BODY, sync=sync)


def _read_sync(header: dict[Any, Any]) -> int:
    """SYNC for the error reply of a bad header: its value if the key is a
    real uint 1 (a True key would compare equal) holding a uint, else 0."""
    for key, value in header.items():
        if type(key) is int and key == KEY_SYNC:
            return value if type(value) is int and value >= 0 else 0
    return 0


def _uint_keys_only(body: dict[Any, Any]) -> dict[int, Any]:
    # 2.6 skips non-uint body keys; dropping them also stops a float 33.0
    # or a bool from posing as an int key through dict equality.
    return {k: v for k, v in body.items() if type(k) is int and k >= 0}


def _build(
    header: Any,
    body: Any,
    payload: bytes,
    _uint_header_keys: frozenset[int] = _UINT_HEADER_KEYS,
    _typed_header_keys: dict[int, type] = _TYPED_HEADER_KEYS,
    _uint_body_keys: frozenset[int] = _UINT_BODY_KEYS,
    _typed_body_keys: dict[int, type] = _TYPED_BODY_KEYS,
) -> Request | ProtocolError:
    """Check decoded header and body against the key tables, make a Request.

    One flat function on purpose: it runs for every request, and calls
    cost more here than the checks. Lookups come in as default arguments
    (locals) for the same reason. `typed.get(key, type(value))` lets an
    unknown key pass by comparing its value's type with itself.
    """
    if type(header) is not dict:
        return _bad_header()
    head: dict[Any, Any] = header  # typed: compiled, walked as a dict
    for key, value in head.items():
        if type(key) is not int or key < 0:
            return _bad_header(_read_sync(head))
        if key in _uint_header_keys:
            if type(value) is not int or value < 0:
                return _bad_header(_read_sync(head))
        elif type(value) is not _typed_header_keys.get(key, type(value)):
            return _bad_header(_read_sync(head))
    sync = head.get(KEY_SYNC, 0)
    if type(body) is not dict:
        return _bad_body(sync)
    fields: dict[Any, Any] = body
    clean = True
    for key, value in fields.items():
        if type(key) is not int or key < 0:
            clean = False
        elif key in _uint_body_keys:
            if type(value) is not int or value < 0:
                return _bad_body(sync)
        elif type(value) is not _typed_body_keys.get(key, type(value)):
            return _bad_body(sync)
    return Request(
        head.get(KEY_REQUEST_TYPE, 0),
        sync,
        head.get(KEY_SCHEMA_VERSION, 0),
        fields if clean else _uint_keys_only(fields),
        payload,
    )


def _decode_carefully(payload: bytes) -> Request | ProtocolError:
    """One object at a time, so the error names the part that is wrong."""
    if not payload:
        return _bad_header()
    unpacker = new_unpacker(len(payload))
    unpacker.feed(payload)
    try:
        header = unpacker.unpack()
    except Exception:
        return _bad_header()
    checked = _build(header, {}, payload)
    if type(checked) is ProtocolError:
        return checked
    if unpacker.tell() == len(payload):
        return checked
    start = unpacker.tell()
    try:
        body = unpacker.unpack()
    except Exception:
        body = unpack_with_tuple_keys(payload[start:])
        if body is None:
            return _bad_body(header.get(KEY_SYNC, 0))
    else:
        if unpacker.tell() != len(payload):
            return _bad_body(header.get(KEY_SYNC, 0))
    return _check_nesting(payload, _build(header, body, payload))


def _check_nesting(payload: bytes, decoded: Request | ProtocolError) -> Request | ProtocolError:
    """A body nested too deep to re-encode safely is refused as a bad body."""
    if type(decoded) is Request and nesting_exceeds(payload, decoded.body):
        return _bad_body(decoded.sync)
    return decoded


class RequestDecoder:
    """Incremental decoder of a client's byte stream.

    feed(data) returns, in order, a Request or a ProtocolError for every
    frame completed so far. A non-fatal ProtocolError stands for one bad
    frame; a fatal one (bad length prefix, frame above max_frame) is the
    last item ever returned and every later feed() raises
    ProtocolError(fatal=True).
    """

    __slots__ = ("splitter",)

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        # Its frames: a caller may take an incomplete one over once its size is
        # known (`frame_size`, `take_partial`) and give it back whole (feed_frame).
        self.splitter = FrameSplitter(max_frame)

    @property
    def dead(self) -> bool:
        return self.splitter.dead

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held until the rest arrives."""
        return self.splitter.buffered

    def feed(self, data: bytes | bytearray | memoryview) -> list[Request | ProtocolError]:
        payloads, fatal = self.splitter.split(data)
        out: list[Request | ProtocolError] = []
        append = out.append
        for payload in payloads:
            request: Request | ProtocolError | None = decode_plain(payload)
            if request is None:
                try:
                    header, body = _unpackb(
                        _PAIR + payload,
                        raw=False,
                        unicode_errors="surrogateescape",
                        strict_map_key=False,
                    )
                except Exception:
                    append(_decode_carefully(payload))
                    continue
                request = _build(header, body, payload)
            if len(payload) > MAX_NESTING:  # short frames cannot nest too deep
                request = _check_nesting(payload, request)
            append(request)
        if fatal is not None:
            out.append(fatal)
        return out

    def feed_frame(self, frame: memoryview) -> Request | ProtocolError:
        """One whole frame, prefix included, read into a buffer of the caller's:
        decoded where it lies (its payload copied once, for the Request, not three
        times). Overwrites the prefix's last byte."""
        width = prefix_width(frame[0])
        payload = bytes(frame[width:])
        plain = decode_plain(payload)
        if plain is not None:
            return _check_nesting(payload, plain)
        frame[width - 1] = _PAIR[0]  # the payload becomes a 2-element array
        try:
            header, body = _unpackb(
                frame[width - 1 :],
                raw=False,
                unicode_errors="surrogateescape",
                strict_map_key=False,
            )
        except Exception:
            return _decode_carefully(payload)
        return _check_nesting(payload, _build(header, body, payload))
