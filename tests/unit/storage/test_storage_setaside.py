"""storage/setaside.py on real data directories: the records after an LSN are
kept in a WAL-format file, later snapshots renamed aside, everything else
removed; a crash at any step leaves a directory that still opens."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest

from queuebox.storage.engine import Engine
from queuebox.storage.layout import sort_listing
from queuebox.storage.reader import LogFile, Record
from queuebox.storage.setaside import empty, set_aside
from tests.unit.storage.storage_harness import Crash, FakeClock, FaultyFileIO, flush, tasks


def snapshot(engine: Engine) -> None:
    job = engine.begin_snapshot()
    job.run()
    engine.finish_snapshot(job)


def written(path: Path, records: int, snapshots_at: tuple[int, ...] = ()) -> None:
    """A closed data directory: a space, then `records` inserts (one batch each),
    small WAL segments, a snapshot after each insert in `snapshots_at`."""
    engine = Engine(path, clock=FakeClock(), segment_size=300, checkpoint_count=2)
    engine.open()
    q = tasks(engine)
    flush(engine)
    for i in range(records):
        q.insert((i, "r", b"x" * 20))
        flush(engine)
        if i in snapshots_at:
            snapshot(engine)
    engine.close()


def data_files(path: Path) -> list[str]:
    listing = sort_listing(path, [p.name for p in path.iterdir()])
    return [p.name for _, p in listing.wal + listing.snap + listing.inprogress]


def test_the_records_after_the_lsn_go_to_one_file_and_the_directory_is_emptied(
    tmp_path: Path,
) -> None:
    written(tmp_path, 30, snapshots_at=(10, 25))  # LSN 1 is the space; snapshots at 12, 27
    kept = set_aside(FaultyFileIO(), tmp_path, 20, "STAMP")
    assert data_files(tmp_path) == []
    wal = tmp_path / "set-aside-STAMP.wal"
    records = [ev for ev in LogFile(wal).events() if isinstance(ev, Record)]
    assert [r.body["lsn"] for r in records] == list(range(21, 32))
    assert (kept.records, kept.first_lsn, kept.last_lsn) == (11, 21, 31)
    # The snapshot after LSN 20 holds changes of that history too: kept, renamed.
    snap = tmp_path / "set-aside-STAMP-00000000000000000027.snap"
    assert kept.paths == [wal, snap] and snap.exists()
    assert not (tmp_path / "set-aside-STAMP-00000000000000000012.snap").exists()


def test_nothing_after_the_lsn_means_no_file(tmp_path: Path) -> None:
    written(tmp_path, 5)
    kept = set_aside(FaultyFileIO(), tmp_path, 6, "STAMP")
    assert kept.paths == [] and kept.records == 0
    assert [p.name for p in tmp_path.iterdir()] == ["queuebox.lock"]


def test_empty_keeps_nothing(tmp_path: Path) -> None:
    written(tmp_path, 20, snapshots_at=(5, 15))
    empty(FaultyFileIO(), tmp_path)
    assert data_files(tmp_path) == [] and not list(tmp_path.glob("set-aside-*"))


class CrashAt(FaultyFileIO):
    """Dies at the n-th removal of a data file (unlink or rename)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.left = n

    def _removal(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise Crash()

    def unlink(self, path: Path) -> None:
        self._removal()
        super().unlink(path)

    def rename(self, src: Path, dst: Path) -> None:
        self._removal()
        super().rename(src, dst)


@pytest.mark.parametrize("after", [0, 14, 40])
def test_a_crash_at_any_step_leaves_a_directory_that_opens(tmp_path: Path, after: int) -> None:
    original = tmp_path / "original"
    written(original, 40, snapshots_at=(8, 20, 30))
    steps = len(data_files(original))
    assert steps >= 6
    for n in range(steps + 1):
        work = tmp_path / f"crash{n}"
        shutil.copytree(original, work)
        with contextlib.suppress(Crash):
            set_aside(CrashAt(n), work, after, "STAMP")
        engine = Engine(work, clock=FakeClock())
        report = engine.open()  # a prefix of the same history, or nothing at all
        try:
            assert report.last_lsn <= 41
            assert list(engine.catalog) == [] or len(list(engine.catalog.get("q") or [])) + 1 == (
                report.last_lsn
            )
        finally:
            engine.close()
