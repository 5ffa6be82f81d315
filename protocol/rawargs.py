"""Where a request's argument sits in its frame: its bytes as the client sent them.

Owns `raw_item` (TUPLE[index] of a request body, as bytes, for a value the
server keeps without decoding: a task's data) and `skip`, a msgpack walker
that passes values without building them. Must not decode what it finds,
and trusts its input to be well formed: it only walks frames that decoded.
"""

from __future__ import annotations

from typing import Any, Final

import msgpack

from .codec import pack
from .constants import KEY_TUPLE

_unpackb: Final = msgpack.unpackb


def raw_item(payload: bytes, args: Any, index: int) -> bytes | None:
    """TUPLE[index] of the frame `payload` whose decoded TUPLE is `args`;
    None if there is no such item."""
    if type(args) is list and index < len(args) < 16:
        # Most clients encode as msgpack does and send TUPLE last: then the
        # frame ends with the args as packed here, and no walk is needed.
        # (Should the match come from another key's bytes, these are still
        # the very values the client sent, encoded the shortest way.)
        try:
            if len(args) == 1:  # put(data): one pack, the data after its array's head
                packed = pack(args[0])
                head = len(payload) - len(packed) - 1
                if head > 0 and payload[head] == 0x91 and payload.endswith(packed):
                    return packed
            else:
                items = [pack(arg) for arg in args]
                if payload.endswith(bytes((0x90 | len(args),)) + b"".join(items)):
                    return items[index]
        except (TypeError, ValueError, OverflowError):
            pass
    pos = skip(payload, 0)  # the header
    n, pos = _container(payload, pos)
    found = None
    for _ in range(n):
        end = skip(payload, pos)
        # A uint key is at most 9 bytes; the last TUPLE key wins, as in the body.
        if end - pos <= 9 and _unpackb(payload[pos:end]) == KEY_TUPLE:
            found = end
        pos = skip(payload, end)
    if found is None:
        return None
    n, pos = _container(payload, found)
    if index >= n:
        return None
    pos = skip(payload, pos, index)
    return payload[pos : skip(payload, pos)]


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
