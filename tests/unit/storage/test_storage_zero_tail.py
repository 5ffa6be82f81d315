"""The zero tail of a preallocated WAL segment (FORMAT.md §7): where its
records end, for the decoder, the file reader, recovery and the feed's cursor.

Zero bytes where a frame should start are space the writer reserved and never
reached: the end of the records, not damage, as long as only zeros follow.
"""

from __future__ import annotations

import random
from pathlib import Path

import msgpack

from queuebox.protocol.walformat import HEADER_SIZE, encode_frame, encode_header
from queuebox.storage.engine import Engine
from queuebox.storage.fileio import FileIO
from queuebox.storage.framing import Damage, Frame, FrameDecoder
from queuebox.storage.reader import LogFile, Record
from queuebox.storage.walfeed import WalCursor, records_of

from .storage_harness import contents, flush, tasks


def pack_record(lsn: int) -> bytes:
    return msgpack.packb([lsn, 1.5, 1, 512, "q", [lsn, "r"]])


# Bodies the reader takes for WAL records: [lsn, ts, op, sid, space, tuple].
FRAMES = [encode_frame(pack_record(i + 1)) for i in range(5)]
LOG = b"".join(FRAMES)
ENDS = [sum(map(len, FRAMES[: i + 1])) for i in range(len(FRAMES))]


def decode(data: bytes, piece: int | None) -> tuple[list[tuple[str, int]], int | None]:
    """Events as (kind, offset) and zero_tail, `data` fed in pieces of `piece`
    bytes (None: whole), drained after every piece."""
    dec = FrameDecoder(0)
    out: list[Frame | Damage] = []
    step = piece or max(1, len(data))
    for pos in range(0, len(data), step):
        dec.feed(data[pos : pos + step])
        out += dec.take()
    dec.feed_eof()
    out += dec.take()
    return [("frame" if isinstance(e, Frame) else "damage", e.offset) for e in out], dec.zero_tail


def every_way(data: bytes) -> tuple[list[tuple[str, int]], int | None]:
    whole = decode(data, None)
    for piece in (1, 3, 7, 64):
        assert decode(data, piece) == whole, piece
    return whole


def test_zeros_after_the_last_frame_end_the_records_without_damage() -> None:
    for zeros in (1, 3, 11, 12, 5000):
        events, tail = every_way(LOG + bytes(zeros))
        assert events == [("frame", e - len(f)) for e, f in zip(ENDS, FRAMES, strict=True)]
        assert tail == len(LOG), zeros


def test_without_zeros_there_is_no_zero_tail() -> None:
    frames = [("frame", e - len(f)) for e, f in zip(ENDS, FRAMES, strict=True)]
    assert every_way(LOG) == (frames, None)


def test_zeros_then_a_frame_are_damage_from_the_first_zero() -> None:
    data = FRAMES[0] + bytes(40) + FRAMES[1]
    events, tail = every_way(data)
    assert events == [("frame", 0), ("damage", ENDS[0]), ("frame", ENDS[0] + 40)]
    assert tail is None


def test_zeros_then_other_bytes_are_damage_to_the_end() -> None:
    events, tail = every_way(LOG + bytes(30) + b"\x07" + bytes(30))
    assert events[-1] == ("damage", len(LOG)) and tail is None
    dec = FrameDecoder(0)
    dec.feed(LOG + bytes(30) + b"\x07")
    dec.feed_eof()
    damage = dec.take()[-1]
    assert isinstance(damage, Damage) and damage.resume is None


def test_a_torn_frame_followed_by_zeros_is_a_torn_tail() -> None:
    for cut in (5, 12, len(FRAMES[4]) - 1):
        data = LOG[: ENDS[3] + cut] + bytes(100)
        events, tail = every_way(data)
        assert events[-1] == ("damage", ENDS[3]) and tail is None, cut


def test_a_frame_ending_in_zero_bytes_is_whole_before_the_zeros() -> None:
    frame = encode_frame(b"\x93\x00\x00\x00")  # msgpack [0, 0, 0]: its body ends in zeros
    events, tail = every_way(frame + bytes(50))
    assert events == [("frame", 0)] and tail == len(frame)


def segment(path: Path, lsn: int, body: bytes, zeros: int) -> None:
    path.write_bytes(encode_header("wal", lsn) + body + bytes(zeros))


