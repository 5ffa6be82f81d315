"""The few bytes of a frame a router reads, and the replies it makes itself.

Owns: a reply's code and sync read from its header without decoding its body
(`head_of`), a reply handed on under another sync (`resynced`: a take the
router made for a client), the length prefix (`framed`), and the errors the
router answers with: a shard without a primary (may be retried). Must not touch
sockets or decide where a call goes.
"""

from __future__ import annotations

from typing import Any, Final

import msgpack

from queuebox.protocol import ErrorCode, encode_error
from queuebox.protocol.constants import KEY_DATA, KEY_REQUEST_TYPE, KEY_SYNC
from queuebox.protocol.rawmsgpack import (
    container_at,
    int_at,
    is_array_head,
    is_int_head,
    value_end,
)

SCHEMA: Final = 0  # the router's own replies: no schema of its own
# Syncs the router's own calls to a shard use: far above any client's.
INTERNAL_SYNC: Final = 1 << 62


def framed(payload: bytes) -> bytes:
    return b"\xce" + len(payload).to_bytes(4, "big") + payload


def head_of(payload: bytes) -> tuple[int, int]:
    """(code, sync) of a reply's header; (-1, -1) when it cannot be read so."""
    try:
        n, pos = container_at(payload, 0)
        code = sync = -1
        end = len(payload)
        for _ in range(n):
            key = payload[pos]
            pos += 1
            if (key in (KEY_SYNC, KEY_REQUEST_TYPE)) and is_int_head(payload[pos]):
                value = int_at(payload, pos)
                if key == KEY_SYNC:
                    sync = value
                else:
                    code = value
            pos = value_end(payload, pos, end)
        return code, sync
    except (IndexError, ValueError):
        return -1, -1


def data_count(payload: bytes) -> int:
    """How many items a success reply's DATA holds (a take: 1 or 0), read from
    its bytes; -1 for an error reply or another shape."""
    try:
        end = value_end(payload, 0, len(payload))
        if payload[end] != 0x81 or payload[end + 1] != KEY_DATA:
            return -1
        if not is_array_head(payload[end + 2]):
            return -1
        return int(container_at(payload, end + 2)[0])  # a shard packs one task as array32
    except (IndexError, ValueError):
        return -1


def resynced(payload: bytes, sync: int) -> bytes:
    """The reply `payload` (header and body) as a framed reply to `sync`."""
    end = value_end(payload, 0, len(payload))
    header: dict[int, Any] = msgpack.unpackb(payload[:end], strict_map_key=False)
    header[KEY_SYNC] = sync
    return framed(msgpack.packb(header) + payload[end:])


def no_primary(sync: int, shard: str, why: str = "has no primary right now") -> bytes:
    return encode_error(
        sync, SCHEMA, ErrorCode.ER_LOADING,
        f"shard {shard} {why}: the call may be retried",
    )  # fmt: skip


def failed(sync: int, code: int, message: str) -> bytes:
    return encode_error(sync, SCHEMA, code, message)
