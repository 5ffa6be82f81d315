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
The function names seen last are kept by their bytes (a bounded table),
so a connection's repeated name is not decoded again.

It gives the Request that msgpack's decode and request._build give, or None,
never an error: another key, a value of another type or form, bytes left
over, a frame cut short. The caller then decodes the frame the careful way,
which also names what is wrong. Must not accept a frame the careful way
refuses, nor read one differently.
"""

from __future__ import annotations

from typing import Any, Final

from mypy_extensions import i64

from .constants import (
    KEY_FUNCTION_NAME,
    KEY_REQUEST_TYPE,
    KEY_SCHEMA_VERSION,
    KEY_SYNC,
    KEY_TIMESTAMP,
    KEY_TUPLE,
)
from .rawmsgpack import NOT_SCALAR, NOT_WHOLE, scalar_at, uint_at, unpackb, value_end
from .value import Request

# Header keys 0..10 hold uints (request._build's table), but TIMESTAMP (a double).
_LAST_UINT_KEY: Final = 0x0A
_NOT_PLAIN: Final = NOT_WHOLE  # an offset's stand-in: not read here
# Function names by their bytes, as decoded (`_name`): bounded, cleared when full.
_NAMES: Final[dict[bytes, str]] = {}
_NAMES_KEPT: Final = 1024


def decode_plain(payload: bytes) -> Request | None:
    """The Request of a plain call's frame (the payload after its length),
    or None: not plain, decode it the careful way."""
    try:
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
                body[KEY_FUNCTION_NAME], pos = _name(payload, pos + 1, end)
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
    except IndexError:  # cut short: the careful way says where
        return None


def _name(data: bytes, pos: i64, end: i64) -> tuple[str | None, i64]:
    """(the function name, a str, at data[pos], where it ends), or where it
    ends _NOT_PLAIN. A name a connection sent before is not decoded again:
    the same few names come in every frame, and their str (its hash kept)
    is looked up by its bytes."""
    b: i64 = data[pos]
    if 0xA0 <= b <= 0xBF:  # fixstr
        start: i64 = pos + 1
        size: i64 = b - 0xA0
    elif b == 0xD9:  # str 8
        start = pos + 2
        size = data[pos + 1]
    elif b == 0xDA or b == 0xDB:  # a long name: not kept
        text, stop = _item(data, pos, end)
        return text, stop
    else:
        return None, _NOT_PLAIN  # not a string
    stop = start + size
    if stop > end:
        return None, _NOT_PLAIN
    raw = data[start:stop]
    name = _NAMES.get(raw)
    if name is None:
        name = raw.decode("utf-8", "surrogateescape")
        if len(_NAMES) >= _NAMES_KEPT:
            _NAMES.clear()
        _NAMES[raw] = name
    return name, stop


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
    return uint_at(data, pos + 1, width), stop


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
        count = uint_at(data, pos - width, width)
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
    value, stop = scalar_at(data, pos, end)
    if stop == NOT_SCALAR:
        return _decoded(data, pos, end)
    return value, stop  # cut short: NOT_WHOLE, which is _NOT_PLAIN


def _decoded(data: bytes, pos: i64, end: i64) -> tuple[Any, i64]:
    """An array, a map or an ext (or not msgpack): decoded alone, with the
    whole body's options; _NOT_PLAIN if that fails (a map with an array
    key: the careful way keeps it)."""
    stop: i64 = value_end(data, pos, end)
    if stop < 0:
        return None, _NOT_PLAIN
    try:
        value = unpackb(data[pos:stop])
    except Exception:
        return None, _NOT_PLAIN
    return value, stop
