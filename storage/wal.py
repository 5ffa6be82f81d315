"""The WAL writer: appends sealed batches to segment files.

Owns: the current segment (its file descriptor and good length), rotation by
size, the one write (and in fsync mode the one sync) per batch, and putting
the file back to its last good length when a write fails. In fsync mode it
preallocates each segment ahead of the write position (fallocate, up to
PREALLOCATE bytes at a time, never past segment_size unless one batch needs
more), so that a batch written inside that space leaves the file's size as
it was and `fdatasync` makes it durable; a batch that grows the file (or
creates it) gets a full `fsync`. A segment it leaves (rotation, close) is cut
back to its last batch: only the segment being written has a zero tail, and
that only until the next start reads it (FORMAT.md §7).

Overlapping syncs (fsync mode, docs/durability.md "Overlapping syncs"): a
batch may also be written without its sync (`write`, the event loop's
thread, batches in take order, one writer) and synced later by one of
`sync_slots` sync workers (`sync`, a worker thread, on that slot's own file
descriptor), several at once; `synced` then moves the good length to the
end of the batch (loop thread, in WAL order). Each slot has its own open
file description of the segment, opened right after the segment is created
and before any record is written into it: Linux reports a writeback error
once per open file description (errseq), so a sync on a shared descriptor
could return 0 after a concurrent sync on the same descriptor took the
error; on its own descriptor every sync sees every error that happened
since its slot's previous sync returned. `write` never starts a segment or
repairs one (`can_write` says when it may: otherwise the caller sends the
batch through `append`, with nothing in flight). After a failed write or
sync, `forget_unsynced` drops every batch not yet synced: the next
`append` cuts the file back to the last synced batch first and reopens the
slots' descriptors (their pending error was reported already).

Must not touch: record encoding (the batch arrives as bytes), in-memory
state and rollback (waljournal.py), threads: every method is synchronous;
`append`, `rotate`, `close` and `write` are called by one thread at a time
with nothing else in flight, `sync(slot)` by one worker per slot.

A segment's life:

    (none) --append--> create NNN.wal, write header+batch --ok--> OPEN
    (none) --rotate (a snapshot)--> create next holding the header only --> OPEN
    OPEN   --append, would pass segment_size--> cut to good length, close, create next
    OPEN   --rotate (a snapshot)--> cut to good length, close, create next, header only
    OPEN   --append--> [fallocate ahead] write batch, sync --ok--> OPEN (good length += batch)
                              \\--fail--> truncate to good length (+ fsync) --ok--> OPEN
                                                    \\--fail--> BROKEN
    DIRTY (a write that never returned) --append--> truncate again --ok--> OPEN, then write
                              \\--fail--> BROKEN
    BROKEN --append--> refuse (WalWriteError) until a restart reads the file

Nothing is ever appended after bytes that might hold a half-written batch:
that is what keeps damage confined to the tail of the last segment.
"""

from __future__ import annotations

import contextlib
import errno
from pathlib import Path

from queuebox.protocol.walformat import HEADER_SIZE, encode_header

from .errors import WalWriteError
from .fileio import FileIO
from .layout import file_name

# Space reserved ahead of the write position, at most, in one fallocate: a
# full fsync once per PREALLOCATE bytes of WAL, fdatasync for every other batch.
PREALLOCATE = 16 << 20
# Sync workers (each with its own file descriptor of the segment) that may
# sync batches at once, fsync mode: docs/performance.md "Overlapping syncs".
SYNC_SLOTS = 3
# Where fallocate cannot be done (the file system says so), not retried.
_UNSUPPORTED = (errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS)


