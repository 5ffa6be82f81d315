"""Backup sets: a snapshot and the WAL after it, kept outside a data directory.

Owns: reading such a set strictly with storage's own readers (reader.py):
every file header, every frame's CRC and body, a snapshot's `end` record and
its counts, and the WAL's LSNs following the snapshot with no gap; any fault
is a CorruptLog that names the file and the offset, a missing range an
LsnGap that names the LSNs. A backup set is read like a data directory
(FORMAT.md §2), except that nothing is forgiven: a torn tail is corruption
here, since every file of a set was complete when it was written.
`verify` checks a set made by `queuebox backup` against its manifest
(`backup.json`: the files, their sizes, the LSN range), so a file cut at a
frame boundary is caught too. Used by backup and restore (restore.py).

Must not touch: the network (server/start/backup.py fetches the files), a
running server's data directory, the state of spaces.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from queuebox.protocol.walformat import HeaderError

from .errors import CorruptLog, EngineError, LsnGap
from .fileio import FileIO
from .framing import Damage
from .layout import covered_segments, sort_listing
from .reader import LogFile, events_of_bytes

MANIFEST = "backup.json"
MANIFEST_VERSION = 1


class NotASet(EngineError):
    """A directory with neither a snapshot nor a WAL segment in it."""


@dataclass
class SnapshotFacts:
    path: Path
    lsn: int
    ts: float | None  # of the WAL record at its LSN (absent in old snapshots)
    spaces: int
    tuples: int
    size: int


@dataclass
class WalRecord:
    """One WAL record as it is framed on disk: what a restore copies."""

    path: Path
    lsn: int
    ts: float
    frame: bytes


@dataclass
class SetFacts:
    """What a backup set holds, once read whole."""

    snapshot: SnapshotFacts | None
    segments: list[Path] = field(default_factory=list)
    first_lsn: int = 0  # of the first WAL record after the snapshot (0: none)
    last_lsn: int = 0  # the newest LSN the set holds (the snapshot's if no WAL after it)
    last_ts: float | None = None
    records: int = 0
    size: int = 0  # bytes of every file read

    @property
    def base_lsn(self) -> int:
        return self.snapshot.lsn if self.snapshot is not None else 0


def _open(path: Path, files: FileIO) -> LogFile:
    try:
        return LogFile(path, files)
    except HeaderError as e:
        raise CorruptLog(str(path), e.offset, e.reason) from None


def check_snapshot(path: Path, lsn: int, files: FileIO) -> SnapshotFacts:
    """The snapshot read whole: every frame and body, the `end` record and its counts."""
    log = _open(path, files)
    if log.header.kind != "snap" or log.header.lsn != lsn:
        raise CorruptLog(str(path), 0, "header does not match the file name")
    spaces = tuples = 0
    for ev in log.events():
        if isinstance(ev, Damage):
            raise CorruptLog(str(path), ev.offset, ev.reason)
        body = ev.body
        if body["op"] == "end":
            if (body["spaces"], body["count"]) != (spaces, tuples) or ev.end != log.size:
                raise CorruptLog(str(path), ev.offset, "end record counts do not match")
            return SnapshotFacts(path, lsn, body.get("ts"), spaces, tuples, log.size)
        if body["op"] == "create_space":
            spaces += 1
        else:
            tuples += len(body["tuples"])
    raise CorruptLog(str(path), log.size, "no end record: the snapshot is incomplete")


def segment_records(path: Path, first: int, files: FileIO) -> Iterator[WalRecord]:
    """Every record of one segment, strictly, with its frame's bytes."""
    fd = files.open_read(path)
    try:
        data = b"".join(iter(lambda: files.read(fd, 4 << 20), b""))
    finally:
        files.close(fd)
    try:
        header, events = events_of_bytes(data)
    except HeaderError as e:
        raise CorruptLog(str(path), e.offset, e.reason) from None
    if header.kind != "wal" or header.lsn != first:
        raise CorruptLog(str(path), 0, "header does not match the file name")
    for ev in events:
        if isinstance(ev, Damage):
            raise CorruptLog(str(path), ev.offset, ev.reason)
        yield WalRecord(path, ev.body["lsn"], ev.body["ts"], data[ev.offset : ev.end])


