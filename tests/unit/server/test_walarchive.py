"""The WAL archive (server/core/walarchive.py) over a real engine: closed segments
copied whole, the segment being written left alone, and no segment removed by a
snapshot before it is archived, even while the archive cannot be written."""

from __future__ import annotations

from pathlib import Path

import pytest

from queuebox.server.core.walarchive import WalArchive
from queuebox.storage.backupset import wal_after
from queuebox.storage.engine import Engine
from queuebox.storage.fileio import FileIO
from queuebox.storage.layout import sort_listing
from tests.unit.storage.storage_harness import FakeClock
from tests.unit.storage.test_storage_gaps import puts, snapshot


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.wal"))


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    e = Engine(tmp_path / "data", clock=FakeClock(), segment_size=400, checkpoint_count=1)
    e.open()
    return e


def test_closed_segments_are_archived_and_kept_until_then(engine: Engine, tmp_path: Path) -> None:
    archive = WalArchive(engine.data_dir, tmp_path / "archive")
    archive.keep_unarchived(engine)
    puts(engine, 30)
    written = names(engine.data_dir)
    assert len(written) >= 3
    snapshot(engine)  # nothing archived yet: every segment stays
    now = names(engine.data_dir)  # and the snapshot began the next one
    assert now[: len(written)] == written and len(now) == len(written) + 1
    assert archive.archive_closed() == len(now) - 1  # not the one being written
    assert names(tmp_path / "archive") == now[:-1]
    listing = sort_listing(archive.dir, FileIO().listdir(archive.dir)).wal
    lsns = [rec.lsn for rec in wal_after(listing, 0, FileIO())]
    assert lsns == list(range(1, archive.archived_lsn + 1))
    assert archive.archive_closed() == 0  # once each
    snapshot(engine)  # now they may go
    assert written[0] not in names(engine.data_dir)
    # A new run reads how far the archive got.
    assert WalArchive(engine.data_dir, tmp_path / "archive").archived_lsn == archive.archived_lsn
    engine.close()


def test_an_archive_that_fails_holds_the_wal(engine: Engine, tmp_path: Path) -> None:
    archive = WalArchive(engine.data_dir, tmp_path / "archive")
    archive.keep_unarchived(engine)
    puts(engine, 30)
    (tmp_path / "archive").rmdir()
    (tmp_path / "archive").write_text("not a directory")
    with pytest.raises(OSError):
        archive.archive_closed()
    written = names(engine.data_dir)
    snapshot(engine)
    assert names(engine.data_dir)[: len(written)] == written
    assert archive.archived_lsn == 0
    engine.close()