def test_log_file_reports_where_its_records_end(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000001.wal"
    segment(path, 1, LOG, 9 << 20)  # zeros over more than one read of the reader
    log = LogFile(path)
    events = [ev for chunk in log.chunks() for ev in chunk]
    assert all(isinstance(ev, Record) for ev in events)
    assert log.zero_tail == HEADER_SIZE + len(LOG)


def engine(data_dir: Path, **kw: object) -> Engine:
    e = Engine(data_dir, clock=lambda: 1_700_000_000.0, **kw)  # type: ignore[arg-type]
    e.open()
    return e


def test_fsync_mode_preallocates_and_a_clean_close_cuts_back(tmp_path: Path) -> None:
    e = engine(tmp_path, wal_mode="fsync", segment_size=1 << 20)
    q = tasks(e)
    q.insert((1, "r", b"x"))
    flush(e)
    (path,) = tmp_path.glob("*.wal")
    assert path.stat().st_size == 1 << 20  # preallocated up to segment_size
    e.close()
    assert HEADER_SIZE < path.stat().st_size < 1 << 10


def test_a_restart_after_a_preallocated_tail_cuts_it_and_appends_with_no_gap(
    tmp_path: Path,
) -> None:
    e = engine(tmp_path, wal_mode="fsync", segment_size=1 << 20)
    q = tasks(e)
    for i in range(20):
        q.insert((i, "r", b"x" * i))
        flush(e)
    want = contents(e)
    (path,) = tmp_path.glob("*.wal")
    logical = e._wal.written[1]  # noqa: SLF001 - where its records end
    # kill -9: no close, the zero tail stays (the lock goes with the process).
    e._release_lock()  # noqa: SLF001
    assert path.stat().st_size == 1 << 20
    again = engine(tmp_path, wal_mode="fsync", segment_size=1 << 20)
    assert contents(again) == want
    assert path.stat().st_size == logical  # cut back to its last record, no warning
    q = again.catalog.space("q")
    q.insert((99, "r", b"after"))
    flush(again)
    want = contents(again)
    again.close()
    third = engine(tmp_path, wal_mode="fsync", segment_size=1 << 20)
    assert contents(third) == want
    third.close()
    paths = sorted(tmp_path.glob("*.wal"))
    lsns = [r["lsn"] for p in paths for r in records_of(p.read_bytes()[HEADER_SIZE:])]
    assert lsns == list(range(1, len(lsns) + 1))


def test_the_cursor_reads_the_segment_being_written_up_to_its_last_batch(tmp_path: Path) -> None:
    e = engine(tmp_path, wal_mode="fsync", segment_size=1 << 20)
    q = tasks(e)
    flush(e)
    cursor = e.wal_cursor(0)
    first = records_of(cursor.read())
    assert [r["lsn"] for r in first] == [1]
    assert cursor.read() == b""  # only zeros after it: nothing yet, not damage
    for i in range(3):
        q.insert((i, "r", b"x"))
    flush(e)
    assert [r["lsn"] for r in records_of(cursor.read())] == [2, 3, 4]
    cursor.close()
    e.close()


def test_a_cursor_without_a_writer_stops_at_the_zero_tail(tmp_path: Path) -> None:
    segment(tmp_path / "00000000000000000001.wal", 1, LOG, 2 << 20)
    cursor = WalCursor(FileIO(), tmp_path, 0)
    assert cursor.read() == LOG
    assert cursor.read() == b""
    cursor.close()


def test_random_zero_tails_never_lose_a_frame() -> None:
    rnd = random.Random(44)
    for _ in range(200):
        n = rnd.randint(0, len(FRAMES))
        data = b"".join(FRAMES[:n]) + bytes(rnd.randint(0, 300))
        events, tail = decode(data, rnd.randint(1, 50))
        assert [k for k, _ in events] == ["frame"] * n
        end = sum(map(len, FRAMES[:n]))
        assert tail == (end if len(data) > end else None)


def test_recovery_passes_a_zero_tail_in_an_earlier_segment_and_removes_a_zero_header(
    tmp_path: Path,
) -> None:
    e = engine(tmp_path, wal_mode="fsync", segment_size=300)
    q = tasks(e)
    for i in range(10):
        q.insert((i, "r", b"y" * 40))
        flush(e)
    want = contents(e)
    next_lsn = e.durable_lsn + 1
    e.close()
    segments = sorted(tmp_path.glob("*.wal"))
    assert len(segments) > 2
    with segments[0].open("ab") as f:  # a cut back at rotation that failed
        f.write(bytes(5000))
    next_name = tmp_path / f"{next_lsn:020d}.wal"
    segment_zero = bytes(HEADER_SIZE + 4096)  # created, preallocated, header not on disk
    next_name.write_bytes(segment_zero)
    again = engine(tmp_path, wal_mode="fsync", segment_size=300)
    assert contents(again) == want
    assert not next_name.exists()
    again.close()
