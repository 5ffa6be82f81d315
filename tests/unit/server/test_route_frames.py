"""The router's reads of a shard's reply (server/route/frames.py): the fixed
23-byte header a shard packs is read at its offsets, and gives what the
key-by-key read of the same reply in another msgpack form gives."""

from __future__ import annotations

import io
from typing import Any

import msgpack
import pytest

from queuebox.protocol import ErrorCode, encode_data, encode_error, reply_head
from queuebox.server.route.frames import (
    INTERNAL_SYNC,
    data_count,
    framed,
    replies_at,
    resynced,
    schema_at,
    stamped,
)
from queuebox.server.route.upstream import SchemaIds

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
    assert reply_head(fixed)[:2] == reply_head(loose)[:2]
    assert reply_head(fixed)[1] == SYNC
    assert (reply_head(fixed)[2], reply_head(loose)[2]) == (23, 23 - (len(fixed) - len(loose)))
    assert data_count(fixed) == data_count(loose) == {"a task": 1, "no task": 0}.get(what, -1)
    header, body = _read(resynced(fixed, 7))
    assert header[1] == 7
    assert _read(resynced(fixed, 7)) == _read(resynced(loose, 7))
    assert body == _read(REPLIES[what])[1]


def test_the_replies_a_read_starts_with_go_back_whole_up_to_the_first_other_frame() -> None:
    """replies_at: client replies in the fixed form, handed on as they came, up to a
    reply the router must read itself (its own sync, a take(0) it made for the client
    that found no task) or a cut frame."""
    mine = [encode_data(s, 3, [[s, "r", "x"]]) for s in (1, 2)] + [encode_error(3, 3, 1, "no")]
    own = encode_data(SYNC, 3, [])
    forwarded = {1, 2, 3, 9}
    data = b"".join(mine)
    assert replies_at(data + own + mine[0], {}, forwarded) == (len(data), 3)
    assert forwarded == {9}  # their syncs left it; 9 is still in flight
    forwarded = {1}
    taking = {2: "a take(0) of the router's", 3: "another"}
    # a take(0)'s task or error goes on with the rest, its sync leaves `taking`
    assert replies_at(data, taking, forwarded) == (len(data), 1)
    assert taking == {} and forwarded == set()
    none = encode_data(2, 3, [])  # that shard had no task: takes.py reads it
    taking = {2: "a take(0) of the router's"}
    assert replies_at(mine[0] + none + mine[2], taking, {1, 3}) == (len(mine[0]), 1)
    assert list(taking) == [2]
    cut = mine[0] + mine[1][:-1]
    assert replies_at(cut, {}, {1, 2}) == (len(mine[0]), 1)  # the cut one waits
    assert replies_at(framed(_loose(mine[0][5:])), {}, {1}) == (0, 0)  # another form: by keys
    push = mine[0][:8] + (0x80).to_bytes(4, "big") + mine[0][12:]  # IPROTO_CHUNK: more to come
    assert replies_at(push + mine[1], {}, {1, 2}) == (0, 0)
    assert replies_at(b"", {}, set()) == (0, 0)
    assert data_count(mine[0][5:20]) == -1  # shorter than a fixed header: read by keys


def test_every_fixed_reply_goes_out_with_the_presented_schema_id() -> None:
    mine = encode_data(7, 0, [True])  # the router's own reply
    forwarded = encode_data(8, 84, [[1, "r", "x"]]) + encode_error(9, 85, 116, "no")
    out = bytes(stamped(mine + forwarded, 169))  # a bytearray when written into
    assert [schema_at(out, at + 5) for at in _starts(out)] == [169, 169, 169]
    assert [_read(f) for f in _frames(out)] == [
        [{**h, 5: 169}, body] for h, body in (_read(f) for f in _frames(mine + forwarded))
    ]
    same = encode_data(1, 169, [])
    assert stamped(same, 169) is same  # nothing to write: no copy
    greeting = b"Tarantool 2.6.0".ljust(128, b" ")
    assert stamped(greeting, 169) == greeting  # not a framed reply: left as it is
    assert schema_at(_loose(REPLIES["a task"][5:]), 0) == -1  # another form: not read


def test_the_presented_id_moves_with_any_shard_and_only_then() -> None:
    ids = SchemaIds()
    assert ids.presented == 0  # no shard heard from
    ids.saw("a", 84)
    ids.saw("b", 85)
    assert ids.presented == 169
    ids.saw("a", 84)
    ids.saw("a", -1)  # a reply in another form says nothing
    assert ids.presented == 169
    ids.saw("a", 86)  # a tube made on a
    assert ids.presented == 171


def _starts(data: bytes) -> list[int]:
    starts, at = [], 0
    while at < len(data):
        starts.append(at)
        at += 5 + int.from_bytes(data[at + 1 : at + 5], "big")
    return starts


def _frames(data: bytes) -> list[bytes]:
    ends = [*_starts(data)[1:], len(data)]
    return [data[a:b] for a, b in zip(_starts(data), ends, strict=True)]
