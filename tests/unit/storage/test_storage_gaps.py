"""Missing LSNs, damaged snapshots and the fallback to an older one (FORMAT.md §7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from queuebox.protocol.walformat import HEADER_SIZE
from queuebox.storage.engine import Engine
from queuebox.storage.errors import LsnGap
from queuebox.storage.layout import parse_name
from tests.unit.storage.storage_harness import contents, flush, tasks


def puts(engine: Engine, n: int, start: int = 0) -> None:
    """n batches of one insert each: LSNs go up by one per put."""
    q = engine.catalog.get("q") or tasks(engine)
    for i in range(start, start + n):
        q.insert((i, "r", b"x" * 40))
        flush(engine)


def snapshot(engine: Engine) -> None:
    job = engine.begin_snapshot()
    job.run()
    engine.finish_snapshot(job)


def wal(d: Path) -> list[Path]:
    return sorted(d.glob("*.wal"))


def snaps(d: Path) -> list[Path]:
    return sorted(d.glob("*.snap"))


def lsn_of(path: Path) -> int:
    parsed = parse_name(path.name)
    assert parsed is not None
    return parsed[1]


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_missing_middle_segment_stops_the_start_naming_the_range(
    make_engine, data_dir, clock
) -> None:
    e = make_engine(segment_size=400)
    puts(e, 30)
    e.close()
    segments = wal(data_dir)
    assert len(segments) >= 4
    gone = segments[2]
    first, last = lsn_of(gone), lsn_of(segments[3]) - 1
    gone.unlink()
    with pytest.raises(LsnGap) as caught:
        Engine(data_dir, clock=clock).open()
    assert (caught.value.first, caught.value.last) == (first, last)
    assert f"LSNs {first}..{last} missing" in str(caught.value)
    assert segments[3].name in str(caught.value)


def test_force_recovery_starts_past_a_gap_says_what_was_lost_and_heals(
    make_engine, data_dir, clock
) -> None:
    e = make_engine(segment_size=400)
    puts(e, 30)
    highest = e.last_lsn
    e.close()
    segments = wal(data_dir)
    first, last = lsn_of(segments[1]), lsn_of(segments[2]) - 1
    segments[1].unlink()
    forced = make_engine(force_recovery=True)
    q = forced.catalog.space("q")
    # Everything but the lost LSNs (LSN 1 created the space, LSN k put task k - 2).
    assert len(q) == 30 - (last - first + 1)
    assert forced.last_lsn == highest  # never given again
    q.insert((1000, "r", b"new"))
    flush(forced)
    forced.close()
    assert all(p.name.endswith(".damaged") for p in data_dir.glob("*.wal.*"))
    again = make_engine()  # no force needed any more
    assert (1000,) in {t[:1] for t in again.catalog.space("q")}
    assert again.last_lsn == highest + 1


def test_the_forced_report_lists_the_lost_range(make_engine, data_dir, clock) -> None:
    e = make_engine(segment_size=400)
    puts(e, 30)
    e.close()
    segments = wal(data_dir)
    first, last = lsn_of(segments[1]), lsn_of(segments[2]) - 1
    segments[1].unlink()
    forced = Engine(data_dir, clock=clock, force_recovery=True)
    report = forced.open()
    forced.close()
    assert len(report.lost) == 1 and f"LSNs {first}..{last} missing" in report.lost[0]
    assert "wrote snapshot" in report.warnings[-1]


def test_a_gap_between_the_snapshot_and_the_wal_stops_the_start(
    make_engine, data_dir, clock
) -> None:
    e = make_engine(segment_size=400, checkpoint_count=1)
    puts(e, 10)
    snapshot(e)
    puts(e, 20, start=10)
    e.close()
    snap_lsn = lsn_of(snaps(data_dir)[-1])
    after = [p for p in wal(data_dir) if lsn_of(p) > snap_lsn]
    # The segments that hold snap_lsn + 1 onward: drop the first of them.
    holder = [p for p in wal(data_dir) if lsn_of(p) <= snap_lsn + 1][-1]
    holder.unlink()
    nxt = after[0] if after[0] != holder else after[1]
    with pytest.raises(LsnGap) as caught:
        Engine(data_dir, clock=clock).open()
    assert caught.value.first == snap_lsn + 1 and caught.value.last == lsn_of(nxt) - 1


def test_a_wal_that_ends_before_the_newest_snapshot_is_detected(
    make_engine, data_dir, clock
) -> None:
    e = make_engine(segment_size=400)  # two snapshots kept, the WAL since the older
    puts(e, 10)
    snapshot(e)
    puts(e, 20, start=10)
    snapshot(e)
    e.close()
    newest = lsn_of(snaps(data_dir)[-1])
    segments = wal(data_dir)
    cut = lsn_of(segments[-2])
    for p in segments[-2:]:
        p.unlink()
    with pytest.raises(LsnGap, match=f"ends at LSN {cut - 1}, before {newest:020d}.snap"):
        Engine(data_dir, clock=clock).open()


def test_a_damaged_newest_snapshot_falls_back_to_the_previous_one(
    make_engine, data_dir, clock
) -> None:
    e = make_engine(segment_size=400)
    puts(e, 10)
    snapshot(e)
    older = snaps(data_dir)[-1]
    puts(e, 10, start=10)
    snapshot(e)
    puts(e, 5, start=20)
    want = contents(e)
    e.close()
    newest = snaps(data_dir)[-1]
    flip(newest, HEADER_SIZE + 20)
    again = Engine(data_dir, clock=clock)
    report = again.open()
    try:
        assert contents(again) == want
        assert report.snapshot == str(older) and report.damaged_snapshots == [newest]
        assert f"older snapshot {older.name}" in report.warnings[1]
    finally:
        again.close()
    assert newest.with_name(newest.name + ".damaged").exists()


def test_a_damaged_newest_snapshot_with_a_gap_behind_it_needs_force(
    make_engine, data_dir, clock
) -> None:
    e = make_engine(segment_size=400)
    puts(e, 10)
    snapshot(e)
    puts(e, 20, start=10)
    snapshot(e)
    highest = e.last_lsn
    e.close()
    newest = snaps(data_dir)[-1]
    flip(newest, HEADER_SIZE + 20)
    wal(data_dir)[1].unlink()
    with pytest.raises(LsnGap, match=f"around the damaged {newest.name}"):
        Engine(data_dir, clock=clock).open()
    forced = Engine(data_dir, clock=clock, force_recovery=True)
    report = forced.open()
    try:
        assert report.lost and forced.last_lsn == highest
    finally:
        forced.close()


def test_a_forced_start_past_a_lost_space_lists_a_few_skips_and_a_count(
    make_engine, data_dir, clock
) -> None:
    e = make_engine(segment_size=400, checkpoint_count=1)
    puts(e, 3)
    snapshot(e)
    other = e.catalog.create_space("other", tasks(e, "spare").definition.indexes)
    flush(e)
    for i in range(40):
        other.insert((i, "r", b"y" * 40))
        flush(e)
    e.close()
    snap_lsn = lsn_of(snaps(data_dir)[-1])
    holder = [p for p in wal(data_dir) if lsn_of(p) <= snap_lsn + 1][-1]
    holder.unlink()  # with the create_space records of "spare" and "other"
    forced = Engine(data_dir, clock=clock, force_recovery=True)
    report = forced.open()
    forced.close()
    assert report.lost
    # About 40 inserts into a space whose create_space was lost: 20 listed, then a count.
    listed = [s for s in report.skipped if "skipped damage" in s]
    summaries = [s for s in report.skipped if "more damages skipped" in s]
    assert len(listed) == 20 and all("unknown space" in s for s in listed)
    (summary,) = summaries
    assert int(summary.split()[1]) > 0
