"""The WAL writer: appends sealed batches to segment files.

Owns: the current segment (its file descriptor and good length), rotation by
size, the one write (and in fsync mode the one fsync) per batch, and putting
the file back to its last good length when a write fails.

Must not touch: record encoding (the batch arrives as bytes), in-memory
state and rollback (waljournal.py), threads: every method is synchronous and is
called from the one writer thread the server runs.

A segment's life:

    (none) --append--> create NNN.wal, write header+batch --ok--> OPEN
    (none) --rotate (a snapshot)--> create next holding the header only --> OPEN
    OPEN   --append, would pass segment_size--> close, create next (as above)
    OPEN   --rotate (a snapshot)--> close, create next holding the header only
    OPEN   --append--> write batch --ok--> OPEN (good length += batch)
                              \\--fail--> truncate to good length --ok--> OPEN
                                                    \\--fail--> DIRTY
    DIRTY  --append--> truncate again --ok--> OPEN, then write
                              \\--fail--> refuse (WalWriteError), stay DIRTY

Nothing is ever appended after bytes that might hold a half-written batch:
that is what keeps damage confined to the tail of the last segment.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from queuebox.protocol.walformat import HEADER_SIZE, encode_header

from .errors import WalWriteError
from .fileio import FileIO
from .layout import file_name


class WalWriter:
    def __init__(self, files: FileIO, directory: Path, segment_size: int, fsync: bool) -> None:
        self._files = files
        self._dir = directory
        self._segment_size = segment_size
        self._fsync = fsync
        self._fd: int | None = None
        self._path: Path | None = None
        self._good = 0  # bytes of the current segment known to be whole batches
        self._dirty = False  # bytes past _good may hold part of a failed batch
        self.bytes_written = 0  # total appended since open, for the snapshot trigger

    def append(self, first_lsn: int, data: bytes) -> None:
        """Make `data` (whole frames, the first with LSN `first_lsn`) durable."""
        if self._dirty:
            self._repair()
        if self._fd is None or (
            self._good + len(data) > self._segment_size and self._good > HEADER_SIZE
        ):
            self._start_segment(first_lsn, data)
        else:
            self._write_at(self._fd, data, self._good)
        self.bytes_written += len(data)

    def rotate(self, next_lsn: int) -> bool:
        """Close a segment that holds records and start the next one, header only,
        named `next_lsn` (the LSN of the next record): called by a snapshot while
        no write is in flight, so that a start from that snapshot reads no segment
        of records it already holds. True if it did. Not after a failed write (`_dirty`): the old
        segment must end on whole batches before another follows it. With no segment open
        (nothing written since the start) it creates the one the next write would: a start
        after a restart and a clean stop then skips no records either (not at LSN 1: a
        fresh directory gets no WAL file before its first write)."""
        if self._dirty:
            return False
        if self._fd is None:
            if next_lsn <= 1:
                return False
        elif self._good == HEADER_SIZE:
            return False
        self._start_segment(next_lsn, b"")
        return True

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd, self._path = self._fd, None, None
            self._files.close(fd)

    # -- internals --
    def _write_at(self, fd: int, data: bytes, offset: int) -> None:
        try:
            self._files.write_all(fd, data, offset)
            if self._fsync:
                self._files.fsync(fd)
        except OSError as e:
            self._cut_back()
            raise WalWriteError(f"WAL write to {self._path} failed: {e}") from e
        self._good = offset + len(data)

    def _cut_back(self) -> None:
        try:
            self._truncate()
        except OSError:
            self._dirty = True

    def _repair(self) -> None:
        try:
            self._truncate()
        except OSError as e:
            raise WalWriteError(
                f"WAL segment {self._path} still holds a failed write and cannot be cut back: {e}"
            ) from e
        self._dirty = False

    def _truncate(self) -> None:
        assert self._fd is not None
        self._files.ftruncate(self._fd, self._good)
        if self._fsync:
            self._files.fsync(self._fd)

    def _start_segment(self, first_lsn: int, data: bytes) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            # Every byte of it was already written (and fsynced in fsync mode).
            with contextlib.suppress(OSError):
                self._files.close(fd)
        path = self._dir / file_name("wal", first_lsn)
        self._path = path
        try:
            fd = self._files.create(path)
        except OSError as e:
            self._path = None
            raise WalWriteError(f"cannot create WAL segment {path}: {e}") from e
        payload = encode_header("wal", first_lsn) + data
        try:
            self._files.write_all(fd, payload, 0)
            if self._fsync:
                self._files.fsync(fd)
                self._files.fsync_dir(self._dir)
        except OSError as e:
            self._abandon(fd, path)
            raise WalWriteError(f"WAL write to {path} failed: {e}") from e
        self._fd = fd
        self._good = len(payload)

    def _abandon(self, fd: int, path: Path) -> None:
        """Forget a segment whose first write failed; the next batch recreates it
        under the same name (create truncates) if it cannot be removed now."""
        self._path = None
        with contextlib.suppress(OSError):
            self._files.close(fd)
        with contextlib.suppress(OSError):
            self._files.unlink(path)
