"""The engine end to end on a real directory: write, reopen, snapshot, rotate."""

from __future__ import annotations

from pathlib import Path

import pytest

from queuebox.storage.engine import Engine
from queuebox.storage.errors import UnloggableChange
from queuebox.storage.reader import iter_records, read_header
from queuebox.storage.space import IndexDef
from tests.unit.storage.storage_harness import TASKS, FaultyFileIO, contents, flush, tasks


def wal_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.glob("*.wal"))


def snap_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.glob("*.snap"))


def fill(engine: Engine) -> None:
    q = tasks(engine)
    for i in range(1, 21):
        q.insert((i, "r", b"data%d" % i))
    flush(engine)
    q.update((3,), {1: "t"})
    q.replace((4, "b", b"new"))
    q.delete((5,))
    flush(engine)


def test_written_batches_come_back_after_reopen(make_engine, data_dir: Path) -> None:
    e = make_engine()
    fill(e)
    want, lsn = contents(e), e.last_lsn
    e.close()
    again = make_engine()
    assert contents(again) == want
    assert again.last_lsn == lsn == again.durable_lsn
    assert again.catalog.space("q").index("status").first(("t",)) == (3, "t", b"data3")
    assert again.catalog.space("q").definition.format == ("task_id", "status", "data")


def test_changes_never_written_are_gone_after_reopen(make_engine) -> None:
    e = make_engine()
    fill(e)
    want = contents(e)
    e.catalog.space("q").insert((99, "r", b"lost"))  # taken by nobody
    e.close()
    assert contents(make_engine()) == want


def test_lsns_continue_after_reopen_and_records_say_what_changed(make_engine, data_dir) -> None:
    e = make_engine()
    fill(e)
    e.close()
    e = make_engine()
    first = e.last_lsn + 1
    e.catalog.space("q").delete((1,))
    batch = e.take_batch()
    assert batch is not None and batch.first_lsn == first == batch.last_lsn
    e.write_batch(batch)
    records = [r for p in sorted(data_dir.glob("*.wal")) for r in iter_records(p)]
    assert [r["lsn"] for r in records] == list(range(1, first + 1))
    last = records[-1]
    assert last["op"] == "delete" and last["key"] == (1,)
    # Format 4: the key alone, as Tarantool's xlog writes a DELETE.
    assert "tuple" not in last and last["space"] == "q" and last["sid"] == 512
    create = records[0]
    assert create["op"] == "create_space" and create["def"]["format"] == (
        "task_id",
        "status",
        "data",
    )
    assert all(r["ts"] > 1_600_000_000 for r in records)


def test_snapshot_then_more_wal_then_reopen(make_engine, data_dir) -> None:
    e = make_engine()
    fill(e)
    job = e.begin_snapshot()
    result = job.run()
    e.finish_snapshot(job)
    assert result is not None and result.lsn == e.durable_lsn and result.tuples == 19
    e.catalog.space("q").insert((50, "r", b"after"))
    e.catalog.space("q").delete((6,))
    flush(e)
    want = contents(e)
    e.close()
    again = make_engine()
    assert contents(again) == want
    assert again.snapshot_lsn == result.lsn  # the snapshot was used
    assert read_header(data_dir / snap_files(data_dir)[0]).lsn == result.lsn


def test_report_says_what_recovery_used(data_dir, clock) -> None:
    e = Engine(data_dir, clock=clock)
    e.open()
    fill(e)
    job = e.begin_snapshot()
    job.run()
    e.finish_snapshot(job)
    e.catalog.space("q").insert((50, "r", b"after"))
    flush(e)
    e.close()
    e = Engine(data_dir, clock=clock)
    report = e.open()
    e.close()
    assert report.snapshot_lsn == job.lsn and report.snapshot_tuples == 19
    assert report.wal_records == 1 and report.last_lsn == job.lsn + 1
    assert report.tuples == 20 and report.spaces == 1 and not report.warnings


def test_segments_rotate_by_size_and_are_named_by_their_first_lsn(make_engine, data_dir) -> None:
    e = make_engine(segment_size=1024)
    q = tasks(e)
    for i in range(60):
        q.insert((i, "r", b"x" * 40))
        flush(e)
    names = wal_files(data_dir)
    assert len(names) > 3
    for name in names:
        path = data_dir / name
        assert path.stat().st_size <= 1024 or len(list(iter_records(path))) == 1
        first = next(iter_records(path))["lsn"]
        assert read_header(path).lsn == first == int(name.split(".")[0])
    want = contents(e)
    e.close()
    assert contents(make_engine(segment_size=1024)) == want


