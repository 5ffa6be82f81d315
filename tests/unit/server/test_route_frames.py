"""The router's reads of a shard's reply (server/route/frames.py): the fixed
23-byte header a shard packs is read at its offsets, and gives what the
key-by-key read of the same reply in another msgpack form gives."""

from __future__ import annotations

import io
from typing import Any

import msgpack
import pytest

from queuebox.protocol import ErrorCode, encode_data, encode_error
from queuebox.server.route.frames import INTERNAL_SYNC, data_count, head_of, resynced

SYNC = INTERNAL_SYNC + 5
REPLIES = {
    "a task": encode_data(SYNC, 3, [[1, "r", "x"]]),
    "no task": encode_data(SYNC, 3, []),
    "an error": encode_error(SYNC, 3, ErrorCode.ER_LOADING, "shard a has no primary"),
}


def _loose(payload: bytes) -> bytes:
    """The same reply with its header packed by msgpack (shortest forms)."""
    header_end = 23
    header = msgpack.unpackb(payload[:header_end], strict_map_key=False)
    return bytes(msgpack.packb(header)) + payload[header_end:]


def _read(frame: bytes) -> list[Any]:
    return list(msgpack.Unpacker(io.BytesIO(frame[5:]), strict_map_key=False))


@pytest.mark.parametrize("what", sorted(REPLIES))
def test_a_fixed_header_reads_as_the_key_by_key_read(what: str) -> None:
    fixed = REPLIES[what][5:]
    loose = _loose(fixed)
    assert len(loose) < len(fixed)  # really another form
    assert head_of(fixed) == head_of(loose)
    assert head_of(fixed)[1] == SYNC
    assert data_count(fixed) == data_count(loose) == {"a task": 1, "no task": 0}.get(what, -1)
    header, body = _read(resynced(fixed, 7))
    assert header[1] == 7
    assert _read(resynced(fixed, 7)) == _read(resynced(loose, 7))
    assert body == _read(REPLIES[what])[1]
