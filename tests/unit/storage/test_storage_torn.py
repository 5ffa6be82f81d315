"""Torn files on real disks: the last WAL record cut at every byte, a torn snapshot.

As LevelDB's log tests do: whatever prefix of the last record a crash left,
recovery keeps every record before it, cuts the rest, and a later write
follows the good records with no garbage in between. A snapshot cut short
is never used; the previous one and the WAL after it give the same state.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from queuebox.protocol.walformat import HEADER_SIZE
from queuebox.storage.engine import Engine
from queuebox.storage.reader import LogFile, Record
from tests.unit.storage.storage_harness import contents, flush, tasks


def put(engine: Engine, i: int) -> None:
    q = engine.catalog.get("q") or tasks(engine)
    q.insert((i, "r", f"payload {i}".encode()))
    flush(engine)


def records(path: Path) -> list[Record]:
    return [ev for ev in LogFile(path).events() if isinstance(ev, Record)]


def test_the_last_wal_record_cut_at_every_byte(data_dir: Path, tmp_path: Path, clock) -> None:
    e = Engine(data_dir, clock=clock)
    e.open()
    for i in range(5):
        put(e, i)
    before_last = contents(e)
    put(e, 5)
    e.close()
    (segment,) = sorted(data_dir.glob("*.wal"))
    last = records(segment)[-1]
    whole = segment.read_bytes()
    assert last.end == len(whole)
    for cut in range(last.offset, last.end):
        d = tmp_path / f"cut{cut}"
        shutil.copytree(data_dir, d)
        (d / segment.name).write_bytes(whole[:cut])
        again = Engine(d, clock=clock)
        again.open()
        try:
            assert contents(again) == before_last, cut
            assert (d / segment.name).stat().st_size == last.offset, cut
            put(again, 100)
            want = contents(again)
        finally:
            again.close()
        reopened = Engine(d, clock=clock)
        reopened.open()
        try:
            assert contents(reopened) == want, cut
        finally:
            reopened.close()
        shutil.rmtree(d)


@pytest.mark.parametrize("cut", [HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 7, -100, -1])
def test_a_torn_snapshot_falls_back_to_the_previous_one(data_dir: Path, clock, cut: int) -> None:
    e = Engine(data_dir, clock=clock, segment_size=400)
    e.open()
    for i in range(10):
        put(e, i)
    for round_no in range(2):
        job = e.begin_snapshot()
        job.run()
        e.finish_snapshot(job)
        for i in range(10, 20):
            put(e, i + 100 * round_no)
    want = contents(e)
    e.close()
    older, newest = sorted(data_dir.glob("*.snap"))
    data = newest.read_bytes()
    newest.write_bytes(data[:cut])
    again = Engine(data_dir, clock=clock)
    report = again.open()
    try:
        assert contents(again) == want
        assert report.snapshot == str(older) and report.damaged_snapshots == [newest]
    finally:
        again.close()
