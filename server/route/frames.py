"""The few bytes of a frame a router reads, and the replies it makes itself.

Owns the run of replies at the start of a shard's read that go back to the
client as they came (`replies_at`), a reply's schema version (`schema_at`), a
client's outgoing replies with the one schema id the router presents written
in (`stamped`: docs/cluster.md "One schema id"), a reply handed on under
another sync (`resynced`: a take the router made for a client), the length
prefix (`framed`), and the errors the router answers with: a shard without a
primary (may be retried), a call in flight when its shard was lost (may have
run). Must not touch sockets or decide where a call goes. A reply's code and
sync: protocol.replyhead.
"""

from __future__ import annotations

from typing import Any, Final

import msgpack
from mypy_extensions import i64

from queuebox.protocol import (
    ErrorCode,
    Request,
    RequestType,
    call16_shape,
    encode_data,
    encode_error,
)
from queuebox.protocol.constants import KEY_DATA, KEY_SYNC, RESPONSE_CHUNK
from queuebox.protocol.rawmsgpack import container_at, is_array_head, uint_at, value_end
from queuebox.protocol.replyhead import FIXED_HEADER, fixed_head_at

# The router's own replies are made with this schema id; ClientLink writes
# the id it presents into every reply on the way out (`stamped`).
SCHEMA: Final = 0
# Syncs the router's own calls to a shard use: far above any client's.
INTERNAL_SYNC: Final = 1 << 62
# A shard's reply header is in protocol/response.py's fixed 23-byte form
# (replyhead.fixed_head_at): read at its offsets; any other form key by key.
_DATA_AT: Final = b"\x81\x30\xdd"  # {DATA: array32}, how a shard packs DATA


def framed(payload: bytes) -> bytes:
    return b"\xce" + len(payload).to_bytes(4, "big") + payload


def replies_at(data: bytes, taking: dict[int, Any], forwarded: set[int]) -> tuple[int, int]:
    """(where they end, how many were in `forwarded`) of the whole replies at the
    start of `data`, a shard's read, that go back to the client as they are:
    each in the shard's fixed form under a client's sync, not a push
    (IPROTO_CHUNK: more to come), and if it answers a take(0) the router sent
    for the client (`taking`), one with a task or an error; their syncs leave
    `forwarded` and `taking`. The rest is read frame by frame."""
    pos: i64 = 0
    size: i64 = len(data)
    before: i64 = len(forwarded)
    # Lengths and syncs read byte by byte (uint_at), not with int.from_bytes:
    # in the compiled build that was a Python method call per reply, two per
    # reply about a third of the router's work per forwarded put (route_path.py).
    while pos + 5 + FIXED_HEADER <= size and data[pos] == 0xCE:
        stop: i64 = pos + 5 + uint_at(data, pos + 1, 4)
        if stop > size or not fixed_head_at(data, pos + 5) or _is_chunk(data, pos + 5):
            break
        if data[pos + 14] >= 0x40:  # a sync of INTERNAL_SYNC (2**62) or above: the router's
            break
        sync: i64 = uint_at(data, pos + 14, 8)
        if taking and sync in taking:
            if not _found_at(data, pos + 5, stop):
                break  # no task: takes.py asks the other shards
            del taking[sync]
        forwarded.discard(sync)
        pos = stop
    return int(pos), int(before - len(forwarded))


def schema_at(data: bytes, at: i64) -> i64:
    """The schema version in the fixed-form reply header at `at`; -1 in another form."""
    if not fixed_head_at(data, at):
        return -1
    return uint_at(data, at + 19, 4)


