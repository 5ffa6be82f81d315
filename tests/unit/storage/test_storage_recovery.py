"""Recovery from damaged directories, the directory lock, progress reports."""

from __future__ import annotations

import gc
import subprocess
import sys
import zlib
from pathlib import Path

import msgpack
import pytest

from queuebox.protocol.walformat import HEADER_SIZE, encode_frame, encode_header
from queuebox.storage.engine import Engine
from queuebox.storage.errors import CorruptLog, DataDirLocked, Unrecoverable
from queuebox.storage.packed import Packed
from queuebox.storage.reader import LogFile, Record
from queuebox.storage.records import pack
from queuebox.storage.space import IndexDef
from tests.unit.storage.storage_harness import contents, flush, tasks

ROOT = Path(__file__).resolve().parents[3]


def batches(engine: Engine, n: int, start: int = 0) -> None:
    """n batches of two inserts each."""
    q = engine.catalog.get("q") or tasks(engine)
    for i in range(start, start + n):
        q.insert((2 * i, "r", b"a" * 20))
        q.insert((2 * i + 1, "r", b"b" * 20))
        flush(engine)


def segments(d: Path) -> list[Path]:
    return sorted(d.glob("*.wal"))


def record_offsets(path: Path) -> list[int]:
    return [ev.offset for ev in LogFile(path).events() if isinstance(ev, Record)]


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_torn_tail_is_cut_off_with_a_warning(make_engine, data_dir) -> None:
    e = make_engine()
    batches(e, 3)
    want = contents(e)
    e.close()
    seg = segments(data_dir)[-1]
    good_size = seg.stat().st_size
    partial = encode_frame(
        pack(
            {
                "lsn": 99,
                "ts": 1.0,
                "op": "insert",
                "sid": 512,
                "space": "q",
                "tuple": (1000, "r", b"torn"),
            }
        )
    )
    with seg.open("ab") as f:
        f.write(partial[: len(partial) // 2])  # a crash in the middle of a write
    again = Engine(data_dir, clock=lambda: 0.0)
    report = again.open()
    assert contents(again) == want
    assert seg.stat().st_size == good_size
    assert len(report.warnings) == 1 and "torn tail" in report.warnings[0]
    assert seg.name in report.warnings[0] and str(good_size) in report.warnings[0]
    batches(again, 1, start=50)  # appending after the cut is clean
    want = contents(again)
    again.close()
    third = make_engine()
    assert contents(third) == want


def test_garbage_zeros_at_the_tail_are_a_torn_tail(make_engine, data_dir) -> None:
    e = make_engine()
    batches(e, 2)
    want = contents(e)
    e.close()
    with segments(data_dir)[-1].open("ab") as f:
        f.write(b"\x00" * 4096)  # a power loss can leave allocated, unwritten blocks
    again = make_engine()
    assert contents(again) == want


def test_checksum_error_before_the_tail_refuses_to_start_naming_file_and_offset(
    make_engine, data_dir, clock
) -> None:
    e = make_engine()
    batches(e, 4)
    e.close()
    seg = segments(data_dir)[-1]
    offsets = record_offsets(seg)
    victim = offsets[3]
    flip(seg, victim + 20)
    engine = Engine(data_dir, clock=clock)
    with pytest.raises(CorruptLog) as caught:
        engine.open()
    err = caught.value
    assert err.path == str(seg) and err.offset == victim and "checksum" in err.reason
    assert str(seg) in str(err) and f"offset {victim}" in str(err)
    # the lock was released: a forced start works and skips just that record
    forced = make_engine(force_recovery=True)
    q = forced.catalog.space("q")
    assert len(q) == 7 and q.get((2,)) is None  # record #3 was the insert of task 2


def test_force_recovery_lists_what_it_skipped(data_dir, clock) -> None:
    e = Engine(data_dir, clock=clock)
    e.open()
    batches(e, 4)
    e.close()
    seg = segments(data_dir)[-1]
    victim = record_offsets(seg)[3]
    flip(seg, victim + 20)
    forced = Engine(data_dir, force_recovery=True, clock=clock)
    report = forced.open()
    forced.close()
    assert len(report.skipped) == 1 and f"offset {victim}" in report.skipped[0]
    assert report.tuples == 7


def test_damage_at_the_end_of_a_segment_that_is_not_the_last_is_corruption(
    make_engine, data_dir, clock
) -> None:
    e = make_engine(segment_size=400)
    batches(e, 8)
    e.close()
    first = segments(data_dir)[0]
    assert len(segments(data_dir)) > 1
    size = first.stat().st_size
    with first.open("r+b") as f:
        f.truncate(size - 5)
    with pytest.raises(CorruptLog) as caught:
        Engine(data_dir, clock=clock).open()
    assert caught.value.path == str(first) and "cut short" in caught.value.reason


def test_a_last_segment_cut_inside_its_header_is_removed(make_engine, data_dir) -> None:
    e = make_engine(segment_size=300)
    batches(e, 5)
    want = contents(e)
    e.close()
    nxt = data_dir / f"{e.last_lsn + 1:020d}.wal"
    nxt.write_bytes(b"QBOXWAL\n\x00\x01")  # a crash while creating the next segment
    again = make_engine(segment_size=300)
    assert contents(again) == want and not nxt.exists()
    batches(again, 1, start=40)  # and the name can be used again


def test_a_last_segment_with_only_torn_bytes_is_removed(make_engine, data_dir) -> None:
    e = make_engine()
    batches(e, 2)
    e.close()
    lsn = e.last_lsn + 1
    ghost = data_dir / f"{lsn:020d}.wal"
    ghost.write_bytes(encode_header("wal", lsn) + b"\xc1QBR\x00\x00")
    again = make_engine()
    assert not ghost.exists() and again.last_lsn == lsn - 1
    batches(again, 1, start=10)
    assert ghost.exists()


def test_an_unfinished_snapshot_is_removed_at_start(make_engine, data_dir) -> None:
    e = make_engine()
    batches(e, 2)
    e.close()
    leftover = data_dir / "00000000000000000004.snap.inprogress"
    leftover.write_bytes(b"half a snapshot")
    engine = Engine(data_dir, clock=lambda: 0.0)
    report = engine.open()
    engine.close()
    assert not leftover.exists() and "unfinished snapshot" in report.warnings[0]


def test_a_damaged_snapshot_falls_back_to_the_wal_and_is_replaced(
    make_engine, data_dir, clock
) -> None:
    e = make_engine()
    batches(e, 3)
    job = e.begin_snapshot()
    job.run()
    e.finish_snapshot(job)
    batches(e, 1, start=20)
    want = contents(e)
    e.close()
    snap = next(data_dir.glob("*.snap"))
    flip(snap, HEADER_SIZE + 30)
    again = Engine(data_dir, clock=clock)
    report = again.open()
    try:
        assert contents(again) == want and report.snapshot is None
        assert str(snap) in report.warnings[0] and "WAL alone" in report.warnings[1]
        assert snap.with_name(snap.name + ".damaged").exists()
    finally:
        again.close()
    clean = Engine(data_dir, clock=clock)
    report = clean.open()
    clean.close()
    assert report.snapshot is not None and not report.warnings


def test_a_snapshot_without_its_end_record_and_no_wal_before_it_is_unrecoverable(
    make_engine, data_dir, clock
) -> None:
    e = make_engine(segment_size=300, checkpoint_count=1)
    batches(e, 6)
    job = e.begin_snapshot()
    job.run()
    e.finish_snapshot(job)  # the WAL before the snapshot is gone
    e.close()
    snap = next(data_dir.glob("*.snap"))
    last = record_offsets(snap)[-1]
    with snap.open("r+b") as f:
        f.truncate(last)
    for force in (False, True):
        with pytest.raises(Unrecoverable, match=f"{snap.name} damaged.*nothing consistent"):
            Engine(data_dir, clock=clock, force_recovery=force).open()
    assert snap.exists()


def test_progress_is_reported_during_a_long_recovery(data_dir, clock) -> None:
    e = Engine(data_dir, clock=clock)
    e.open()
    q = tasks(e)
    for i in range(5000):
        q.insert((i, "r", b"x"))
    flush(e)
    e.close()
    ticks = iter(range(10**6))
    calls: list[tuple[int, int, float]] = []
    slow = Engine(data_dir, clock=clock, timer=lambda: float(next(ticks)))
    report = slow.open(progress=lambda r, b, s: calls.append((r, b, s)))
    slow.close()
    assert len(calls) >= 3
    assert [c[0] for c in calls] == sorted(c[0] for c in calls) and calls[-1][0] <= 5001
    assert all(b > 0 and s > 0 for _, b, s in calls)
    assert report.wal_records == 5001 and report.seconds > 0


def test_a_second_engine_in_this_process_is_refused(make_engine, data_dir, clock) -> None:
    make_engine()
    with pytest.raises(DataDirLocked) as caught:
        Engine(data_dir, clock=clock).open()
    assert str(data_dir) in str(caught.value) and "pid" in str(caught.value)


def test_a_second_server_process_is_refused_until_the_first_closes(make_engine, data_dir) -> None:
    first = make_engine()
    batches(first, 1)
    script = (
        "import sys, time\n"
        "from queuebox.storage.engine import Engine\n"
        "from queuebox.storage.errors import DataDirLocked\n"
        f"e = Engine({str(data_dir)!r}, clock=time.time)\n"
        "try:\n"
        "    e.open()\n"
        "except DataDirLocked as err:\n"
        "    print('LOCKED', err); sys.exit(3)\n"
        "print('OPENED', len(e.catalog.space('q'))); e.close()\n"
    )

    def other() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
        )

    refused = other()
    assert refused.returncode == 3 and "LOCKED" in refused.stdout, refused.stderr
    first.close()
    allowed = other()
    assert allowed.returncode == 0 and "OPENED 2" in allowed.stdout, allowed.stderr


def test_recovered_tuples_are_held_as_rows_like_live_ones(make_engine) -> None:
    """A persistent space holds each tuple as one bytes object (its msgpack),
    which the garbage collector does not track, whether the tuple was put or
    recovered from a snapshot or the WAL; readers get the tuple back."""
    e = make_engine()
    q = e.catalog.create_space("u", [IndexDef("id", (0,)), IndexDef("s", (1, 0), group=1)])
    want = [(i, "ready", "consumer-7", Packed(msgpack.packb("p" * 40))) for i in range(5)]
    for t in want[:4]:
        q.insert(t)
    flush(e)
    job = e.begin_snapshot()
    job.run()
    e.finish_snapshot(job)
    q.insert(want[4])
    flush(e)
    live = q.copy_rows()
    e.close()
    again = make_engine().catalog.space("u")
    for space in (q, again):
        rows = space.copy_rows()
        assert len(rows) == 5 and all(type(r) is bytes and not gc.is_tracked(r) for r in rows)
        assert list(space) == want and list(space.index("s").iterate(("ready",))) == want
        assert type(space.get((0,))[3]) is Packed  # type: ignore[index]
    assert sorted(again.copy_rows()) == sorted(live)  # byte for byte


def test_a_start_from_a_snapshot_counts_the_records_it_covers_without_decoding_them(
    make_engine, data_dir
) -> None:
    e = make_engine()
    batches(e, 3)  # LSN 1 creates q; 2..7 insert
    e.catalog.space("q").insert((50, "r", b"c"))  # LSN 8, taken, not yet written:
    batch = e.take_batch()  # the snapshot does not cut the segment (engine.py)
    assert batch is not None
    job = e.begin_snapshot()
    e.write_batch(batch)
    job.run()
    e.finish_snapshot(job)
    batches(e, 1, start=4)  # LSNs 9, 10: after the snapshot, in the same segment
    want = contents(e)
    e.close()
    (seg,) = segments(data_dir)
    # The record at LSN 4, covered by the snapshot: a sound frame whose body is no
    # record. Its LSN is known by its place; its body is never read.
    offset = record_offsets(seg)[3]
    data = bytearray(seg.read_bytes())
    n = int.from_bytes(data[offset + 8 : offset + 12], "big")
    body = b"\xc1" * n
    data[offset + 4 : offset + 8] = zlib.crc32(data[offset + 8 : offset + 12] + body).to_bytes(
        4, "big"
    )
    data[offset + 12 : offset + 12 + n] = body
    seg.write_bytes(bytes(data))
    e = make_engine()
    assert contents(e) == want
    assert (e.last_lsn, e.snapshot_lsn) == (10, 7)
    e.catalog.space("q").insert((100, "r", b"next"))
    assert e.last_lsn == 11
