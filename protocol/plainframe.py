"""The request decoder's fast path: a plain call's frame, read by its bytes.

Owns `decode_plain`: the Request of a frame whose header is a small map of
uint keys 0 to 10 (not TIMESTAMP) with uint values, and whose body is a
small map of a function name (0x22, a string) and an argument array (0x21):
the CALL every connector sends for a queue call. Read with machine-int
offsets: no dict per map, no decoder call with keyword arguments, and the
place of TUPLE[0] in the frame found on the way (a put's data is sliced
from the frame, not packed again to be found). A scalar or a string
argument is read here; an array, a map or an ext one is decoded alone by
msgpack with the options of the whole body's decode.

It gives the Request that msgpack's decode and request._build give, or None,
never an error: another key, a value of another type or form, bytes left
over, a frame cut short. The caller then decodes the frame the careful way,
which also names what is wrong. Must not accept a frame the careful way
refuses, nor read one differently.
"""

from __future__ import annotations

import struct
from typing import Any, Final

import msgpack
from mypy_extensions import i64

from .constants import (
    KEY_FUNCTION_NAME,
    KEY_REQUEST_TYPE,
    KEY_SCHEMA_VERSION,
    KEY_SYNC,
    KEY_TIMESTAMP,
    KEY_TUPLE,
)
from .rawargs import skip
from .value import Request

_unpackb: Final = msgpack.unpackb
_FLOAT32: Final = struct.Struct(">f").unpack_from
_FLOAT64: Final = struct.Struct(">d").unpack_from
# Header keys 0..10 hold uints (request._build's table), but TIMESTAMP (a double).
_LAST_UINT_KEY: Final = 0x0A
_NOT_PLAIN: Final = -1  # an offset's stand-in: not read here


def decode_plain(payload: bytes) -> Request | None:
    """The Request of a plain call's frame (the payload after its length),
    or None: not plain, decode it the careful way."""
    try:
        return _plain(payload)
    except IndexError:  # cut short: the careful way says where
        return None


def _plain(payload: bytes) -> Request | None:
    end: i64 = len(payload)
    n: i64 = payload[0] - 0x80  # a fixmap of 1 to 15 entries
    if n < 1 or n > 15:
        return None
    pos: i64 = 1
    kind: int = 0
    sync: int = 0
    schema: int = 0
    while n:
        n -= 1
        key: i64 = payload[pos]
        if key > _LAST_UINT_KEY or key == KEY_TIMESTAMP:
            return None
        value, pos = _uint_value(payload, pos + 1, end)
        if pos < 0:
            return None
        if key == KEY_REQUEST_TYPE:
            kind = value
        elif key == KEY_SYNC:
            sync = value
        elif key == KEY_SCHEMA_VERSION:
            schema = value
    n = payload[pos] - 0x80
    if n < 1 or n > 15:
        return None
    pos += 1
    body: dict[int, Any] = {}
    first_at: i64 = 0
    first_end: i64 = 0
    while n:
        n -= 1
        key = payload[pos]
        if key == KEY_FUNCTION_NAME:
            b: i64 = payload[pos + 1]
            if not (0xA0 <= b <= 0xBF or 0xD9 <= b <= 0xDB):  # not a string
                return None
            body[KEY_FUNCTION_NAME], pos = _item(payload, pos + 1, end)
        elif key == KEY_TUPLE:
            args, first_at, first_end, pos = _array(payload, pos + 1, end)
            body[KEY_TUPLE] = args
        else:
            return None
        if pos < 0:
            return None
    if pos != end:
        return None
    return Request(kind, sync, schema, body, payload, first_at, first_end)


def _uint(data: bytes, start: i64, width: i64) -> int:
    """The big-endian uint of data[start : start + width] (width 1, 2, 4, 8)."""
    if width == 8:  # may pass i64's range
        return int.from_bytes(data[start : start + 8], "big")
    value: i64 = 0
    for i in range(start, start + width):
        value = value << 8 | data[i]
    return value