def test_one_batch_is_never_split_across_segments(make_engine, data_dir) -> None:
    e = make_engine(segment_size=512)
    q = tasks(e)
    for i in range(40):
        q.insert((i, "r", b"y" * 30))
    flush(e)  # one batch, far bigger than a segment
    assert len(wal_files(data_dir)) == 1


def test_snapshot_removes_covered_segments_and_older_snapshots(make_engine, data_dir) -> None:
    e = make_engine(segment_size=600, checkpoint_count=1)
    q = tasks(e)
    for i in range(30):
        q.insert((i, "r", b"z" * 40))
        flush(e)
    before = wal_files(data_dir)
    job = e.begin_snapshot()
    job.run()
    removed = e.finish_snapshot(job)
    after = wal_files(data_dir)
    # The snapshot cut the segment being written and began an empty one; the one
    # it cut stays (a damaged snapshot could fall back to it), those before go.
    assert after == [*before[-1:], f"{job.lsn + 1:020d}.wal"]
    assert sorted(removed) == before[:-1]
    for i in range(100, 110):
        q.insert((i, "r", b"z" * 40))
        flush(e)
    assert len(wal_files(data_dir)) > 1
    job2 = e.begin_snapshot()
    job2.run()
    removed = e.finish_snapshot(job2)
    assert removed[0] == f"{job.lsn:020d}.snap" and after[0] in removed
    assert wal_files(data_dir)[-1] == f"{job2.lsn + 1:020d}.wal"
    assert len(wal_files(data_dir)) == 2  # the segment job2 cut, and the empty one
    assert snap_files(data_dir) == [f"{job2.lsn:020d}.snap"]
    want = contents(e)
    e.close()
    assert contents(make_engine(segment_size=600)) == want


def test_a_start_from_a_snapshot_reads_no_record_it_holds(make_engine, data_dir) -> None:
    e = make_engine()
    fill(e)
    job = e.begin_snapshot()
    job.run()
    e.finish_snapshot(job)
    # The segment of the records it holds stays for a fallback; the next is empty.
    assert wal_files(data_dir) == ["00000000000000000001.wal", f"{job.lsn + 1:020d}.wal"]
    assert len(list(iter_records(data_dir / f"{job.lsn + 1:020d}.wal"))) == 0
    want = contents(e)
    e.close()
    again = make_engine(open_it=False)
    report = again.open()
    assert contents(again) == want
    assert report.snapshot_lsn == job.lsn and report.wal_segments == 1
    assert report.wal_records == 0 and report.last_lsn == job.lsn and not report.warnings
    again.catalog.space("q").insert((60, "r", b"next"))
    flush(again)
    want = contents(again)
    again.close()
    # The first write after the start goes into the empty segment, named for it.
    assert wal_files(data_dir)[-1] == f"{job.lsn + 1:020d}.wal"
    assert [r["lsn"] for r in iter_records(data_dir / wal_files(data_dir)[-1])] == [job.lsn + 1]
    assert contents(make_engine()) == want


@pytest.mark.parametrize("written", [True, False], ids=["written-since", "being-written"])
def test_no_cut_after_a_write_past_the_snapshot(make_engine, data_dir, written) -> None:
    e = make_engine()
    fill(e)
    e.catalog.space("q").insert((70, "r", b"in flight"))
    batch = e.take_batch()  # handed to the writer thread, not yet written
    assert batch is not None
    job = e.begin_snapshot()
    if written:
        e.write_batch(batch)
    job.run()
    e.finish_snapshot(job)
    assert job.lsn == batch.first_lsn - 1
    assert wal_files(data_dir) == ["00000000000000000001.wal"]
    if not written:
        e.write_batch(batch)
    want = contents(e)
    e.close()
    assert contents(make_engine()) == want


def test_snapshot_of_an_unchanged_state_writes_nothing(make_engine, data_dir) -> None:
    e = make_engine()
    fill(e)
    job = e.begin_snapshot()
    job.run()
    e.finish_snapshot(job)
    stamp = (data_dir / snap_files(data_dir)[0]).stat().st_mtime_ns
    again = e.begin_snapshot()
    assert again.run() is None and not again.needed
    e.finish_snapshot(again)
    assert (data_dir / snap_files(data_dir)[0]).stat().st_mtime_ns == stamp