def stamped(data: bytes, schema: i64) -> bytes | bytearray:
    """`data`, whole framed replies, with `schema` as every fixed-form header's
    schema version (the router's own replies and the shards' are all in that
    form); copied once when one differs, the copy returned. Stops at the
    first bytes that are not a framed reply (the greeting)."""
    out: bytearray | None = None
    b0: i64 = (schema >> 24) & 0xFF
    b1: i64 = (schema >> 16) & 0xFF
    b2: i64 = (schema >> 8) & 0xFF
    b3: i64 = schema & 0xFF
    pos: i64 = 0
    size: i64 = len(data)
    while pos + 5 + FIXED_HEADER <= size and data[pos] == 0xCE:
        at: i64 = pos + 5 + 19
        if fixed_head_at(data, pos + 5) and uint_at(data, at, 4) != schema:
            if out is None:
                out = bytearray(data)
            out[at] = b0
            out[at + 1] = b1
            out[at + 2] = b2
            out[at + 3] = b3
        pos += 5 + uint_at(data, pos + 1, 4)
    return data if out is None else out


def data_count(payload: bytes) -> int:
    """How many items a success reply's DATA holds (a take: 1 or 0), read from
    its bytes; -1 for an error reply or another shape."""
    if fixed_head_at(payload, 0) and payload.startswith(_DATA_AT, FIXED_HEADER):
        return int.from_bytes(payload[26:30], "big")
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
    """The reply `payload` (header and body) as a framed reply to `sync`: the
    header's sync value replaced in its bytes, the rest as the shard sent it."""
    if fixed_head_at(payload, 0):
        return framed(payload[:9] + sync.to_bytes(8, "big") + payload[17:])
    n, pos = container_at(payload, 0)
    end = len(payload)
    for _ in range(n):
        key = payload[pos]
        start = pos + 1
        pos = value_end(payload, start, end)
        if key == KEY_SYNC:
            return framed(payload[:start] + msgpack.packb(sync) + payload[pos:])
    header: dict[int, Any] = msgpack.unpackb(payload[:pos], strict_map_key=False)
    header[KEY_SYNC] = sync  # a header without a sync (no shard sends one)
    return framed(msgpack.packb(header) + payload[pos:])


def _found_at(data: bytes, at: i64, stop: i64) -> bool:
    """The fixed-form reply data[at:stop] is an error, or DATA of one item or
    more (a take's task); False for an empty DATA or another shape."""
    if not _zero4(data, at + 3):
        return True  # an error: the client gets it as the shard said it
    body: i64 = at + FIXED_HEADER
    return body + 7 <= stop and data.startswith(_DATA_AT, body) and not _zero4(data, body + 3)


# Byte by byte, not slices nor startswith: the compiled build reads a byte
# without making an object (the startswith form of _fixed_at alone was 7% of
# the router's busy samples under pipelined puts, py-spy: docs/cluster.md).
def _zero4(data: bytes, at: i64) -> bool:
    return _zero3(data, at) and data[at + 3] == 0


def _zero3(data: bytes, at: i64) -> bool:
    return data[at] == 0 and data[at + 1] == 0 and data[at + 2] == 0


def _is_chunk(data: bytes, at: i64) -> bool:
    """The fixed-form header at `at` has IPROTO_CHUNK's code (0x80: a push)."""
    return (
        data[at + 6] == RESPONSE_CHUNK
        and data[at + 3] == 0
        and data[at + 4] == 0
        and data[at + 5] == 0
    )


def no_primary(sync: int, shard: str, why: str = "has no primary right now") -> bytes:
    return encode_error(
        sync, SCHEMA, ErrorCode.ER_LOADING,
        f"shard {shard} {why}: the call may be retried",
    )  # fmt: skip


def lost_in_flight(sync: int, shard: str, why: str) -> bytes:
    """A client's call sent on to a shard whose connection went away before the
    answer: it may have run there (a put may have made its task), so the client
    is not told that sending it again is harmless."""
    return encode_error(
        sync, SCHEMA, ErrorCode.ER_LOADING,
        f"shard {shard} {why} with the call in flight: it may have run there "
        "(a put with a key may be retried: the shard answers the task it made)",
    )  # fmt: skip


def failed(sync: int, code: int, message: str) -> bytes:
    return encode_error(sync, SCHEMA, code, message)


def answer(req: Request, data: list[Any]) -> bytes:
    """The router's own DATA reply to `req`, in the shape it asked (CALL_16 or CALL)."""
    shaped = call16_shape(data) if req.type == RequestType.CALL_16 else data
    return encode_data(req.sync, SCHEMA, shaped)