def _uint_value(data: bytes, pos: i64, end: i64) -> tuple[int, i64]:
    """(the uint at data[pos], where it ends), or (0, _NOT_PLAIN) for another value."""
    b: i64 = data[pos]
    if b < 0x80:
        return b, pos + 1
    if b < 0xCC or b > 0xCF:
        return 0, _NOT_PLAIN
    width: i64 = 1 << (b - 0xCC)
    stop = pos + 1 + width
    if stop > end:
        return 0, _NOT_PLAIN
    return _uint(data, pos + 1, width), stop


def _array(data: bytes, pos: i64, end: i64) -> tuple[list[Any], i64, i64, i64]:
    """(the items of the array at data[pos], where its first item starts and
    ends (0, 0: it has none), where it ends), or where it ends _NOT_PLAIN."""
    b: i64 = data[pos]
    if 0x90 <= b <= 0x9F:
        count: i64 = b - 0x90
        pos += 1
    elif b == 0xDC or b == 0xDD:
        width: i64 = 2 if b == 0xDC else 4
        pos += 1 + width
        if pos > end:
            return [], 0, 0, _NOT_PLAIN
        count = _uint(data, pos - width, width)
    else:
        return [], 0, 0, _NOT_PLAIN
    if count > end - pos:  # each item takes a byte at least: a count too big is not read
        return [], 0, 0, _NOT_PLAIN
    items: list[Any] = []
    first_at: i64 = pos
    first_end: i64 = 0
    while count:
        count -= 1
        value, pos = _item(data, pos, end)
        if pos < 0:
            return [], 0, 0, _NOT_PLAIN
        items.append(value)
        if not first_end:
            first_end = pos
    return items, first_at if first_end else 0, first_end, pos


def _item(data: bytes, pos: i64, end: i64) -> tuple[Any, i64]:
    """(the value at data[pos], where it ends), as msgpack's decode of the
    body gives it; where it ends _NOT_PLAIN if it cannot be."""
    b: i64 = data[pos]
    if b < 0x80:
        return b, pos + 1
    if b >= 0xE0:
        return b - 0x100, pos + 1
    if 0xA0 <= b <= 0xBF:
        return _text(data, pos + 1, b - 0xA0, end)
    if 0xCC <= b <= 0xD3:  # uint, int 8 to 64
        width: i64 = 1 << ((b - 0xCC) & 3)
        stop = pos + 1 + width
        if stop > end:
            return None, _NOT_PLAIN
        value = _uint(data, pos + 1, width)
        bits: int = 8 * width  # an int: with an i64, `value` would be made one
        if b >= 0xD0 and value >> (bits - 1):
            value -= 1 << bits
        return value, stop
    if b == 0xC0:
        return None, pos + 1
    if b == 0xC2 or b == 0xC3:
        return b == 0xC3, pos + 1
    if 0xD9 <= b <= 0xDB or 0xC4 <= b <= 0xC6:  # str, bin 8 to 32: a length first
        width = 1 << (b - 0xD9 if b >= 0xD9 else b - 0xC4)
        start = pos + 1 + width
        if start > end:
            return None, _NOT_PLAIN
        size: i64 = _uint(data, pos + 1, width)
        if b >= 0xD9:
            return _text(data, start, size, end)
        if start + size > end:
            return None, _NOT_PLAIN
        return data[start : start + size], start + size
    if b == 0xCA or b == 0xCB:
        stop = pos + (5 if b == 0xCA else 9)
        if stop > end:
            return None, _NOT_PLAIN
        return (_FLOAT32 if b == 0xCA else _FLOAT64)(data, pos + 1)[0], stop
    return _decoded(data, pos, end)


def _text(data: bytes, start: i64, size: i64, end: i64) -> tuple[Any, i64]:
    stop = start + size
    if stop > end:
        return None, _NOT_PLAIN
    return data[start:stop].decode("utf-8", "surrogateescape"), stop


def _decoded(data: bytes, pos: i64, end: i64) -> tuple[Any, i64]:
    """An array, a map or an ext (or not msgpack): decoded alone, with the
    whole body's options; _NOT_PLAIN if that fails (a map with an array
    key: the careful way keeps it)."""
    stop: i64 = skip(data, pos)
    if stop > end:
        return None, _NOT_PLAIN
    try:
        value = _unpackb(
            data[pos:stop], raw=False, unicode_errors="surrogateescape", strict_map_key=False
        )
    except Exception:
        return None, _NOT_PLAIN
    return value, stop