def test_temporary_spaces_come_back_registered_and_empty(make_engine) -> None:
    e = make_engine()
    tmp = e.catalog.create_space("sessions", [IndexDef("id", (0,))], temporary=True)
    tmp.insert((1, "conn"))
    batch = e.take_batch()
    assert batch is not None and batch.count == 1  # only the create is logged
    e.write_batch(batch)
    fill(e)
    job = e.begin_snapshot()
    job.run()
    e.finish_snapshot(job)
    e.close()
    again = make_engine()
    sessions = again.catalog.space("sessions")
    assert sessions.temporary and len(sessions) == 0
    assert len(again.catalog.space("q")) == 19


def test_drop_space_is_replayed_from_wal_and_snapshot(make_engine) -> None:
    e = make_engine()
    fill(e)
    e.catalog.drop_space("q")
    q2 = e.catalog.create_space("q", [IndexDef("pk", (1,))])
    q2.insert(("a", 1))
    flush(e)
    want = contents(e)
    e.close()
    again = make_engine()
    assert contents(again) == want == {"q": [("a", 1)]}
    assert again.catalog.space("q").definition.indexes == (IndexDef("pk", (1,)),)
    job = again.begin_snapshot()
    job.run()
    again.finish_snapshot(job)
    again.catalog.drop_space("q")
    flush(again)
    again.close()
    assert contents(make_engine()) == {}


def test_a_tuple_that_cannot_be_encoded_is_refused_and_not_kept(make_engine) -> None:
    e = make_engine()
    q = tasks(e)
    flush(e)
    q.insert((1, "r", b"ok"))
    with pytest.raises(UnloggableChange):
        q.insert((2, "r", {1, 2}))
    with pytest.raises(UnloggableChange):
        q.replace((1, "r", object()))
    assert list(q) == [(1, "r", b"ok")] and list(q.index("status").iterate()) == list(q)
    batch = e.take_batch()
    assert batch is not None and batch.count == 1


@pytest.mark.parametrize("wal_mode", ["write", "none"])
def test_a_change_to_a_closed_engine_is_refused_and_not_kept(make_engine, wal_mode) -> None:
    e = make_engine(wal_mode=wal_mode)
    q = tasks(e)
    q.insert((1, "r", b"ok"))
    flush(e)
    e.close()
    with pytest.raises(UnloggableChange, match="not open"):
        q.insert((2, "r", b"late"))
    with pytest.raises(UnloggableChange, match="not open"):
        e.catalog.create_space("late", [IndexDef("pk", (0,))])
    assert contents(e) == {"q": [(1, "r", b"ok")]} and not e.has_pending()


def test_wal_mode_none_writes_no_wal_but_snapshots_still_work(make_engine, data_dir) -> None:
    e = make_engine(wal_mode="none")
    fill(e)
    assert not e.has_pending() and wal_files(data_dir) == []
    q = e.catalog.space("q")
    q.insert((77, "r", b"x"))
    batch = e.take_batch()
    assert batch is not None and batch.written and batch.data == b""
    e.write_batch(batch)  # a no-op
    assert e.durable_lsn == e.last_lsn
    job = e.begin_snapshot()
    job.run()
    e.finish_snapshot(job)
    want = contents(e)
    e.close()
    assert wal_files(data_dir) == []
    assert contents(make_engine(wal_mode="none")) == want


def test_fsync_mode_syncs_once_per_batch(data_dir, clock) -> None:
    files = FaultyFileIO()
    e = Engine(data_dir, wal_mode="fsync", files=files, clock=clock)
    e.open()
    q = tasks(e)
    flush(e)  # first batch: the new segment also fsyncs the directory
    before = files.calls.get("fsync", 0)
    for i in range(5):
        q.insert((i, "r", b"x"))
        q.insert((i + 100, "r", b"x"))
        flush(e)
    # Inside the segment's preallocated space: fdatasync, the size is unchanged.
    assert files.calls.get("fdatasync", 0) == 5
    assert files.calls["fsync"] - before == 0
    e.close()


def test_write_mode_never_fsyncs_the_wal(data_dir, clock) -> None:
    files = FaultyFileIO()
    e = Engine(data_dir, wal_mode="write", files=files, clock=clock)
    e.open()
    fill(e)
    assert files.calls.get("fsync", 0) == 0
    e.close()


