"""Names of the files in a data directory (FORMAT.md section 2).

Owns: how a file's name encodes its kind and LSN, and sorting a directory
listing into snapshots, WAL segments and leftovers. Must not touch file
contents; the listing itself comes from the caller's FileIO.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

LOCK_NAME = "queuebox.lock"
_DIGITS = 20
SUFFIXES = {".wal": "wal", ".snap": "snap", ".snap.inprogress": "inprogress"}


def file_name(kind: str, lsn: int) -> str:
    suffix = {v: k for k, v in SUFFIXES.items()}[kind]
    return f"{lsn:0{_DIGITS}d}{suffix}"


def parse_name(name: str) -> tuple[str, int] | None:
    """(kind, lsn) for a queuebox data file name, else None."""
    stem, dot, _ = name.partition(".")
    if not dot or len(stem) != _DIGITS or not stem.isdigit():
        return None
    kind = SUFFIXES.get(name[len(stem) :])
    return None if kind is None else (kind, int(stem))


@dataclass
class Listing:
    """A data directory's files by kind, each list sorted by LSN."""

    wal: list[tuple[int, Path]] = field(default_factory=list)
    snap: list[tuple[int, Path]] = field(default_factory=list)
    inprogress: list[tuple[int, Path]] = field(default_factory=list)


def sort_listing(directory: Path, names: list[str]) -> Listing:
    listing = Listing()
    for name in names:
        parsed = parse_name(name)
        if parsed is not None:
            kind, lsn = parsed
            getattr(listing, kind).append((lsn, directory / name))
    for files in (listing.wal, listing.snap, listing.inprogress):
        files.sort()
    return listing


def covered_segments(wal: list[tuple[int, Path]], lsn: int) -> list[Path]:
    """Segments whose records all have LSN <= lsn: those followed by a segment
    starting at or before lsn + 1. The last segment is never covered (it is
    the one being written)."""
    return [path for (_, path), (nxt, _) in zip(wal, wal[1:], strict=False) if nxt <= lsn + 1]
