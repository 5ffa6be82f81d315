"""Where a request's argument sits in its frame: its bytes as the client sent them.

Owns `raw_item` and `raw_span` (TUPLE[index] of a request body, as bytes or
where they lie, for a value the server keeps without decoding: a task's
data) and `skip`, a msgpack walker
that passes values without building them. Must not decode what it finds,
and trusts its input to be well formed: it only walks frames that decoded.
"""

from __future__ import annotations

from typing import Final

import msgpack

from .constants import KEY_TUPLE

_unpackb: Final = msgpack.unpackb


def raw_item(payload: bytes, index: int) -> bytes | None:
    """TUPLE[index] of the frame `payload` (header, then body) as sent; None
    if there is no such item."""
    start, end = raw_span(payload, index)
    return payload[start:end] if end else None


def raw_span(payload: bytes, index: int) -> tuple[int, int]:
    """(start, end) of TUPLE[index] in `payload`; (0, 0) if there is none.

    One walk from the front over the header and the body's keys, nothing
    decoded but a key that is not a one-byte uint. The item that ends the
    frame (put's data when TUPLE comes last) is not walked at all: the frame
    decoded whole, so nothing follows it.
    """
    pos = skip(payload, 0)  # the header
    if pos >= len(payload):  # no body
        return 0, 0
    pairs, pos = _container(payload, pos)
    found = 0
    last = False
    for pair in range(pairs):
        first = payload[pos]
        end = skip(payload, pos)
        # The last TUPLE key wins, as in the body.
        if first == KEY_TUPLE or (first >= 0x80 and _tuple_key(payload, pos, end)):
            found = end
            last = pair == pairs - 1
        pos = skip(payload, end)
    if not found:
        return 0, 0
    count, pos = _container(payload, found)
    if index >= count:
        return 0, 0
    pos = skip(payload, pos, index)
    return pos, len(payload) if last and index == count - 1 else skip(payload, pos)


def _tuple_key(payload: bytes, pos: int, end: int) -> bool:
    """Whether the key at payload[pos:end], not a one-byte uint, is still TUPLE
    (a uint written wide, at most 9 bytes; a float equal to it is not one)."""
    if end - pos > 9:
        return False
    value = _unpackb(payload[pos:end])
    return type(value) is int and value == KEY_TUPLE


def _container(data: bytes, pos: int) -> tuple[int, int]:
    """(items or key-value pairs, offset of the first) of the array or map at `pos`."""
    first = data[pos]
    if first < 0xA0:  # fixmap 0x80-0x8f, fixarray 0x90-0x9f
        return first & 0x0F, pos + 1
    size = 2 if first in (0xDC, 0xDE) else 4
    return int.from_bytes(data[pos + 1 : pos + 1 + size], "big"), pos + 1 + size


def _sizes() -> tuple[list[int], list[int]]:
    """Per first byte: the size of a value with no length field (0: has one),
    and for the others the width of that field (or of a container's count)."""
    fixed = [0] * 256
    width = [0] * 256
    for b in (*range(0x00, 0x80), *range(0xE0, 0x100), 0xC0, 0xC1, 0xC2, 0xC3):
        fixed[b] = 1
    for b, n in {0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9, 0xD0: 2, 0xD1: 3, 0xD2: 5, 0xD3: 9}.items():
        fixed[b] = n
    for b, n in {0xCA: 5, 0xCB: 9, 0xD4: 3, 0xD5: 4, 0xD6: 6, 0xD7: 10, 0xD8: 18}.items():
        fixed[b] = n
    for b, n in {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}.items():
        width[b] = n  # bin, str: length, then the bytes
    for b, n in {0xC7: 1, 0xC8: 2, 0xC9: 4, 0xDC: 2, 0xDD: 4, 0xDE: 2, 0xDF: 4}.items():
        width[b] = n  # ext: length and type byte; array, map: count
    return fixed, width


_FIXED, _WIDTH = _sizes()


def skip(data: bytes, pos: int, count: int = 1) -> int:
    """The offset after the `count` msgpack values at `pos` of well-formed data.

    A loop with a count of values still to pass, not recursion: a container
    adds its items to the count, so nesting costs no stack.
    """
    fixed, width = _FIXED, _WIDTH
    while count:
        count -= 1
        first = data[pos]
        size = fixed[first]
        if size:
            pos += size
        elif first < 0xC0:
            if first >= 0xA0:  # fixstr
                pos += 1 + (first & 0x1F)
            else:  # fixmap 0x80-0x8f, fixarray 0x90-0x9f
                count += (first & 0x0F) << (first < 0x90)
                pos += 1
        else:
            n = width[first]
            length = int.from_bytes(data[pos + 1 : pos + 1 + n], "big")
            if first >= 0xDC:  # array, map
                count += length << (first >= 0xDE)
                pos += 1 + n
            elif first >= 0xC7 and first <= 0xC9:  # ext: type byte, then data
                pos += 2 + n + length
            else:
                pos += 1 + n + length
    return pos
