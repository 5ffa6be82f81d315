"""Snapshots as streams of bounded records (FORMAT.md §5.3.1): every record's body
fits `snapshot_record_size`, a tuple too big for one is written in `part` records,
and what is written reads back whole; broken sequences of parts are damage; files of
versions 1 and 2 still read."""

from __future__ import annotations

import io
import json
import random
import zlib
from pathlib import Path
from typing import Any

import msgpack
import pytest

from queuebox.protocol.walformat import FRAME_OVERHEAD, HEADER_SIZE, encode_frame, encode_header
from queuebox.storage import walcat
from queuebox.storage.engine import Engine
from queuebox.storage.errors import CorruptLog, Unrecoverable
from queuebox.storage.framing import Damage, FrameDecoder
from queuebox.storage.packed import Packed, file_packb
from queuebox.storage.reader import LogFile, iter_records
from queuebox.storage.records import pack, unpack
from queuebox.storage.snapshot import MIN_RECORD_SIZE, SnapshotJob
from tests.unit.storage.storage_harness import FakeClock, contents, flush, tasks

LIMIT = 4096
# Data sizes around the limit: small, just under and over a record, many records.
SIZES = [0, 10, 1000, LIMIT - 200, LIMIT - 60, LIMIT, LIMIT + 1, 3 * LIMIT + 17, 40_000]


def snap_file(data_dir: Path) -> Path:
    [path] = sorted(data_dir.glob("*.snap"))
    return path


def frames(path: Path) -> list[bytes]:
    decoder = FrameDecoder(HEADER_SIZE)
    decoder.feed(path.read_bytes()[HEADER_SIZE:])
    decoder.feed_eof()
    events = decoder.take()
    assert not [ev for ev in events if isinstance(ev, Damage)]
    return [ev.body for ev in events]  # type: ignore[union-attr]


def snapshot(engine: Any) -> Any:
    job = engine.begin_snapshot()
    result = job.run()
    engine.finish_snapshot(job)
    return result


def fill(engine: Any) -> None:
    q = tasks(engine)
    rng = random.Random(7)
    for i, size in enumerate(SIZES * 3):
        q.insert((i, "r", Packed(msgpack.packb(rng.randbytes(size)))))
    other = tasks(engine, "other")
    for i in range(300):
        other.insert((i, "r", Packed(b"\xa1x")))
    flush(engine)


def test_every_record_fits_the_limit_and_the_snapshot_reads_back_whole(
    make_engine: Any, data_dir: Path
) -> None:
    engine = make_engine(snapshot_record_size=LIMIT)
    fill(engine)
    want = contents(engine)
    result = snapshot(engine)
    assert result.tuples == len(SIZES) * 3 + 300
    bodies = frames(snap_file(data_dir))
    assert max(map(len, bodies)) <= LIMIT
    ops = [unpack(body)["op"] for body in bodies]
    assert ops.count("part") > 10 and ops.count("rows") > 3 and ops[-1] == "end"
    engine.close()
    again = make_engine(snapshot_record_size=LIMIT)
    assert contents(again) == want
    assert again.snapshot_lsn == result.lsn  # restarted from the snapshot, not the WAL


def test_the_default_limit_cuts_a_million_byte_task_into_parts_too(
    make_engine: Any, data_dir: Path
) -> None:
    engine = make_engine()
    q = tasks(engine)
    for i in range(3):
        q.insert((i, "r", Packed(msgpack.packb(bytes(1_500_000)))))
    flush(engine)
    want = contents(engine)
    snapshot(engine)
    assert max(map(len, frames(snap_file(data_dir)))) <= 1 << 20
    engine.close()
    assert contents(make_engine()) == want


def test_the_reader_joins_parts_into_one_row_per_tuple(make_engine: Any, data_dir: Path) -> None:
    engine = make_engine(snapshot_record_size=LIMIT)
    fill(engine)
    want = contents(engine)
    snapshot(engine)
    rows: dict[str, list[tuple[Any, ...]]] = {}
    for body in iter_records(snap_file(data_dir)):
        assert body["op"] != "part"
        if body["op"] == "rows":
            rows.setdefault(body["space"], []).extend(body["tuples"])
    assert {name: sorted(found) for name, found in rows.items()} == want


def test_wal_cat_prints_a_tuple_written_in_parts_as_one_row(
    make_engine: Any, data_dir: Path
) -> None:
    engine = make_engine(snapshot_record_size=LIMIT)
    q = tasks(engine)
    q.insert((1, "r", Packed(msgpack.packb(b"z" * 20_000))))
    flush(engine)
    snapshot(engine)
    out, err = io.StringIO(), io.StringIO()
    assert walcat.main([str(snap_file(data_dir))], out, err) == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    [row] = [r for r in rows if r["op"] == "row"]
    assert row["tuple"][:2] == [1, "r"] and len(row["tuple"][2]["$bin"]) > 20_000


def test_the_limit_has_a_floor(data_dir: Path) -> None:
    with pytest.raises(ValueError, match="at least"):
        SnapshotJob(None, data_dir, 1, [], True, 0, record_size=MIN_RECORD_SIZE - 1)  # type: ignore[arg-type]


# -- damage: a sequence of parts that breaks (FORMAT.md §5.3.1, §7) --


def _snap(*bodies: dict[str, Any], version: int = 3) -> bytes:
    head = bytearray(encode_header("snap", 5))
    head[8:10] = version.to_bytes(2, "big")
    head[20:24] = zlib.crc32(bytes(head[:20])).to_bytes(4, "big")
    return bytes(head) + b"".join(encode_frame(pack(b)) for b in bodies)


