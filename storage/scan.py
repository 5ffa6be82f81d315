"""Reading msgpack by its bytes: where a value ends, what an int holds.

Owns: `value_end` (the offset just past any msgpack value, found from its
heads without building it), `uint_at` and `int_at` (an unsigned field, an
int value), the tests of a value's first byte. Used where recovery takes a
row out of a record as bytes (walreplay.py, records.py's split_rows): a
compiled loop over bytes costs less than a call into a decoder per field,
and builds no object for what is only passed over.

Must not touch: files, frames, what a record means. Never reads past the
limit it is given: a value cut by it is "not whole" (-1), never an error.
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

NOT_WHOLE: Final = -1

# Offsets, lengths and bytes are `i64` (a plain int when not compiled): the
# compiled build then does their arithmetic in machine words, where an `int`
# costs a tagged-int check and a call per shift or `|`. Only an 8-byte uint
# may pass i64's range: uint_at builds that one as an `int`.


def uint_at(buf: bytes, start: i64, width: i64) -> int:
    """The big-endian unsigned int of buf[start : start + width]."""
    if width <= 4 and width != 3:
        return _short_uint_at(buf, start, width)
    if width == 8:  # may pass i64's range: the halves join as ints (int op i64 is an i64)
        high: int = _short_uint_at(buf, start, 4)
        low: int = _short_uint_at(buf, start + 4, 4)
        return high << 32 | low
    value = 0
    at: int = start
    for i in range(at, at + width):
        value = (value << 8) | buf[i]
    return value


def _short_uint_at(buf: bytes, start: i64, width: i64) -> i64:
    # A width of 1, 2 or 4: a length, a frame's length and CRC, an LSN.
    b0: i64 = buf[start]
    if width == 1:
        return b0
    b1: i64 = buf[start + 1]
    if width == 2:
        return b0 << 8 | b1
    b2: i64 = buf[start + 2]
    b3: i64 = buf[start + 3]
    return b0 << 24 | b1 << 16 | b2 << 8 | b3


def is_int_head(byte: i64) -> bool:
    """Whether the msgpack value starting with `byte` is an int."""
    return byte <= 0x7F or byte >= 0xE0 or 0xCC <= byte <= 0xD3


def int_at(buf: bytes, pos: i64) -> int:
    """The int at buf[pos], whose head is_int_head and which is whole."""
    b: i64 = buf[pos]
    if b <= 0x7F:
        return b
    if b >= 0xE0:
        return b - 0x100
    if b <= 0xCF:  # uint 8, 16, 32, 64
        return uint_at(buf, pos + 1, 1 << (b - 0xCC))
    width: i64 = 1 << (b - 0xD0)  # int 8, 16, 32, 64
    value = uint_at(buf, pos + 1, width)
    bits: int = 8 * width  # an int: 1 << 64 passes i64's range
    if value >> (bits - 1):
        return value - (1 << bits)
    return value


def array_head_at(buf: bytes, pos: int) -> tuple[int, int]:
    """(how many items, where the first starts) of the array at buf[pos], whose
    head is_array_head and is whole."""
    b = buf[pos]
    if b <= 0x9F:
        return b - 0x90, pos + 1
    width = 2 if b == 0xDC else 4
    return uint_at(buf, pos + 1, width), pos + 1 + width


def is_array_head(byte: int) -> bool:
    """Whether the msgpack value starting with `byte` is an array."""
    return 0x90 <= byte <= 0x9F or byte == 0xDC or byte == 0xDD


def value_end(buf: bytes, pos: i64, limit: i64, count: i64 = 1) -> i64:
    """The offset just past the msgpack value at buf[pos] (past `count` values
    in a row), or NOT_WHOLE if it does not end by `limit` (<= len(buf)) or is
    not msgpack (byte 0xC1)."""
    pending: i64 = count  # values still to pass over: an array or a map adds its items
    while pending:
        if pos < 0 or pos >= limit:
            return NOT_WHOLE
        b: i64 = buf[pos]
        pending -= 1
        if b <= 0x7F or b >= 0xE0 or b == 0xC0 or b == 0xC2 or b == 0xC3:
            pos += 1
        elif b >= 0xA0 and b <= 0xBF:  # fixstr
            pos += 1 + b - 0xA0
        elif b >= 0x90 and b <= 0x9F:  # fixarray
            pending += b - 0x90
            pos += 1
        elif b >= 0x80 and b <= 0x8F:  # fixmap
            pending += 2 * (b - 0x80)
            pos += 1
        elif b >= 0xCC and b <= 0xD3:  # uint, int 8 to 64
            pos += 1 + (1 << ((b - 0xCC) & 3))
        elif b == 0xCA or b == 0xCB:  # float 32, 64
            pos += 5 if b == 0xCA else 9
        elif b >= 0xD4 and b <= 0xD8:  # fixext 1 to 16
            pos += 2 + (1 << (b - 0xD4))
        elif b >= 0xC4 and b <= 0xC9 or b >= 0xD9 and b <= 0xDB:  # bin, ext, str 8 to 32
            # The length's width: 1, 2 or 4 bytes; an ext has its type after it.
            width: i64 = 1 << ((b - 0xC4) % 3 if b <= 0xC9 else b - 0xD9)
            if pos + 1 + width > limit:
                return NOT_WHOLE
            pos += 1 + width + _short_uint_at(buf, pos + 1, width) + (1 if 0xC7 <= b <= 0xC9 else 0)
        elif b == 0xDC or b == 0xDE:  # array 16, map 16
            if pos + 3 > limit:
                return NOT_WHOLE
            pending += _short_uint_at(buf, pos + 1, 2) * (1 if b == 0xDC else 2)
            pos += 3
        elif b == 0xDD or b == 0xDF:  # array 32, map 32
            if pos + 5 > limit:
                return NOT_WHOLE
            pending += _short_uint_at(buf, pos + 1, 4) * (1 if b == 0xDD else 2)
            pos += 5
        else:  # 0xC1: never used
            return NOT_WHOLE
    if pos > limit:  # not `x if c else y`: its i64 and int would meet as a boxed object
        return NOT_WHOLE
    return pos
