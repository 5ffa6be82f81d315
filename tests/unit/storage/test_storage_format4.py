"""Format 4 (FORMAT.md §5.2, §6): a WAL delete record holds the key alone.

The codec writes and checks it; recovery and a replica apply deletes by key
whatever the version; a data directory whose old segments (version 3, deletes
with their tuple) are followed by new ones recovers to the same state, and
`wal cat` reads both.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from queuebox.protocol.walformat import OP_CODES, decode_header, encode_frame
from queuebox.storage import walcat
from queuebox.storage.engine import Engine
from queuebox.storage.records import BadBody, BodyDecoder, change_record, pack, unpack
from queuebox.storage.rows import RowCodec
from queuebox.storage.space import IndexDef, Space, SpaceDef
from tests.unit.storage.storage_harness import FakeClock, contents, flush, tasks

PAIRS = (IndexDef("pk", (0, 1)),)  # a two-part primary key


def v3_header(lsn: int) -> bytes:
    head = struct.pack(">8sHHQ", b"QBOXWAL\n", 3, 0, lsn)
    return head + struct.pack(">I", zlib.crc32(head))


def record(lsn: int, op: str, sid: int, space: str, **fields: Any) -> bytes:
    body = {"lsn": lsn, "ts": 1_700_000_000.0 + lsn, "op": op, "sid": sid, "space": space}
    return encode_frame(pack({**body, **fields}))


def write_v3_segment(data_dir: Path) -> None:
    """What a version-3 server wrote: deletes carry the key and the whole tuple."""
    q = SpaceDef(512, "q", (IndexDef("task_id", (0,)),), format=("task_id", "status", "data"))
    pairs = SpaceDef(513, "pairs", PAIRS)
    frames = [
        record(1, "create_space", 512, "q", **{"def": q.to_wire()}),
        record(2, "create_space", 513, "pairs", **{"def": pairs.to_wire()}),
        *(record(3 + i, "insert", 512, "q", tuple=(i, "r", b"old %d" % i)) for i in range(4)),
        record(7, "insert", 513, "pairs", tuple=("a", 1, "x")),
        record(8, "insert", 513, "pairs", tuple=("a", 2, "y")),
        record(9, "delete", 512, "q", key=(1,), tuple=(1, "r", b"old 1")),
        record(10, "delete", 513, "pairs", key=("a", 1), tuple=("a", 1, "x")),
    ]
    data_dir.mkdir(parents=True)
    (data_dir / f"{1:020d}.wal").write_bytes(v3_header(1) + b"".join(frames))


def test_a_delete_record_holds_the_key_and_no_tuple() -> None:
    space = Space(SpaceDef(512, "q", (IndexDef("task_id", (0,)),)), lambda *a: None)
    row = RowCodec().encode((7, "t", b"payload " * 8))
    record = change_record(pack, 5, 1.0, "delete", space, row, None)
    assert unpack(record) == (5, 1.0, OP_CODES["delete"], 512, "q", (7,))  # version 5: positional
    body = {"lsn": 5, "ts": 1.0, "op": "delete", "sid": 512, "space": "q", "key": (7,)}
    decode = BodyDecoder("wal")
    assert decode(record) == body
    assert decode(pack(body))["key"] == (7,)  # a version-4 record
    # A version-3 delete (key and tuple) still reads; one without a key does not.
    old = decode(pack({**body, "tuple": (7, "t", b"x")}))
    assert old["key"] == (7,) and old["tuple"] == (7, "t", b"x")
    no_key = {k: v for k, v in body.items() if k != "key"}
    with pytest.raises(BadBody, match="delete record without key"):
        decode(pack({**no_key, "tuple": (7, "t", b"x")}))


def test_a_put_and_ack_take_fewer_wal_bytes_than_before(make_engine, data_dir) -> None:
    e = make_engine()
    q = tasks(e)
    flush(e)
    before = e.durable_lsn
    data = b"d" * 100
    q.insert((1, "r", data))
    q.update((1,), {1: "t"})
    q.delete((1,))
    flush(e)
    frames = e.wal_cursor(before).read()
    # The delete's frame holds no copy of the data: it appears twice (put, take), not 3 times.
    assert frames.count(data) == 2


def test_old_and_new_segments_recover_to_the_same_state(data_dir: Path) -> None:
    write_v3_segment(data_dir)
    clock = FakeClock()
    e = Engine(data_dir, clock=clock)
    e.open()
    try:
        assert contents(e) == {
            "q": [(0, "r", b"old 0"), (2, "r", b"old 2"), (3, "r", b"old 3")],
            "pairs": [("a", 2, "y")],
        }
        q, pairs = e.catalog.space("q"), e.catalog.space("pairs")
        q.delete((2,))  # version-5 records from here on
        q.insert((9, "r", b"new 9"))
        pairs.insert(("b", 1, "z"))
        pairs.delete(("a", 2))
        flush(e)
        want = contents(e)
    finally:
        e.close()
    segments = sorted(data_dir.glob("*.wal"))
    assert [decode_header(p.read_bytes()[:24]).version for p in segments] == [3, 5]
    e = Engine(data_dir, clock=clock)
    report = e.open()
    try:
        assert (
            contents(e)
            == want
            == {
                "q": [(0, "r", b"old 0"), (3, "r", b"old 3"), (9, "r", b"new 9")],
                "pairs": [("b", 1, "z")],
            }
        )
        assert report.wal_records == 14 and not report.skipped
    finally:
        e.close()
    out, err = io.StringIO(), io.StringIO()
    assert walcat.main([str(data_dir)], out, err) == 0 and err.getvalue() == ""
    deletes = [
        line for line in map(json.loads, out.getvalue().splitlines()) if line["op"] == "delete"
    ]
    assert [(d["key"], "tuple" in d) for d in deletes] == [
        ([1], True),
        (["a", 1], True),
        ([2], False),
        (["a", 2], False),
    ]


def test_a_replica_applies_old_and_new_deletes_by_key(tmp_path: Path) -> None:
    replica = Engine(tmp_path / "r", clock=FakeClock())
    replica.open()
    replica.writable = False
    try:
        decode = BodyDecoder("wal")
        q = SpaceDef(512, "q", (IndexDef("task_id", (0,)),))
        frames = [
            record(1, "create_space", 512, "q", **{"def": q.to_wire()}),
            record(2, "insert", 512, "q", tuple=(1, "r", b"a")),
            record(3, "insert", 512, "q", tuple=(2, "r", b"b")),
            record(4, "delete", 512, "q", key=(1,), tuple=(1, "r", b"a")),  # version 3
            record(5, "delete", 512, "q", key=(2,)),  # version 4
        ]
        for frame in frames:
            replica.apply_replicated(frame, decode(frame[12:]))
        flush(replica)
        assert contents(replica) == {"q": []}
    finally:
        replica.close()
