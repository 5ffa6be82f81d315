"""Restore: a data directory rebuilt from a backup set (and a WAL archive), up to a point.

Owns: choosing the base (the newest snapshot of the set at or before the
point), copying it, copying the WAL records after it in LSN order from the set
and the archive's segments, each read strictly and checked (backupset.py),
and cutting them at the point: the last record with LSN <= `to_lsn`, or with a
timestamp <= `to_time` (point-in-time recovery). The records keep their frames
and LSNs; they are written into new segments (FORMAT.md §2, §3), each made
durable before the next. Then the directory is opened as a server would open
it (Engine.open: recovery) to show it starts, and closed.

A point the files do not reach is refused, not guessed: an LSN past the last
one held, a time after the last record (changes after it may exist but are
not here), a point before the base snapshot.

Must not touch: the network, a running server's directory (the target must be
new or empty).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from queuebox.protocol.walformat import encode_header

from .backupset import (
    NotASet,
    SnapshotFacts,
    WalRecord,
    check_manifest,
    check_snapshot,
    needed_segments,
    wal_after,
)
from .engine import Engine
from .errors import EngineError
from .fileio import FileIO
from .layout import file_name, sort_listing
from .recovery_report import RecoveryReport

SEGMENT_SIZE = 64 << 20  # as a server writes them (wal_segment_size's default)


class RestoreError(EngineError):
    """The files cannot give the state asked for."""


@dataclass
class Restored:
    base_lsn: int  # the snapshot's LSN (0: none)
    last_lsn: int
    last_ts: float | None
    records: int  # WAL records copied
    files: list[Path]
    size: int
    report: RecoveryReport  # what opening the directory found


def _choose_base(
    source: Path, to_lsn: int | None, to_time: float | None, files: FileIO
) -> SnapshotFacts | None:
    """The newest snapshot of the set at or before the point that reads whole."""
    snaps = sort_listing(source, files.listdir(source)).snap
    usable = [(lsn, path) for lsn, path in snaps if to_lsn is None or lsn <= to_lsn]
    for lsn, path in reversed(usable):
        facts = check_snapshot(path, lsn, files)
        if to_time is None or (facts.ts is not None and facts.ts <= to_time):
            return facts
    if snaps and not usable:
        raise RestoreError(
            f"the oldest snapshot in {source} is at LSN {snaps[0][0]}, after LSN {to_lsn}"
        )
    if snaps:
        raise RestoreError(f"every snapshot in {source} was taken after {_when(to_time)}")
    return None


def _when(ts: float | None) -> str:
    if ts is None:
        return "an unknown time"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1e6):06d}Z"


def _records(source: Path, archives: list[Path], base: int, files: FileIO) -> Iterator[WalRecord]:
    segments = needed_segments(source, base, files)
    for archive in archives:
        segments += needed_segments(archive, base, files)
    segments.sort(key=lambda s: (s[0], str(s[1])))
    return wal_after(segments, base, files)


class SegmentWriter:
    """Frames appended to segments of the target, a new one past SEGMENT_SIZE."""

    def __init__(self, target: Path, files: FileIO) -> None:
        self.target, self.files = target, files
        self.paths: list[Path] = []
        self._fd: int | None = None
        self._size = 0

    def add(self, rec: WalRecord) -> None:
        if self._fd is None or self._size + len(rec.frame) > SEGMENT_SIZE:
            self.close()
            path = self.target / file_name("wal", rec.lsn)
            self._fd = self.files.create(path)
            self.paths.append(path)
            self._write(encode_header("wal", rec.lsn))
        self._write(rec.frame)

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        self.files.write_all(self._fd, data, self._size)
        self._size += len(data)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd, self._size = self._fd, None, 0
            try:
                self.files.fsync(fd)
            finally:
                self.files.close(fd)


def restore(
    source: Path,
    target: Path,
    *,
    to_lsn: int | None = None,
    to_time: float | None = None,
    archives: tuple[Path, ...] = (),
    files: FileIO | None = None,
) -> Restored:
    files = files or FileIO()
    if target.exists() and files.listdir(target):
        raise RestoreError(f"{target} is not empty: restore into a new directory")
    listing = sort_listing(source, files.listdir(source))
    if not listing.snap and not listing.wal:
        raise NotASet(f"{source} holds no snapshot and no WAL segment")
    check_manifest(source, files)
    base = _choose_base(source, to_lsn, to_time, files)
    made = not target.exists()
    files.makedirs(target)
    out = SegmentWriter(target, files)
    try:
        copied = _copy_base(base, target, files)
        last = _copy_wal(source, archives, base, out, to_lsn, to_time, files)
    except BaseException:
        out.close()
        for path in [*out.paths, target / base.path.name] if base else out.paths:
            path.unlink(missing_ok=True)  # nothing half made is left to be served
        if made:
            target.rmdir()
        raise
    kept = [*copied, *out.paths]
    engine = Engine(target, clock=time.time)
    report = engine.open()
    engine.close()
    size = sum(files.size(p) for p in kept)
    return Restored(base.lsn if base else 0, *last, kept, size, report)


def _copy_base(base: SnapshotFacts | None, target: Path, files: FileIO) -> list[Path]:
    if base is None:
        return []
    path = target / base.path.name
    shutil.copyfile(base.path, path)  # checked whole just before
    _fsync_file(files, path)
    return [path]


def _copy_wal(
    source: Path,
    archives: tuple[Path, ...],
    base: SnapshotFacts | None,
    out: SegmentWriter,
    to_lsn: int | None,
    to_time: float | None,
    files: FileIO,
) -> tuple[int, float | None, int]:
    """The records after the base up to the point, into `out`; (last LSN, its
    time, records copied)."""
    last_lsn, last_ts = (base.lsn, base.ts) if base else (0, None)
    records, reached = 0, False
    for rec in _records(source, list(archives), last_lsn, files):
        if (to_lsn is not None and rec.lsn > to_lsn) or (to_time is not None and rec.ts > to_time):
            reached = True
            break
        out.add(rec)
        last_lsn, last_ts, records = rec.lsn, rec.ts, records + 1
    out.close()
    files.fsync_dir(out.target)
    _check_reached(to_lsn, to_time, last_lsn, last_ts, reached or to_lsn == last_lsn)
    return last_lsn, last_ts, records


def _check_reached(
    to_lsn: int | None, to_time: float | None, last: int, last_ts: float | None, reached: bool
) -> None:
    if reached or (to_lsn is None and to_time is None):
        return
    if to_lsn is not None:
        raise RestoreError(f"the files reach LSN {last}, not LSN {to_lsn}")
    raise RestoreError(
        f"the files end at LSN {last} ({_when(last_ts)}), before {_when(to_time)}: "
        "changes after it may exist but are not in these files; restore without "
        "--to-time to take everything they hold"
    )


def _fsync_file(files: FileIO, path: Path) -> None:
    fd = files.open_read(path)
    try:
        files.fsync(fd)
    finally:
        files.close(fd)