class WalWriter:
    def __init__(self, files: FileIO, directory: Path, segment_size: int, fsync: bool) -> None:
        self._files = files
        self._dir = directory
        self._segment_size = segment_size
        self._fsync = fsync
        self._fd: int | None = None
        self._path: Path | None = None
        self._good = 0  # bytes of the current segment known to be whole batches, synced
        self._end = 0  # bytes written (>= _good: batches written, their syncs in flight)
        # fsync mode: one read-only descriptor of the segment per sync slot.
        self.sync_slots = SYNC_SLOTS if fsync else 0
        self._sync_fds: list[int] = []
        # A sync failed on a slot's descriptor: this one may still hold the error.
        self._stale_error = False
        self._dirty = False  # bytes past _good may hold part of a failed batch
        # Why the file could not be cut back after a failed write (None: it
        # could): the failed batch may still be in it, so nothing is written
        # again (a reply could not be kept) until a restart reads the file.
        self.broken: str | None = None
        self._preallocate = fsync  # fsync mode, until the file system refuses it
        self._size = 0  # the current segment's preallocated end (0: none)
        self.bytes_written = 0  # total appended since open, for the snapshot trigger
        # (segment, good length), set in one assignment (readers on another thread
        # see a pair that belongs together): how far a reader of the segment
        # being written may read (walfeed.py); past it lie zeros or a batch in flight.
        self.written: tuple[Path | None, int] = (None, 0)

    def append(self, first_lsn: int, data: bytes) -> None:
        """Make `data` (whole frames, the first with LSN `first_lsn`) durable."""
        if self.broken is not None:
            raise WalWriteError(f"{self.broken}; no write is accepted until the server restarts")
        if self._dirty:
            self._repair()
        if self._fd is None or self._full(len(data)):
            self._start_segment(first_lsn, data)
        else:
            self._write_at(self._fd, data, self._good)
        self.bytes_written += len(data)

    def can_write(self, size: int) -> bool:
        """May a batch of `size` bytes go through `write` (no new segment, no
        repair, the slots' descriptors open)?"""
        return (
            self._fd is not None
            and not self._dirty
            and len(self._sync_fds) == self.sync_slots > 0
            and not self._full(size)
        )

    def write(self, data: bytes) -> tuple[int, bool]:
        """Write `data` after the last batch written, without syncing it (see
        the top; `can_write` first). Returns its end and whether the file grew
        (its sync must then be a full fsync). On failure the writer forgets
        every batch not yet synced (`forget_unsynced`) and raises WalWriteError."""
        assert self._fd is not None
        end = self._end + len(data)
        try:
            grew = self._reserve(self._fd, end)
            self._files.write_all(self._fd, data, self._end)
        except OSError as e:
            self.forget_unsynced()
            raise WalWriteError(f"WAL write to {self._path} failed: {e}") from e
        self._end = end
        self.bytes_written += len(data)
        return end, grew

    def sync(self, slot: int, grew: bool) -> None:
        """Sync the segment on slot `slot`'s descriptor (a sync worker): every
        batch written before this began is durable when it returns."""
        try:
            self._sync(self._sync_fds[slot], grew)
        except OSError as e:
            raise WalWriteError(f"WAL sync of {self._path} failed: {e}") from e

    def synced(self, end: int) -> None:
        """The batches up to `end` were synced (loop thread, in WAL order)."""
        if end > self._good:
            self._good = end
            self.written = (self._path, end)

    def forget_unsynced(self) -> None:
        """A write or sync failed: every batch past the last synced one is
        given up (its requests fail); the next append cuts them away first."""
        self._dirty = True
        self._end = self._good
        self._stale_error = True

    def cut_unsynced(self) -> bool:
        """After `forget_unsynced`, once no sync runs (loop thread): cut the
        batches given up out of the file now (and sync the cut, fsync mode),
        before their requests hear that they failed, so that no start replays
        them (a stop, a crash or a power loss may come before the next
        append). False if the cut failed: the writer is `broken` then."""
        if self._dirty and self._fd is not None:
            self._cut_back()
        return self.broken is None

    def _full(self, size: int) -> bool:
        return self._end + size > self._segment_size and self._end > HEADER_SIZE

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

    def written_end(self) -> tuple[Path | None, int]:
        """`written`, for a reader of the WAL on another thread (walfeed.py)."""
        return self.written

    def close(self) -> None:
        if self._fd is not None:
            self._leave()
            self.written = (None, 0)

    # -- internals --
    def _write_at(self, fd: int, data: bytes, offset: int) -> None:
        end = offset + len(data)
        # Until the batch is whole (or cut away): a close after an append that
        # never returned (a test's simulated crash) leaves the file as it is.
        self._dirty = True
        try:
            grew = self._reserve(fd, end)
            self._files.write_all(fd, data, offset)
            if self._fsync:
                self._sync(fd, grew)
        except OSError as e:
            self._stale_error = True  # the slots' descriptors have not seen it
            failed = f"WAL write to {self._path} failed: {e}"
            if not self._cut_back():
                failed = f"{failed}; {self.broken}"
            raise WalWriteError(failed) from e
        self._dirty = False
        self._good = self._end = end
        self.written = (self._path, end)

    def _reserve(self, fd: int, end: int) -> bool:
        """Make the segment at least `end` bytes long, preallocating ahead where
        it may; True if its size changed (the sync must then be a full fsync)."""
        if end <= self._size:
            return False
        if self._preallocate:
            want = max(end, min(end + PREALLOCATE, self._segment_size))
            try:
                self._files.fallocate(fd, self._size, want - self._size)
            except OSError as e:
                if e.errno not in _UNSUPPORTED:
                    raise
                self._preallocate = False
            else:
                self._size = want
        return True

    def _sync(self, fd: int, grew: bool) -> None:
        if grew:
            self._files.fsync(fd)
        else:
            self._files.fdatasync(fd)

    def _cut_back(self) -> bool:
        """Cut the file back to its last good batch, synced (fsync mode).
        If that fails (the cut, or its sync: then it may not survive a power
        loss) the failed batch may come back at the next start, so the writer
        is `broken`: nothing more is written, nothing more answered as kept."""
        try:
            self._truncate()
        except OSError as e:
            self.broken = (
                f"WAL segment {self._path} still holds a failed write and cannot be cut back"
                f" ({e}): that change may still be found after a restart"
            )
            return False  # stays _dirty
        self._dirty = False
        return True

    def _repair(self) -> None:
        """A write that never returned (a simulated crash) left its bytes:
        cut them before the next batch; a failed cut breaks the writer."""
        if not self._cut_back():
            raise WalWriteError(f"{self.broken}; no write is accepted until the server restarts")

    def _truncate(self) -> None:
        assert self._fd is not None
        if self._stale_error:
            # A slot's sync reported this error already (and its batches
            # failed); this descriptor has not seen it yet. Every byte before
            # _good was synced before it, and every byte after goes now.
            with contextlib.suppress(OSError):
                self._files.fsync(self._fd)
        self._files.ftruncate(self._fd, self._good)
        self._size = 0
        self._end = self._good
        if self._fsync:
            self._files.fsync(self._fd)
        if self._stale_error and self._path is not None:
            # New descriptors: the error was seen, a new one starts past it.
            self._close_sync_fds()
            self._open_sync_fds(self._path)
        self._stale_error = False

    def _open_sync_fds(self, path: Path) -> None:
        for _ in range(self.sync_slots):
            self._sync_fds.append(self._files.open_read(path))

    def _close_sync_fds(self) -> None:
        fds, self._sync_fds = self._sync_fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                self._files.close(fd)

    def _leave(self) -> None:
        """Close the current segment, cut back to its last batch first if it was
        preallocated: every byte of a batch was already written (and synced in
        fsync mode). A cut that fails leaves a zero tail, which readers pass
        over as the segment's end (FORMAT.md §7)."""
        assert self._fd is not None
        fd, self._fd, self._path = self._fd, None, None
        self._close_sync_fds()
        if self._size > self._good and not self._dirty:
            with contextlib.suppress(OSError):
                self._files.ftruncate(fd, self._good)
                if self._fsync:
                    self._files.fsync(fd)
        with contextlib.suppress(OSError):
            self._files.close(fd)

    def _start_segment(self, first_lsn: int, data: bytes) -> None:
        if self._fd is not None:
            self._leave()
        path = self._dir / file_name("wal", first_lsn)
        self._path = path
        try:
            fd = self._files.create(path)
        except OSError as e:
            self._path = None
            raise WalWriteError(f"cannot create WAL segment {path}: {e}") from e
        payload = encode_header("wal", first_lsn) + data
        self._size = 0
        try:
            # Before any byte is written: each sees every writeback error after.
            self._open_sync_fds(path)
            # The header first, then the space after it: a reader that lists the
            # new file while it is being made sees a header cut short, as before.
            self._files.write_all(fd, payload, 0)
            self._reserve(fd, len(payload))
            if self._fsync:
                self._files.fsync(fd)
                self._files.fsync_dir(self._dir)
        except OSError as e:
            self._abandon(fd, path)
            raise WalWriteError(f"WAL write to {path} failed: {e}") from e
        self._fd = fd
        self._good = self._end = len(payload)
        self._stale_error = False
        self.written = (path, self._good)

    def _abandon(self, fd: int, path: Path) -> None:
        """Forget a segment whose first write failed; the next batch recreates it
        under the same name (create truncates) if it cannot be removed now."""
        self._path = None
        self._close_sync_fds()
        with contextlib.suppress(OSError):
            self._files.close(fd)
        with contextlib.suppress(OSError):
            self._files.unlink(path)