def test_unknown_wal_mode_is_refused(data_dir, clock) -> None:
    with pytest.raises(ValueError, match="wal_mode"):
        Engine(data_dir, wal_mode="sometimes", clock=clock)


def test_snapshot_due_by_wal_volume_and_by_interval(make_engine) -> None:
    e = make_engine(snapshot_wal_bytes=2000, snapshot_interval_s=60.0)
    assert not e.snapshot_due(0.0)
    q = tasks(e)
    flush(e)
    assert not e.snapshot_due(30.0)
    assert e.snapshot_due(61.0)  # interval passed, and something changed
    for i in range(40):
        q.insert((i, "r", b"x" * 40))
    flush(e)
    assert e.snapshot_due(62.0)
    job = e.begin_snapshot()
    assert not e.snapshot_due(1000.0)  # one at a time
    job.run()
    e.finish_snapshot(job)
    assert not e.snapshot_due(1000.0)  # the interval starts again here
    assert not e.snapshot_due(1059.0)
    q.insert((999, "r", b"x"))
    flush(e)
    assert e.snapshot_due(1061.0)


def test_wal_mode_none_snapshot_covers_changes_not_yet_taken(make_engine) -> None:
    e = make_engine(wal_mode="none")
    q = tasks(e)
    q.insert((1, "r", b"x"))  # never taken: in "none" mode it is as durable as anything
    job = e.begin_snapshot()
    assert job.lsn == e.last_lsn
    job.run()
    e.finish_snapshot(job)
    e.close()
    again = make_engine(wal_mode="none")
    assert list(again.catalog.space("q")) == [(1, "r", b"x")] and again.last_lsn == job.lsn


def test_a_snapshot_after_a_restart_with_no_write_begins_a_segment(make_engine, data_dir) -> None:
    # A restart from the WAL, nothing written, then a clean stop's snapshot: the
    # next start reads only the new empty segment, no record the snapshot holds.
    e = make_engine()
    fill(e)
    want = contents(e)
    e.close()
    restarted = make_engine()
    job = restarted.begin_snapshot()
    job.run()
    restarted.finish_snapshot(job)
    restarted.close()
    assert wal_files(data_dir) == ["00000000000000000001.wal", f"{job.lsn + 1:020d}.wal"]
    again = make_engine(open_it=False)
    report = again.open()
    assert contents(again) == want
    assert report.snapshot_lsn == job.lsn and report.wal_segments == 1
    assert report.wal_records == 0 and report.last_lsn == job.lsn and not report.warnings


def test_a_snapshot_of_a_fresh_directory_makes_no_wal_file(make_engine, data_dir) -> None:
    e = make_engine()
    job = e.begin_snapshot()
    job.run()
    e.finish_snapshot(job)
    e.close()
    assert wal_files(data_dir) == []


def test_relayout_groups_an_older_spaces_index_and_the_snapshot_keeps_it(make_engine) -> None:
    # A space made before its index had a group (an older release), reopened by code
    # that reads the index by group: the same tuples, grouped, and nothing logged.
    e = make_engine()
    space = tasks(e)
    for i, status in enumerate("rtrbr"):
        space.insert((i, status, b"x"))
    flush(e)
    e.close()
    e = make_engine()
    grouped = [TASKS[0], IndexDef("status", (1, 0), group=1)]
    assert e.catalog.space("q").index("status").group_keys() == [()]
    want = contents(e)
    again = e.catalog.relayout("q", grouped)
    assert again is e.catalog.space("q") and not e.has_pending()
    assert sorted(again.index("status").group_keys()) == [("b",), ("r",), ("t",)]
    assert [t[0] for t in again.index("status").iterate(("r",))] == [0, 2, 4]
    assert contents(e) == want
    assert e.catalog.relayout("q", grouped) is again  # laid out already: the same space
    job = e.begin_snapshot()
    job.run()
    e.finish_snapshot(job)
    e.close()
    e = make_engine()
    assert e.catalog.space("q").definition.indexes[1].group == 1
    assert contents(e) == want


def test_relayout_never_changes_what_an_index_holds(make_engine) -> None:
    e = make_engine()
    space = tasks(e)
    other_parts = [TASKS[0], IndexDef("status", (1,), unique=False, group=1)]
    assert e.catalog.relayout("q", other_parts) is space
    assert space.definition.indexes[1] == TASKS[1]