def wal_after(segments: list[tuple[int, Path]], after: int, files: FileIO) -> Iterator[WalRecord]:
    """The records with LSN > `after`, in LSN order, each LSN once, from segments
    sorted by first LSN (of one set, or of a set and an archive merged: a record
    found twice is taken once). A missing LSN raises LsnGap naming the range."""
    last = after
    for first, path in segments:
        for rec in segment_records(path, first, files):
            if rec.lsn <= last:
                continue
            if rec.lsn != last + 1:
                raise LsnGap(
                    last + 1,
                    rec.lsn - 1,
                    f"LSNs {last + 1}..{rec.lsn - 1} are in no file: "
                    f"{path.name} holds LSN {rec.lsn} after LSN {last}",
                )
            last = rec.lsn
            yield rec


def needed_segments(directory: Path, after: int, files: FileIO) -> list[tuple[int, Path]]:
    """The segments of one directory that may hold an LSN after `after`."""
    wal = sort_listing(directory, files.listdir(directory)).wal
    covered = set(covered_segments(wal, after))
    return [(first, path) for first, path in wal if path not in covered]


def read_set(directory: Path, files: FileIO | None = None) -> SetFacts:
    """A directory of a snapshot (the newest one is the base) and the WAL after it,
    read whole."""
    files = files or FileIO()
    listing = sort_listing(directory, files.listdir(directory))
    if not listing.snap and not listing.wal:
        raise NotASet(f"{directory} holds no snapshot and no WAL segment")
    snaps = listing.snap
    snapshot = check_snapshot(snaps[-1][1], snaps[-1][0], files) if snaps else None
    facts = SetFacts(snapshot)
    base = facts.base_lsn
    facts.last_lsn, facts.last_ts = base, snapshot.ts if snapshot else None
    facts.size = snapshot.size if snapshot else 0
    segments = needed_segments(directory, base, files)
    for rec in wal_after(segments, base, files):
        facts.first_lsn = facts.first_lsn or rec.lsn
        facts.last_lsn, facts.last_ts = rec.lsn, rec.ts
        facts.records += 1
    facts.segments = [path for _, path in segments]
    facts.size += sum(files.size(path) for path in facts.segments)
    return facts


def write_manifest(directory: Path, facts: SetFacts, extra: dict[str, Any]) -> None:
    kept = ([facts.snapshot.path] if facts.snapshot else []) + facts.segments
    manifest = {
        "format": MANIFEST_VERSION,
        **extra,
        "snapshot_lsn": facts.base_lsn,
        "last_lsn": facts.last_lsn,
        "files": {path.name: path.stat().st_size for path in kept},
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def check_manifest(directory: Path, files: FileIO) -> dict[str, Any] | None:
    """The manifest of a set made by `queuebox backup`, its files there with the
    sizes they were written with (frames cannot show a file cut between two)."""
    path = directory / MANIFEST
    if not path.exists():
        return None
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
    except ValueError as e:
        raise CorruptLog(str(path), 0, f"not JSON: {e}") from None
    for name, size in manifest["files"].items():
        found = directory / name
        if not found.exists():
            raise CorruptLog(str(found), 0, "named in the manifest, but missing")
        if files.size(found) != size:
            raise CorruptLog(
                str(found), min(size, files.size(found)), f"{files.size(found)} bytes, not {size}"
            )
    return manifest


def verify(directory: Path, files: FileIO | None = None) -> SetFacts:
    """A backup set read whole and checked against its manifest, if it has one:
    the same files, of the same sizes, reaching the same LSN."""
    files = files or FileIO()
    manifest = check_manifest(directory, files)
    facts = read_set(directory, files)
    if manifest is not None and facts.last_lsn != manifest["last_lsn"]:
        raise LsnGap(
            facts.last_lsn + 1,
            manifest["last_lsn"],
            f"the backup was taken up to LSN {manifest['last_lsn']}; "
            f"its files reach LSN {facts.last_lsn}",
        )
    return facts
