"""Setting a data directory's own history aside, then emptying it (a re-bootstrap).

Owns: copying the WAL records after an LSN into one file of their own,
`set-aside-STAMP.wal` (a WAL segment in form, FORMAT.md §2: `queuebox wal cat`
reads it; recovery never does), keeping the snapshots after that LSN
(renamed `set-aside-STAMP-NAME`), and removing every other data file in an
order that leaves, after each step, a directory that recovers to a prefix of
the same history: a crash midway loses nothing (the next re-bootstrap sets
the rest aside again). The copy is written and fsynced before anything is
removed.

Must not touch: the engine (closed while this runs; the caller holds the
directory's lock), wall time (the caller's STAMP), sockets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from queuebox.protocol.walformat import HEADER_SIZE, encode_header

from .fileio import FileIO
from .layout import covered_segments, sort_listing
from .walfeed import WalCursor

PREFIX = "set-aside-"


@dataclass
class SetAside:
    """What was kept: the files (in the data directory) and the LSNs of the records."""

    paths: list[Path] = field(default_factory=list)
    records: int = 0
    first_lsn: int = 0
    last_lsn: int = 0


def set_aside(files: FileIO, directory: Path, after_lsn: int, stamp: str) -> SetAside:
    """Keep every record and snapshot after `after_lsn` aside, then empty the directory."""
    kept = _copy_records(files, directory, after_lsn, directory / f"{PREFIX}{stamp}.wal")
    _empty(files, directory, after_lsn, stamp, kept)
    return kept


def empty(files: FileIO, directory: Path) -> None:
    """Remove every data file, keeping nothing (what is there came from elsewhere)."""
    _empty(files, directory, None, "", SetAside())


def _empty(
    files: FileIO, directory: Path, after_lsn: int | None, stamp: str, kept: SetAside
) -> None:
    listing = sort_listing(directory, files.listdir(directory))
    for _, path in listing.inprogress:
        files.unlink(path)
    snaps, wal = listing.snap, listing.wal

    def drop_snapshot(lsn: int, path: Path) -> None:
        if after_lsn is not None and lsn > after_lsn:  # changes the new history may lack
            aside = path.with_name(f"{PREFIX}{stamp}-{path.name}")
            files.rename(path, aside)
            kept.paths.append(aside)
        else:
            files.unlink(path)

    # Older snapshots first (the newest still recovers with the WAL), then the
    # segments the newest covers, then the rest of the WAL newest first (each
    # step leaves a shorter WAL after that snapshot), the newest snapshot last.
    for lsn, path in snaps[:-1]:
        drop_snapshot(lsn, path)
    covered = covered_segments(wal, snaps[-1][0]) if snaps else []
    for path in covered:
        files.unlink(path)
    for _, path in reversed(wal):
        if path not in covered:
            files.unlink(path)
    if snaps:
        drop_snapshot(*snaps[-1])
    files.fsync_dir(directory)


def _copy_records(files: FileIO, directory: Path, after_lsn: int, target: Path) -> SetAside:
    """The WAL's records after `after_lsn` (from its first one, if it starts later)
    into `target`, fsynced; no file when there are none."""
    wal = sort_listing(directory, files.listdir(directory)).wal
    if not wal:
        return SetAside()
    start = max(after_lsn, wal[0][0] - 1)
    cursor = WalCursor(files, directory, start)
    fd: int | None = None
    size = HEADER_SIZE
    try:
        while data := cursor.read():
            if fd is None:
                fd = files.create(target)
                files.write_all(fd, encode_header("wal", start + 1), 0)
            files.write_all(fd, data, size)
            size += len(data)
        if fd is None:
            return SetAside()
        files.fsync(fd)
    finally:
        cursor.close()
        if fd is not None:
            files.close(fd)
    files.fsync_dir(directory)
    last = cursor.next_lsn - 1
    return SetAside([target], last - start, start + 1, last)
