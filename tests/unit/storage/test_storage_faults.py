"""Injected file faults: a failed write fails its batch only, and nothing acknowledged is lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from queuebox.storage.engine import Engine
from queuebox.storage.errors import SnapshotError, WalWriteError
from tests.unit.storage.storage_harness import (
    Crash,
    FaultyFileIO,
    contents,
    eio,
    enospc,
    flush,
    tasks,
)


@pytest.fixture
def engine(data_dir: Path, clock: Any, faulty: FaultyFileIO):
    e = Engine(data_dir, files=faulty, clock=clock, wal_mode="write")
    e.open()
    tasks(e)
    flush(e)
    yield e
    e.close()


def reopen(data_dir: Path, clock: Any) -> dict[str, list[tuple[Any, ...]]]:
    e = Engine(data_dir, clock=clock)
    e.open()
    try:
        return contents(e)
    finally:
        e.close()


def survives_restart(engine: Engine, data_dir: Path, clock: Any) -> bool:
    """Close the engine and open the directory again: is everything it held back?"""
    want = contents(engine)
    engine.close()
    return reopen(data_dir, clock) == want


def put(engine: Engine, *ids: int) -> None:
    q = engine.catalog.space("q")
    for i in ids:
        q.insert((i, "r", b"p%d" % i))


def failing_write(engine: Engine, faulty: FaultyFileIO, *actions: Any, op: str = "pwrite") -> None:
    """Make a batch whose write fails as planned, check the error, roll it back."""
    put(engine, 100, 101)
    engine.catalog.space("q").update((1,), {1: "t"})
    batch = engine.take_batch()
    assert batch is not None
    faulty.plan(op, *actions)
    with pytest.raises(WalWriteError):
        engine.write_batch(batch)
    assert engine.rollback(batch) == batch.first_lsn


def segment(data_dir: Path) -> Path:
    return max(data_dir.glob("*.wal"))


def test_a_short_write_that_then_completes_is_a_success(engine, faulty, data_dir, clock) -> None:
    put(engine, 1, 2, 3)
    faulty.plan("pwrite", 7)  # the first write stores only 7 bytes; the loop writes the rest
    flush(engine)
    assert faulty.calls["pwrite"] >= 2
    assert survives_restart(engine, data_dir, clock)


@pytest.mark.parametrize(
    ("op", "actions"),
    [
        ("pwrite", (enospc(),)),
        ("pwrite", (10, enospc())),  # short write, then the disk is full
        ("pwrite", (eio(),)),
    ],
    ids=["ENOSPC", "short then ENOSPC", "EIO"],
)
def test_a_failed_write_rolls_back_and_the_next_batch_writes(
    engine, faulty, data_dir, clock, op, actions
) -> None:
    put(engine, 1, 2)
    flush(engine)
    acknowledged = contents(engine)
    size = segment(data_dir).stat().st_size
    failing_write(engine, faulty, *actions, op=op)
    assert contents(engine) == acknowledged  # memory rolled back
    assert segment(data_dir).stat().st_size == size  # the file cut back to its good length
    put(engine, 3)
    flush(engine)
    assert [t[0] for t in contents(engine)["q"]] == [1, 2, 3]
    assert survives_restart(engine, data_dir, clock)


def test_eio_on_fsync_in_fsync_mode(data_dir, clock, faulty) -> None:
    e = Engine(data_dir, files=faulty, clock=clock, wal_mode="fsync")
    e.open()
    tasks(e)
    put(e, 1)
    flush(e)
    acknowledged = contents(e)
    failing_write(e, faulty, eio(), op="fsync")
    assert contents(e) == acknowledged
    put(e, 2)
    flush(e)
    want = contents(e)
    e.close()
    assert reopen(data_dir, clock) == want


def test_when_the_cut_back_fails_too_nothing_more_is_written_until_a_restart(
    engine, faulty, data_dir, clock
) -> None:
    """The failed batch's bytes may still be in the file (a start may find
    them): the writer refuses every later batch rather than answer one after
    them; a restart reads the file as it is (here the torn batch is cut)."""
    put(engine, 1)
    flush(engine)
    acknowledged = contents(engine)
    faulty.plan("ftruncate", eio())  # the cut back fails
    put(engine, 100)
    torn = engine.take_batch()
    assert torn is not None
    faulty.plan("pwrite", 25, enospc())
    with pytest.raises(WalWriteError, match="cannot be cut back .*may still be found"):
        engine.write_batch(torn)
    engine.rollback(torn)
    writes = faulty.calls["pwrite"]
    for n in (2, 3):  # the cut is not tried again: the writer stays broken
        put(engine, n)
        batch = engine.take_batch()
        assert batch is not None
        with pytest.raises(WalWriteError, match="no write is accepted until the server restarts"):
            engine.write_batch(batch)
        engine.rollback(batch)
    assert faulty.calls["pwrite"] == writes  # nothing written after the junk
    assert contents(engine) == acknowledged
    assert survives_restart(engine, data_dir, clock)


def test_a_failed_first_write_of_a_new_segment_leaves_no_file(data_dir, clock, faulty) -> None:
    e = Engine(data_dir, files=faulty, clock=clock, segment_size=200)
    e.open()
    tasks(e)
    put(e, 1, 2, 3)
    flush(e)
    before = sorted(data_dir.glob("*.wal"))
    acknowledged = contents(e)
    failing_write(e, faulty, enospc())  # this batch would start a new segment
    assert sorted(data_dir.glob("*.wal")) == before
    assert contents(e) == acknowledged
    put(e, 4)
    flush(e)
    want = contents(e)
    e.close()
    assert reopen(data_dir, clock) == want


def test_a_crash_mid_write_leaves_a_tail_that_recovery_cuts(data_dir, clock, faulty) -> None:
    e = Engine(data_dir, files=faulty, clock=clock)
    e.open()
    tasks(e)
    put(e, 1, 2)
    flush(e)
    acknowledged = contents(e)
    put(e, 3, 4, 5)
    batch = e.take_batch()
    assert batch is not None
    faulty.plan("pwrite", 30, Crash())
    with pytest.raises(Crash):
        e.write_batch(batch)
    e.close()  # what the OS does for a dead process: close its files, drop its lock
    again = Engine(data_dir, clock=clock)
    report = again.open()
    assert contents(again) == acknowledged and "torn tail" in report.warnings[0]
    again.close()


def test_power_loss_in_fsync_mode_keeps_every_acknowledged_batch(data_dir, clock, faulty) -> None:
    e = Engine(data_dir, files=faulty, clock=clock, wal_mode="fsync", segment_size=400)
    e.open()
    tasks(e)
    for i in range(12):
        put(e, i)
        flush(e)
    acknowledged = contents(e)
    put(e, 50, 51)  # written to the OS but not fsynced: may be lost
    batch = e.take_batch()
    assert batch is not None
    faulty.plan("fsync", Crash())
    with pytest.raises(Crash):
        e.write_batch(batch)
    e.close()
    faulty.power_loss()
    assert reopen(data_dir, clock) == acknowledged


def test_a_crash_between_snapshot_write_and_rename_loses_nothing(
    engine, faulty, data_dir, clock
) -> None:
    put(engine, 1, 2, 3)
    flush(engine)
    first = engine.begin_snapshot()
    first.run()
    engine.finish_snapshot(first)
    put(engine, 4)
    engine.catalog.space("q").delete((2,))
    flush(engine)
    want = contents(engine)
    job = engine.begin_snapshot()
    faulty.plan("rename", Crash())
    with pytest.raises(Crash):
        job.run()
    engine.close()
    assert list(data_dir.glob("*.inprogress"))
    again = Engine(data_dir, clock=clock)
    report = again.open()
    assert contents(again) == want
    assert report.snapshot_lsn == first.lsn and report.wal_records == 2
    assert not list(data_dir.glob("*.inprogress"))
    again.close()


def test_a_failed_snapshot_write_keeps_the_engine_working(engine, faulty, data_dir, clock) -> None:
    put(engine, 1, 2)
    flush(engine)
    job = engine.begin_snapshot()
    faulty.plan("pwrite", enospc())
    with pytest.raises(SnapshotError):
        job.run()
    assert engine.finish_snapshot(job) == []
    assert not list(data_dir.glob("*.snap*")) and list(data_dir.glob("*.wal"))
    put(engine, 3)
    flush(engine)
    retry = engine.begin_snapshot()
    retry.run()
    engine.finish_snapshot(retry)
    assert survives_restart(engine, data_dir, clock)


def test_a_snapshot_job_never_finished_does_not_block_the_next_one(engine, faulty) -> None:
    put(engine, 1)
    flush(engine)
    job = engine.begin_snapshot()
    faulty.plan("pwrite", enospc())
    with pytest.raises(SnapshotError):
        job.run()  # and the caller forgets finish_snapshot()
    put(engine, 2)
    flush(engine)
    assert not engine.snapshot_due(0.0)  # starts the interval
    assert engine.snapshot_due(10.0**9)
    retry = engine.begin_snapshot()
    assert retry.run() is not None
    engine.finish_snapshot(retry)
    with pytest.raises(Exception, match="in progress"):
        engine.begin_snapshot()
        engine.begin_snapshot()
