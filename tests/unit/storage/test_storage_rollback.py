"""Rollback with later batches in flight, and snapshots taken while batches are in flight."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from queuebox.storage.batch import Batch
from queuebox.storage.engine import Engine
from queuebox.storage.errors import EngineError, WalWriteError
from queuebox.storage.reader import iter_records
from tests.unit.storage.storage_harness import FaultyFileIO, contents, enospc, flush, tasks


@pytest.fixture
def engine(data_dir: Path, clock: Any, faulty: FaultyFileIO):
    e = Engine(data_dir, files=faulty, clock=clock)
    e.open()
    q = tasks(e)
    q.insert((1, "r", b"one"))
    flush(e)
    yield e
    e.close()


def take(engine: Engine) -> Batch:
    batch = engine.take_batch()
    assert batch is not None
    return batch


def restarted(engine: Engine, data_dir: Path, clock: Any) -> dict[str, list[tuple[Any, ...]]]:
    engine.close()
    again = Engine(data_dir, clock=clock)
    again.open()
    try:
        return contents(again)
    finally:
        again.close()


def test_rollback_undoes_the_batch_every_later_batch_and_pending_changes(
    engine, faulty, data_dir, clock
) -> None:
    q = engine.catalog.space("q")
    acknowledged = contents(engine)
    q.insert((2, "r", b"two"))
    q.update((1,), {1: "t"})
    n = take(engine)
    q.delete((2,))  # builds on batch n
    q.insert((3, "r", b"three"))
    n1 = take(engine)
    q.update((3,), {1: "t"})  # pending, builds on n1
    faulty.plan("pwrite", enospc())
    with pytest.raises(WalWriteError):
        engine.write_batch(n)
    assert engine.rollback(n) == n.first_lsn
    assert contents(engine) == acknowledged
    assert list(q.index("status").iterate()) == [(1, "r", b"one")]
    # the later batch was cancelled: its write fails, its rollback is a no-op
    with pytest.raises(WalWriteError, match="rolled back"):
        engine.write_batch(n1)
    assert engine.rollback(n1) == n1.first_lsn
    # the undone pending change comes out as a batch already cancelled
    assert engine.has_pending()
    doomed = take(engine)
    assert doomed.cancelled
    with pytest.raises(WalWriteError):
        engine.write_batch(doomed)
    engine.rollback(doomed)
    assert not engine.has_pending() and contents(engine) == acknowledged
    # LSNs are given again from the failed batch's first: the WAL has no gap
    q.insert((4, "r", b"four"))
    fresh = take(engine)
    assert fresh.first_lsn == n.first_lsn
    engine.write_batch(fresh)
    want = contents(engine)
    assert [t[0] for t in want["q"]] == [1, 4]
    assert restarted(engine, data_dir, clock) == want
    lsns = [r["lsn"] for p in sorted(data_dir.glob("*.wal")) for r in iter_records(p)]
    assert lsns == list(range(1, len(lsns) + 1))


def test_a_cancelled_batch_is_refused_even_when_its_lsns_would_fit(engine, faulty) -> None:
    q = engine.catalog.space("q")
    q.insert((2, "r", b"x"))
    n = take(engine)
    q.insert((3, "r", b"x"))
    stale = take(engine)
    faulty.plan("pwrite", enospc())
    with pytest.raises(WalWriteError):
        engine.write_batch(n)
    engine.rollback(n)
    q.insert((5, "r", b"y"))  # the WAL now ends just where `stale` would begin
    engine.write_batch(take(engine))
    assert engine.durable_lsn + 1 == stale.first_lsn
    with pytest.raises(WalWriteError):
        engine.write_batch(stale)


def test_batches_must_be_written_in_order(engine) -> None:
    q = engine.catalog.space("q")
    q.insert((2, "r", b"x"))
    first = take(engine)
    q.insert((3, "r", b"x"))
    second = take(engine)
    with pytest.raises(WalWriteError, match="does not follow"):
        engine.write_batch(second)
    engine.write_batch(first)
    engine.write_batch(second)


def test_a_written_batch_cannot_be_rolled_back(engine) -> None:
    engine.catalog.space("q").insert((2, "r", b"x"))
    batch = take(engine)
    engine.write_batch(batch)
    with pytest.raises(EngineError):
        engine.rollback(batch)


def test_rollback_puts_back_a_dropped_space_and_removes_a_created_one(
    engine, faulty, data_dir, clock
) -> None:
    acknowledged = contents(engine)
    dropped = engine.catalog.space("q")
    engine.catalog.drop_space("q")
    engine.catalog.create_space("b", [dropped.definition.indexes[0]])
    engine.catalog.space("b").insert((9,))
    batch = take(engine)
    faulty.plan("pwrite", enospc())
    with pytest.raises(WalWriteError):
        engine.write_batch(batch)
    engine.rollback(batch)
    assert "b" not in engine.catalog and engine.catalog.space("q") is dropped
    assert contents(engine) == acknowledged
    engine.catalog.space("q").insert((2, "r", b"x"))
    flush(engine)
    want = contents(engine)
    assert restarted(engine, data_dir, clock) == want


def snapshot(engine: Engine) -> Any:
    job = engine.begin_snapshot()
    job.run()
    engine.finish_snapshot(job)
    return job


def snapshot_rows(job: Any) -> list[tuple[Any, ...]]:
    return sorted(t for r in iter_records(job.path) if r["op"] == "rows" for t in r["tuples"])


def test_a_snapshot_covers_exactly_the_durable_changes(engine, data_dir, clock) -> None:
    q = engine.catalog.space("q")
    q.insert((2, "r", b"two"))
    q.update((1,), {1: "t"})
    in_flight = take(engine)
    q.delete((2,))
    q.insert((3, "r", b"three"))  # pending
    job = engine.begin_snapshot()
    assert job.lsn == in_flight.first_lsn - 1
    engine.write_batch(in_flight)  # lands while the snapshot is being written
    job.run()
    engine.finish_snapshot(job)
    assert snapshot_rows(job) == [(1, "r", b"one")]
    flush(engine)
    want = contents(engine)
    assert restarted(engine, data_dir, clock) == want


def test_a_snapshot_taken_before_a_failed_write_does_not_hold_its_changes(
    engine, faulty, data_dir, clock
) -> None:
    acknowledged = contents(engine)
    q = engine.catalog.space("q")
    q.update((1,), {2: b"changed"})
    q.insert((2, "r", b"two"))
    batch = take(engine)
    job = engine.begin_snapshot()
    faulty.plan("pwrite", enospc())
    with pytest.raises(WalWriteError):
        engine.write_batch(batch)
    engine.rollback(batch)
    job.run()
    engine.finish_snapshot(job)
    assert snapshot_rows(job) == [(1, "r", b"one")]
    assert restarted(engine, data_dir, clock) == acknowledged


def test_a_snapshot_sees_spaces_as_of_the_durable_lsn(engine, data_dir, clock) -> None:
    q = engine.catalog.space("q")
    q.insert((2, "r", b"two"))
    flush(engine)
    engine.catalog.drop_space("q")
    fresh = tasks(engine, "fresh")
    fresh.insert((7, "r", b"seven"))
    batch = take(engine)
    job = engine.begin_snapshot()
    job.run()
    engine.finish_snapshot(job)
    records = list(iter_records(job.path))
    assert [r["space"] for r in records if r["op"] == "create_space"] == ["q"]
    assert snapshot_rows(job) == [(1, "r", b"one"), (2, "r", b"two")]
    engine.write_batch(batch)
    want = contents(engine)
    assert restarted(engine, data_dir, clock) == want == {"fresh": [(7, "r", b"seven")]}
