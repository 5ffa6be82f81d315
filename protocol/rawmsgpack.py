"""msgpack read and written by its bytes: the project's one copy of the format's heads.

Owns: reading a value in place (`value_end`, where any value ends without
building it; `scalar_at`, a nil, bool, int, float, str or bin value;
`int_at`, `uint_at`, `container_at` and the tests of a head byte), the
options of msgpack's own decoder that every reader shares (`unpackb`), and writing
the heads msgpack's packer writes, byte for byte (`uint_form` and
`uint_packs`, the shortest form of a uint inside a caller's own struct call;
`task_form` and `task_head`; `array_head`, `map_head`, `ext_head`). Used where a compiled
loop over bytes costs less than a call into msgpack's decoder or packer: the
request decoder's fast path (plainframe.py), a request's raw argument
(rawargs.py), the task reply (response.py), and storage's rows, records and
the fast start from the WAL.

Must not touch: I/O, frames, what a value means (a request, a record, a
task), and any other module of the project: it imports none, so that storage
may import it (tests/unit/test_layers.py SHARED) and the Spark pipeline's code
zip carries it. Never reads past the limit it is given: a value cut by it is
"not whole" (NOT_WHOLE), never an error; the one exception is a read that
trusts its caller (`int_at`, `uint_at`, `container_at`: a head already
checked, a value already known whole).

Offsets, lengths and bytes are `i64` (a plain int when not compiled): the
compiled build does their arithmetic in machine words, where an `int` costs a
tagged-int check and a call per shift or `|`. Only an 8-byte uint may pass
i64's range: uint_at builds that one as an `int`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

import msgpack
from mypy_extensions import i64

NOT_WHOLE: Final = -1  # an end's stand-in: the value runs past the limit (or is 0xC1)
NOT_SCALAR: Final = -2  # scalar_at's: an array, a map or an ext is there

# -- reading --


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
    # A width of 1, 2 or 4: a length, a count, a frame's length and CRC, an LSN.
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


def is_array_head(byte: i64) -> bool:
    """Whether the msgpack value starting with `byte` is an array."""
    return 0x90 <= byte <= 0x9F or byte == 0xDC or byte == 0xDD


def is_map_head(byte: i64) -> bool:
    """Whether the msgpack value starting with `byte` is a map."""
    return 0x80 <= byte <= 0x8F or byte == 0xDE or byte == 0xDF


def container_at(buf: bytes, pos: i64) -> tuple[i64, i64]:
    """(how many items or key-value pairs, where the first starts) of the array
    or map at buf[pos], whose head is_array_head or is_map_head and is whole."""
    b: i64 = buf[pos]
    if b <= 0x9F:  # fixmap 0x80-0x8f, fixarray 0x90-0x9f
        return b & 0x0F, pos + 1
    width: i64 = 2 if b == 0xDC or b == 0xDE else 4
    return _short_uint_at(buf, pos + 1, width), pos + 1 + width


# One-character strings by their byte: a queue's statuses, read without a slice.
CHARS: Final = [chr(c) for c in range(128)]
_FLOAT32: Final = struct.Struct(">f").unpack_from
_FLOAT64: Final = struct.Struct(">d").unpack_from


def scalar_at(buf: bytes, pos: i64, end: i64) -> tuple[Any, i64]:
    """(the value at buf[pos], where it ends) for a nil, a bool, an int, a
    float, a str (text, surrogateescape: as the project's decoders give it) or
    a bin (bytes); where it ends NOT_WHOLE if it runs past `end` (or
    pos >= end), NOT_SCALAR for an array, a map, an ext or byte 0xC1."""
    if pos >= end:
        return None, NOT_WHOLE
    b: i64 = buf[pos]
    if b < 0x80:
        return b, pos + 1
    if b >= 0xE0:
        return b - 0x100, pos + 1
    if 0xA0 <= b <= 0xBF:  # fixstr
        if b == 0xA1 and pos + 1 < end and buf[pos + 1] < 0x80:
            return CHARS[buf[pos + 1]], pos + 2
        return _text(buf, pos + 1, b - 0xA0, end)
    if 0xCC <= b <= 0xD3:  # uint, int 8 to 64
        stop = pos + 2 + ((1 << ((b - 0xCC) & 3)) - 1)
        if stop > end:
            return None, NOT_WHOLE
        return int_at(buf, pos), stop
    if b == 0xC0:
        return None, pos + 1
    if b == 0xC2 or b == 0xC3:
        return b == 0xC3, pos + 1
    if 0xD9 <= b <= 0xDB or 0xC4 <= b <= 0xC6:  # str, bin 8 to 32: a length first
        width: i64 = 1 << (b - 0xD9 if b >= 0xD9 else b - 0xC4)
        start = pos + 1 + width
        if start > end:
            return None, NOT_WHOLE
        size: i64 = _short_uint_at(buf, pos + 1, width)
        if b >= 0xD9:
            return _text(buf, start, size, end)
        if start + size > end:
            return None, NOT_WHOLE
        return buf[start : start + size], start + size
    if b == 0xCA or b == 0xCB:
        stop = pos + (5 if b == 0xCA else 9)
        if stop > end:
            return None, NOT_WHOLE
        return (_FLOAT32 if b == 0xCA else _FLOAT64)(buf, pos + 1)[0], stop
    return None, NOT_SCALAR


def _text(buf: bytes, start: i64, size: i64, end: i64) -> tuple[Any, i64]:
    stop = start + size
    if stop > end:
        return None, NOT_WHOLE
    return buf[start:stop].decode("utf-8", "surrogateescape"), stop


def value_end(buf: bytes, pos: i64, limit: i64, count: i64 = 1) -> i64:
    """The offset just past the msgpack value at buf[pos] (past `count` values
    in a row), or NOT_WHOLE if it does not end by `limit` (<= len(buf)) or is
    not msgpack (byte 0xC1). A loop with a count of values still to pass, not
    recursion: a container adds its items, so nesting costs no stack."""
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


_unpackb: Final = msgpack.unpackb
_ExtType: Final = msgpack.ExtType


def unpackb(
    data: bytes,
    ext_hook: Callable[[int, bytes], Any] = _ExtType,
    use_list: bool = True,
    unicode_errors: str = "surrogateescape",
) -> Any:
    """msgpack's decode of a whole value with the options every reader of the
    project agrees on: a str as text (bytes that are not UTF-8 kept, by
    surrogateescape, unless `unicode_errors` says otherwise), a bin as bytes,
    maps with keys of any type (Lua tables), ext values through `ext_hook`."""
    return _unpackb(
        data,
        raw=False,
        strict_map_key=False,
        use_list=use_list,
        ext_hook=ext_hook,
        unicode_errors=unicode_errors,
    )


# -- writing: the forms msgpack's packer writes (the shortest for each value) --

# A uint's forms, by uint_form's answer: positive fixint, uint 8, 16, 32, 64;
# the bytes before the value (its head), the value's struct code, the size.
UINT_HEADS: Final = (b"", b"\xcc", b"\xcd", b"\xce", b"\xcf")
UINT_CODES: Final = ("B", "B", "H", "I", "Q")
UINT_SIZES: Final = (1, 2, 3, 5, 9)


def uint_form(value: Any) -> i64:
    """Which form msgpack writes the int `value` from 0 to 2**64 - 1 in (an
    index of UINT_HEADS); -1 for anything else (a negative int, a bool)."""
    if type(value) is not int:
        return -1
    return int_form(value)  # compiled: a machine int from here, not an object


def int_form(n: int) -> i64:
    """uint_form of an int: -1 if it is negative or needs more than 64 bits."""
    if n < 0:
        return -1
    if n < 0x80:
        return 0
    if n < 0x100:
        return 1
    if n < 0x10000:
        return 2
    if n < 0x100000000:
        return 3
    if n < 0x10000000000000000:
        return 4
    return -1


def uint_packs(
    before: str, literal: bytes, after: str
) -> tuple[list[Callable[..., bytes]], list[bytes]]:
    """For each uint form: a struct pack of the fields `before`, bytes (the
    literal and the form's head), the uint, the fields `after` (struct codes,
    big-endian); and that literal. One C call writes a caller's frame around
    a uint in its shortest form: pack(*before, literals[form], value, *after)."""
    packs: list[Callable[..., bytes]] = []
    literals: list[bytes] = []
    for head, code in zip(UINT_HEADS, UINT_CODES, strict=True):
        lead = literal + head
        packs.append(struct.Struct(f">{before}{len(lead)}s{code}{after}").pack)
        literals.append(lead)
    return packs, literals


def char_str(value: Any) -> i64:
    """msgpack's two bytes of a one-character ASCII str (fixstr 0xA1, the
    character), as a big-endian int; -1 for anything else."""
    return task_form(0, value)[1]


def task_form(task_id: Any, status: Any) -> tuple[i64, i64]:
    """(uint_form(task_id), char_str(status)), or (-1, -1) if either is -1:
    the checks of a task's head in one call, where there were three (a row's
    head and a reply's, per put, take and ack)."""
    if type(task_id) is not int or type(status) is not str:
        return -1, -1
    text: str = status
    if len(text) != 1:
        return -1, -1
    char: i64 = ord(text)
    form = int_form(task_id)
    if form < 0 or char >= 0x80:
        return -1, -1
    return form, 0xA100 | char


