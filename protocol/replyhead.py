"""A reply's header read from its bytes: the one reader of its code and sync.

Owns: `reply_head` (a reply's code, sync and where its body starts, without
decoding it) and `fixed_head_at` (the header in the fixed 23-byte form
response.py packs: {0x00: u32 code, 0x01: u64 sync, 0x05: u32 schema}).
The bundled client reads its plain OK replies so (clients.aio.wire) and the
router every reply of a shard (server/route/frames.py, upstream.py): both
read the fixed form at its offsets, any other form key by key.

Must not touch: I/O, a reply's body, what a code means. Never reads past
the payload: what it cannot read so is "other" (-1, -1, 0), never an error.
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

from .constants import KEY_REQUEST_TYPE, KEY_SYNC
from .rawmsgpack import container_at, int_at, is_map_head, uint_at, value_end

FIXED_HEADER: Final = 23  # the bytes of the fixed form
_OTHER: Final = (-1, -1, 0)


def fixed_head_at(data: bytes, at: i64) -> bool:
    """The 23 bytes at `at` are a header in the fixed form. Byte by byte, not
    slices nor startswith: the compiled build reads a byte without making an
    object (the startswith form was 7% of the router's busy samples under
    pipelined puts, py-spy: docs/cluster.md)."""
    return (
        len(data) >= at + FIXED_HEADER
        and data[at] == 0x83
        and data[at + 1] == 0x00
        and data[at + 2] == 0xCE
        and data[at + 7] == 0x01
        and data[at + 8] == 0xCF
        and data[at + 17] == 0x05
        and data[at + 18] == 0xCE
    )


def reply_head(payload: bytes) -> tuple[int, int, int]:
    """(code, sync, the index where the body starts) of a reply's header, a map
    whose code and sync are unsigned ints; (-1, -1, 0) for any other header or
    one cut short."""
    if fixed_head_at(payload, 0):
        return uint_at(payload, 3, 4), uint_at(payload, 9, 8), FIXED_HEADER
    size: i64 = len(payload)
    if size == 0 or not is_map_head(payload[0]) or value_end(payload, 0, size) < 0:
        return _OTHER
    pairs, pos = container_at(payload, 0)
    code = sync = -1
    for _ in range(pairs):
        key = payload[pos]
        pos = value_end(payload, pos, size)  # the header is whole: no end is NOT_WHOLE
        if key in (KEY_REQUEST_TYPE, KEY_SYNC):
            head = payload[pos]
            if head > 0x7F and not 0xCC <= head <= 0xCF:
                return _OTHER  # not an unsigned int
            if key == KEY_SYNC:
                sync = int_at(payload, pos)
            else:
                code = int_at(payload, pos)
        pos = value_end(payload, pos, size)
    if code < 0 or sync < 0:
        return _OTHER
    return code, sync, int(pos)
