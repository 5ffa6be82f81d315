"""Backup sets and restore (storage/backupset.py, storage/restore.py) on files an
engine wrote: strict reading, sets merged with an archive whose segments start
elsewhere, the cut at an LSN or a time, and points the files do not reach."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from queuebox.storage.backupset import read_set, segment_records, verify, write_manifest
from queuebox.storage.engine import Engine
from queuebox.storage.errors import CorruptLog, LsnGap
from queuebox.storage.fileio import FileIO
from queuebox.storage.restore import RestoreError, restore
from tests.unit.storage.storage_harness import FakeClock, contents
from tests.unit.storage.test_storage_gaps import puts, snapshot, wal


def copy_files(src: Path, dst: Path, paths: list[Path]) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for path in paths:
        shutil.copy(path, dst / path.name)
    return dst


def state_at(tmp: Path, clock: FakeClock, n: int) -> dict[str, list[tuple[object, ...]]]:
    """What an engine holds after n puts (LSN n + 1: the space's creation first)."""
    e = Engine(tmp / f"ref{n}", clock=clock, segment_size=400)
    e.open()
    puts(e, n)
    got = contents(e)
    e.close()
    return got


def opened(path: Path, clock: FakeClock) -> dict[str, list[tuple[object, ...]]]:
    e = Engine(path, clock=clock)
    e.open()
    try:
        return contents(e)
    finally:
        e.close()


def test_a_set_read_whole_and_restored_to_an_lsn(make_engine, data_dir, tmp_path, clock) -> None:
    e = make_engine(segment_size=400)
    puts(e, 10)
    snapshot(e)
    puts(e, 20, start=10)
    e.close()
    facts = read_set(data_dir)
    assert (facts.base_lsn, facts.first_lsn, facts.last_lsn) == (11, 12, 31)
    assert facts.snapshot is not None and facts.snapshot.tuples == 10
    done = restore(data_dir, tmp_path / "r", to_lsn=21)
    assert (done.base_lsn, done.last_lsn, done.records) == (11, 21, 10)
    assert opened(tmp_path / "r", clock) == state_at(tmp_path, FakeClock(), 20)


def test_an_archive_whose_segments_start_elsewhere_fills_in(
    make_engine, data_dir, tmp_path, clock
) -> None:
    """The backup's segment ends inside an archived one that began before it: the
    records after the backup's end come from the archive, each LSN once."""
    e = make_engine(segment_size=400)
    puts(e, 40)
    e.close()
    segments = wal(data_dir)
    assert len(segments) >= 4
    # The "backup": the WAL up to the middle of segment 2, as one segment of its own.
    backup = copy_files(data_dir, tmp_path / "b", segments[:2])
    archive = copy_files(data_dir, tmp_path / "a", segments[1:])
    done = restore(backup, tmp_path / "r", archives=(archive,))
    assert done.last_lsn == 41 and done.records == 41
    assert opened(tmp_path / "r", clock) == state_at(tmp_path, FakeClock(), 40)
    # Without segment 2 of the archive, the LSNs it held are missing: named.
    (archive / segments[2].name).unlink()
    with pytest.raises(LsnGap, match=r"LSNs \d+\.\.\d+ are in no file"):
        restore(backup, tmp_path / "r2", archives=(archive,))
    assert not (tmp_path / "r2").exists()  # nothing half made is left


def test_a_torn_tail_is_corruption_in_a_set(make_engine, data_dir, tmp_path) -> None:
    e = make_engine()
    puts(e, 5)
    e.close()
    last = wal(data_dir)[-1]
    size = last.stat().st_size
    with open(last, "r+b") as f:
        f.truncate(size - 3)
    with pytest.raises(CorruptLog, match=rf"{last.name}: corrupt at offset \d+"):
        read_set(data_dir)


def test_the_manifest_catches_a_file_cut_between_frames(make_engine, data_dir, tmp_path) -> None:
    e = make_engine()
    puts(e, 5)
    e.close()
    facts = read_set(data_dir)
    write_manifest(data_dir, facts, {})
    assert verify(data_dir).last_lsn == 6
    segment = wal(data_dir)[-1]
    last = list(segment_records(segment, 1, FileIO()))[-1]
    segment.write_bytes(segment.read_bytes()[: -len(last.frame)])
    assert read_set(data_dir).last_lsn == 5  # every frame left is sound
    with pytest.raises(CorruptLog, match=f"{segment.name}: corrupt at offset"):
        verify(data_dir)


def test_points_the_files_do_not_reach_are_refused(make_engine, data_dir, tmp_path, clock) -> None:
    e = make_engine()
    puts(e, 5)
    snapshot(e)
    puts(e, 5, start=5)
    e.close()
    with pytest.raises(RestoreError, match="reach LSN 11, not LSN 12"):
        restore(data_dir, tmp_path / "a", to_lsn=12)
    with pytest.raises(RestoreError, match="oldest snapshot .* is at LSN 6, after LSN 5"):
        restore(data_dir, tmp_path / "b", to_lsn=5)
    with pytest.raises(RestoreError, match="changes after it may exist"):
        restore(data_dir, tmp_path / "c", to_time=clock.now + 10)
    with pytest.raises(RestoreError, match="not empty"):
        restore(data_dir, data_dir)
    # A time between two records: the last one at or before it.
    records = [r for path in wal(data_dir) for r in segment_records(path, int(path.stem), FileIO())]
    at = {r.lsn: r.ts for r in records}
    done = restore(data_dir, tmp_path / "d", to_time=(at[9] + at[10]) / 2)
    assert done.last_lsn == 9 and done.last_ts == at[9]