# A task's head: an array of three, the id (a uint), the status (one character).
# Final: the compiled build reads them as C globals, not from the module's dict.
_TASK: Final = uint_packs("", b"\x93", "H")
_TASK_PACKS: Final = _TASK[0]
_TASK_LITERALS: Final = _TASK[1]


def task_head(task_id: Any, status: Any) -> bytes | None:
    """msgpack of [task_id, status, None] but its last byte (the head of an
    array of three and its first two items, for data to follow) for an int id
    from 0 to 2**64 - 1 and a one-character ASCII status; None for anything
    else (the packer's case). One struct call, where the packer's call on a
    list cost four times the instructions."""
    form, char = task_form(task_id, status)
    if form < 0:
        return None
    return _TASK_PACKS[form](_TASK_LITERALS[form], task_id, char)


def _container_head(n: int, fix: int, wide16: int) -> bytes:
    """The head of an array (fix 0x90, 0xdc) or a map (fix 0x80, 0xde) of `n`
    items; the 32-bit form's byte follows the 16-bit one's."""
    if n < 16:
        return bytes((fix | n,))
    if n < 0x10000:
        return bytes((wide16,)) + n.to_bytes(2, "big")
    return bytes((wide16 + 1,)) + n.to_bytes(4, "big")


def array_head(n: int) -> bytes:
    return _container_head(n, 0x90, 0xDC)


def map_head(n: int) -> bytes:
    return _container_head(n, 0x80, 0xDE)


def ext_head(code: int, size: int) -> bytes:
    """The head msgpack writes before an ext's `size` bytes of type `code`: a
    fixext for 1, 2, 4, 8 or 16 bytes, else ext 8, 16 or 32."""
    if size in (1, 2, 4, 8, 16):
        return bytes((0xD4 + size.bit_length() - 1, code))
    if size < 0x100:
        return bytes((0xC7, size, code))
    if size < 0x10000:
        return b"\xc8" + size.to_bytes(2, "big") + bytes((code,))
    return b"\xc9" + size.to_bytes(4, "big") + bytes((code,))