CREATE = {"op": "create_space", "sid": 512, "space": "q", "def": {
    "id": 512, "name": "q", "indexes": [{"name": "pk", "parts": [0], "unique": True}],
    "temporary": False, "format": [], "opts": {},
}}  # fmt: skip
TUPLE = file_packb([7, "r", "x" * 100])


def part(at: int, size: int = len(TUPLE), data: bytes | None = None) -> dict[str, Any]:
    piece = TUPLE[at : at + 40] if data is None else data
    return {"op": "part", "sid": 512, "space": "q", "size": size, "at": at, "bytes": piece}


def parts() -> list[dict[str, Any]]:
    return [part(at) for at in range(0, len(TUPLE), 40)]


def end(count: int) -> dict[str, Any]:
    return {"op": "end", "spaces": 1, "count": count}


def test_parts_in_order_are_one_tuple(tmp_path: Path) -> None:
    path = tmp_path / "x.snap"
    path.write_bytes(_snap(CREATE, *parts(), end(1)))
    [_, rows, _] = list(iter_records(path))
    assert rows == {"op": "rows", "sid": 512, "space": "q", "tuples": ((7, "r", "x" * 100),)}


@pytest.mark.parametrize(
    ("bodies", "reason"),
    [
        ([*parts()[:2], end(1)], "cut short by another record"),
        (parts()[:2], "cut short by the end of the file"),
        ([*parts()[:2], *parts(), end(1)], "cut short by another tuple"),
        ([parts()[0], parts()[2], end(1)], "out of sequence"),
        ([parts()[1], end(0)], "of no tuple"),
        ([*parts()[:-1], part(len(TUPLE) - 1, data=b"toolong"), end(1)], "out of sequence"),
        ([{**parts()[0], "size": len(TUPLE) + 1}, *parts()[1:], end(1)], "out of sequence"),
    ],
    ids=["another-record", "eof", "another-tuple", "gap", "stray", "overrun", "other-size"],
)
def test_a_broken_sequence_of_parts_is_damage(
    tmp_path: Path, bodies: list[dict[str, Any]], reason: str
) -> None:
    path = tmp_path / "x.snap"
    path.write_bytes(_snap(CREATE, *bodies))
    damage = [ev for ev in LogFile(path).events() if isinstance(ev, Damage)]
    assert damage and reason in damage[0].reason
    with pytest.raises(CorruptLog):
        list(iter_records(path))


def test_recovery_does_not_use_a_snapshot_with_broken_parts(
    make_engine: Any, data_dir: Path
) -> None:
    engine = make_engine(snapshot_record_size=LIMIT)
    fill(engine)
    want = contents(engine)
    snapshot(engine)
    engine.close()
    path = snap_file(data_dir)
    data = bytearray(path.read_bytes())
    # Drop one whole `part` frame from the middle: every frame stays sound alone.
    offset, cut = HEADER_SIZE, None
    for body in frames(path):
        if unpack(body)["op"] == "part" and unpack(body)["at"] > 0:
            cut = (offset, offset + FRAME_OVERHEAD + len(body))
            break
        offset += FRAME_OVERHEAD + len(body)
    assert cut is not None
    path.write_bytes(bytes(data[: cut[0]] + data[cut[1] :]))
    again = make_engine(snapshot_record_size=LIMIT)
    # The snapshot is not used; the WAL from LSN 1 (kept: checkpoint_count) has it all.
    assert contents(again) == want and again.snapshot_lsn > 0


@pytest.mark.parametrize("version", [1, 2])
def test_older_versions_still_read(tmp_path: Path, version: int) -> None:
    path = tmp_path / "x.snap"
    rows = {"op": "rows", "sid": 512, "space": "q", "tuples": [[1, "r", "a"], [2, "r", "b"]]}
    path.write_bytes(_snap(CREATE, rows, end(2), version=version))
    log = LogFile(path)
    assert log.header.version == version
    assert [b["op"] for b in iter_records(path)] == ["create_space", "rows", "end"]


def test_recovery_reads_rows_as_the_bytes_each_tuple_is_written_in(tmp_path: Path) -> None:
    """LogFile(raw_rows=True), what recovery reads a snapshot with: a `rows`
    record's tuples come as their bytes (a space's rows), a tuple written in
    parts as its joined bytes; the decoded reader still gives tuples."""
    path = tmp_path / "x.snap"
    listed = [[1, "r", "a"], [2, "t", {"k": [1.5, None]}]]
    rows = {"op": "rows", "sid": 512, "space": "q", "tuples": listed}
    path.write_bytes(_snap(CREATE, rows, *parts(), end(3)))
    raw = [ev.body for ev in LogFile(path, raw_rows=True).events()]
    assert [b["op"] for b in raw] == ["create_space", "rows", "rows", "end"]
    assert raw[1]["tuples"] == tuple(file_packb(t) for t in listed)
    assert raw[2]["tuples"] == (TUPLE,)
    decoded = list(iter_records(path))
    assert decoded[1]["tuples"] == ((1, "r", "a"), (2, "t", {"k": (1.5, None)}))


@pytest.mark.parametrize(
    ("tuples", "reason"),
    [([[1, "r", "a"], 7], "not a whole array"), (7, "a bad 'tuples'")],
    ids=["a-tuple", "the-tuples"],
)
def test_a_rows_record_holding_no_array_is_damage(tmp_path: Path, tuples: Any, reason: str) -> None:
    path = tmp_path / f"{5:020d}.snap"
    rows = {"op": "rows", "sid": 512, "space": "q", "tuples": tuples}
    path.write_bytes(_snap(CREATE, rows, end(2)))
    [damage] = [ev for ev in LogFile(path, raw_rows=True).events() if isinstance(ev, Damage)]
    assert reason in damage.reason
    with pytest.raises(Unrecoverable, match="no snapshot is usable"):
        Engine(tmp_path, clock=FakeClock()).open()
