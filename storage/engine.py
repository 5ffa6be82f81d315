"""The durable engine: spaces plus WAL, snapshots and recovery, behind one object.

Owns: the data directory lock, LSN assignment, the pending batch (WAL frames
and undo entries of the changes made since the last take), the batches in
flight, rollback after a failed write, and when snapshots are due.

Must not touch: asyncio, threads, sockets, wall time (the server passes a
`clock`). Which thread calls what is the server's business; the contract:

    loop thread:    catalog/spaces (changes), has_pending, take_batch, rollback,
                    begin_snapshot, finish_snapshot, snapshot_due, open, close
    writer thread:  write_batch           (one at a time, batches in take order)
    worker thread:  SnapshotJob.run       (while the loop goes on)

A batch's life (LSNs are given when a change is made, so a request knows the
LSN it waits for as soon as its handler returns):

    pending --take_batch--> in flight --write_batch ok--> written (durable)
                                 \\--write_batch fails--> rollback(batch)
    rollback(batch) undoes, newest first, every change with LSN >= batch.first_lsn:
    the pending changes, every later batch already taken, and the batch itself
    (later changes may build on the failed ones, so they cannot stay). LSNs are
    then given again from batch.first_lsn, so the WAL stays gapless. Every
    request whose change was undone must fail; the engine helps a server that
    fails requests per batch:
      - a later batch already taken is cancelled: write_batch raises
        WalWriteError for it (and rollback of it is a no-op);
      - if pending changes were undone, the next take_batch returns a batch
        already cancelled that stands for them (write_batch raises for it too),
        and has_pending() is True until then.
    So a server that answers each batch's requests by its write_batch outcome
    fails exactly the right ones. (rollback also returns the first LSN undone,
    for a server that tracks the LSN each request waits for.) One corner: a
    change made after the rollback but before that cancelled batch is taken
    stays in memory and goes out with the next batch; if its request waited on
    the same outcome as the undone ones, it was told "failed" about a write
    that is kept, which loses nothing acknowledged.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from .batch import DDL_UNDO_KIND, UNDO, Batch
from .catalog import Catalog
from .checkpoints import Checkpoints
from .errors import (
    CorruptLog,
    DataDirLocked,
    EngineError,
    LsnUnavailable,
    ReadOnlyChange,
    ReplicationError,
    UnloggableChange,
    WalWriteError,
)
from .fileio import FileIO
from .framing import encode_frame
from .layout import LOCK_NAME, sort_listing
from .records import change_record, ddl_body, packer
from .recovery import Progress, Recovery, RecoveryReport
from .replicated import apply_record
from .snapshot import DEFAULT_RECORD_SIZE, TUPLE, SnapshotJob, Undo, capture
from .space import Space
from .wal import WalWriter
from .walfeed import WalCursor, first_record

WAL_MODES = ("none", "write", "fsync")


class Engine:
    """The spaces of one data directory, made durable.

    wal_mode: "none" (memory only; snapshots still work when asked), "write"
    (a batch is durable once written to the OS: survives a killed process) or
    "fsync" (once fsynced: survives power loss). segment_size: a WAL segment
    is closed once the next batch would take it past this size (a batch is
    never split). files: every file operation (tests pass a faulty one).
    force_recovery: start past corrupt records and snapshots, listing what was
    skipped. clock: wall time for record timestamps (the server's). timer:
    measures recovery only. snapshot_wal_bytes / snapshot_interval_s: the
    triggers snapshot_due() checks. snapshot_record_size: the most bytes of a
    snapshot record (FORMAT.md §5.3.1).
    """

    def __init__(
        self,
        data_dir: Path | str,
        wal_mode: str = "write",
        segment_size: int = 64 << 20,
        files: FileIO | None = None,
        force_recovery: bool = False,
        *,
        clock: Callable[[], float],
        timer: Callable[[], float] = time.perf_counter,
        snapshot_wal_bytes: int = 256 << 20,
        snapshot_interval_s: float = 3600.0,
        checkpoint_count: int = 2,
        snapshot_record_size: int = DEFAULT_RECORD_SIZE,
    ) -> None:
        if wal_mode not in WAL_MODES:
            raise ValueError(f"wal_mode must be one of {', '.join(WAL_MODES)}, not {wal_mode!r}")
        self.data_dir = Path(data_dir)
        self.wal_mode = wal_mode
        self.force_recovery = force_recovery
        self._files = files or FileIO()
        self._checkpoints = Checkpoints(
            self._files,
            self.data_dir,
            count=checkpoint_count,
            wal_bytes=snapshot_wal_bytes,
            interval_s=snapshot_interval_s,
            record_size=snapshot_record_size,
        )
        self._clock = clock  # wall time for record timestamps, from the server
        self._timer = timer  # only to measure recovery
        self._log = wal_mode != "none"
        self._wal = WalWriter(self._files, self.data_dir, segment_size, wal_mode == "fsync")
        self.catalog = Catalog(on_change=self._on_change, on_space=self._on_space)
        self._opened = False
        self._lock_fd: int | None = None
        # LSNs: written <= taken <= last (given to the newest change).
        self._last_lsn = 0
        self._taken_lsn = 0
        self._written_lsn = 0  # advanced by the writer thread
        self._frames: list[bytes] = []
        self._pack = packer()  # records are encoded on the loop thread only
        self._undo: list[Undo] = []
        self._inflight: list[Batch] = []  # taken, not yet known written, oldest first
        self._doomed: Batch | None = None  # stands for pending changes a rollback undid
        # A replica (or a fenced primary) takes changes only from its primary:
        # apply_replicated() hands the hooks the primary's frame in _incoming.
        self.writable = True
        self._incoming: bytes | None = None
        # The lowest LSN a replica still needs the WAL after (None: no replica):
        # finish_snapshot keeps the segments after it.
        self.retain_after: Callable[[], int | None] = lambda: None
        # The timestamp of the record at last_lsn (None: unknown, e.g. a start
        # from a snapshot alone): with the LSN it names one history, so a
        # primary can tell a replica that wrote other records at the same LSNs.
        self.last_ts: float | None = None
        self._written_ts: float | None = None  # of the record at the durable LSN

    # -- lifecycle --
    def open(self, progress: Progress | None = None) -> RecoveryReport:
        """Lock the directory and recover; `progress(records, bytes, seconds)` is
        called about once a second while recovery lasts."""
        if self._opened:
            raise EngineError("engine already open")
        self._files.makedirs(self.data_dir)
        self._lock_fd = self._take_lock()
        try:
            report = Recovery(
                self._files,
                self.data_dir,
                force=self.force_recovery,
                progress=progress,
                timer=self._timer,
            ).run(self.catalog)
            # New files continue after every LSN any file on disk names or holds:
            # an LSN is never given twice, even after a forced start.
            self._last_lsn = self._taken_lsn = self._written_lsn = report.highest_lsn
            self.last_ts = report.last_ts if report.last_lsn == report.highest_lsn else None
            self._written_ts = self.last_ts
            self._checkpoints.lsn = report.snapshot_lsn
            # WAL replayed on top of the snapshot counts toward the next one.
            self._checkpoints.wal_mark = -report.wal_bytes
            self._opened = True
            if report.needs_repair:
                self._repair(report)
        except BaseException:
            self._opened = False
            self._release_lock()
            raise
        return report

    def _repair(self, report: RecoveryReport) -> None:
        """After a start that fell back from a damaged snapshot or (forced) went past
        damage or missing LSNs: write a snapshot of this state now and set the
        damaged files aside (renamed `*.damaged`, never read), so the next start
        needs no force and finds nothing to fall back from."""
        aside = list(report.damaged_snapshots)
        for path in aside:
            self._set_aside(path)
        job = self.begin_snapshot()
        job.needed = True
        job.run()
        self.finish_snapshot(job)
        if report.wal_damaged:
            # Every segment left holds only LSNs the new snapshot covers, but
            # the empty one the snapshot began (named job.lsn + 1), written next.
            segments = sort_listing(self.data_dir, self._files.listdir(self.data_dir)).wal
            for lsn, path in segments:
                if lsn > job.lsn:
                    continue
                self._set_aside(path)
                aside.append(path)
        self._files.fsync_dir(self.data_dir)
        report.warnings.append(
            f"wrote snapshot {job.path.name} of the recovered state"
            + (f"; set aside as *.damaged: {', '.join(p.name for p in aside)}" if aside else "")
        )

    def _set_aside(self, path: Path) -> None:
        self._files.rename(path, path.with_name(path.name + ".damaged"))

    def close(self) -> None:
        """Release the files and the lock. Changes not yet written are lost (they
        were never acknowledged); a clean shutdown snapshots first."""
        if not self._opened:
            return
        self._opened = False
        try:
            self._wal.close()
        finally:
            self._release_lock()

    def _take_lock(self) -> int:
        try:
            return self._files.lock(self.data_dir / LOCK_NAME, f"pid {os.getpid()}")
        except BlockingIOError as e:
            raise DataDirLocked(str(self.data_dir), str(e.filename or "unknown owner")) from None

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            self._files.unlock(fd)

    # -- what a replication feed reads --
    @property
    def files(self) -> FileIO:
        return self._files

    def wal_cursor(self, after_lsn: int) -> WalCursor:
        """The WAL frames after `after_lsn`, read back from disk."""
        return WalCursor(self._files, self.data_dir, after_lsn)

    def record_ts(self, lsn: int) -> float | None:
        """The timestamp of this WAL's record at `lsn`, None if it is not on disk
        (the newest durable one is known without reading: a start from a snapshot)."""
        if lsn == self._written_lsn and self._written_ts is not None:
            return self._written_ts
        try:
            found = first_record(self.wal_cursor(lsn - 1))
        except (LsnUnavailable, CorruptLog):
            return None
        return None if found is None or found["lsn"] != lsn else found["ts"]

    def newest_snapshot(self) -> tuple[int, Path] | None:
        """(LSN, path) of the newest snapshot file, None when there is none."""
        snaps = sort_listing(self.data_dir, self._files.listdir(self.data_dir)).snap
        return snaps[-1] if snaps else None

    # -- LSNs --
    @property
    def last_lsn(self) -> int:
        """LSN of the newest change in memory (a request's change waits for it)."""
        return self._last_lsn

    @property
    def durable_lsn(self) -> int:
        """Every change up to this LSN is durable under wal_mode."""
        return self._written_lsn

    @property
    def snapshot_lsn(self) -> int:
        return self._checkpoints.lsn

    # -- the change hooks (loop thread) --
    def _on_change(self, space: Space, op: str, old: Any, new: Any) -> None:
        # old, new: the space's rows (rows.py), spliced into the record as they are.
        entry: Undo = (TUPLE, space, old, new)
        if self._incoming is not None or not self.writable:
            self._journal_incoming(entry)
        elif self._log:
            lsn, ts = self._last_lsn + 1, self._clock()
            try:
                self._check_open()
                record = change_record(self._pack, lsn, ts, op, space, old, new)
            except Exception as e:
                self._refuse(entry, space, e)
            self._log_change(record, ts, entry)
        else:
            self._count_change(entry)

    def _on_space(self, op: str, space: Space) -> None:
        entry: Undo = (DDL_UNDO_KIND[op], space, None, None)
        if self._incoming is not None or not self.writable:
            self._journal_incoming(entry)
        elif self._log:
            lsn, ts = self._last_lsn + 1, self._clock()
            try:
                self._check_open()
                record = self._pack(ddl_body(lsn, ts, op, space.definition))
            except Exception as e:
                self._refuse(entry, space, e)
            self._log_change(record, ts, entry)
        else:
            self._count_change(entry)

    def _check_open(self) -> None:
        if not self._opened:
            raise EngineError("the engine is not open")

    def _refuse(self, entry: Undo, space: Space, e: Exception) -> NoReturn:
        UNDO[entry[0]](self.catalog, *entry[1:])
        raise UnloggableChange(f"change to space {space.name!r} not made: {e}") from e

    def _log_change(self, record: bytes, ts: float, entry: Undo) -> None:
        # Encoded when made, not at take time: what is logged is the row as it was.
        self._last_lsn += 1
        self.last_ts = ts
        self._frames.append(encode_frame(record))
        self._undo.append(entry)

    def _journal_incoming(self, entry: Undo) -> None:
        """A replicated change goes to the WAL as the primary's own frame; any
        other change is refused while this engine is not writable."""
        frame = self._take_incoming()
        if frame is None:
            UNDO[entry[0]](self.catalog, *entry[1:])
            raise ReadOnlyChange("change not made: this instance is read-only")
        self._last_lsn += 1
        if self._log:
            self._frames.append(frame)
        self._undo.append(entry)

    def apply_replicated(self, frame: bytes, body: dict[str, object]) -> None:
        """Make the primary's change `body` (whose WAL frame is `frame`) here, with
        its LSN; it is written with the next batch. ReplicationError if it does
        not follow this engine's last LSN or does not apply."""
        lsn = body["lsn"]
        if lsn != self._last_lsn + 1:
            raise ReplicationError(f"LSN {lsn} does not follow LSN {self._last_lsn}")
        self._incoming = frame
        try:
            apply_record(self.catalog, body)
        finally:
            # Through a call: read here, mypy (and the compiled build) would take
            # _incoming for the bytes just assigned, though a hook took it.
            unused = self._take_incoming()
        if unused is not None:  # the op changed nothing a hook saw (a temporary space)
            raise ReplicationError(f"LSN {lsn}: {body['op']} changed nothing here")
        self.last_ts = body["ts"]  # type: ignore[assignment]

    def _take_incoming(self) -> bytes | None:
        frame, self._incoming = self._incoming, None
        return frame

    def _count_change(self, entry: Undo) -> None:
        if not self._opened:
            UNDO[entry[0]](self.catalog, *entry[1:])
            raise UnloggableChange("change not made: the engine is not open")
        self._last_lsn += 1

    # -- group commit --
    def has_pending(self) -> bool:
        return self._doomed is not None or self._last_lsn != self._taken_lsn

    def take_batch(self) -> Batch | None:
        """Seal every change made since the last take (loop thread)."""
        if self._doomed is not None:
            doomed, self._doomed = self._doomed, None
            return doomed
        if self._last_lsn == self._taken_lsn:
            return None
        self._prune()
        data = b"".join(self._frames)  # of one frame: that frame, not a copy
        batch = Batch(self._taken_lsn + 1, self._last_lsn, data, self._undo, last_ts=self.last_ts)
        self._frames, self._undo = [], []
        self._taken_lsn = batch.last_lsn
        if self._log:
            self._inflight.append(batch)
        else:
            # Nothing to write: durable as far as wal_mode "none" goes.
            batch.written = True
            self._written_ts = batch.last_ts
            self._written_lsn = batch.last_lsn
        return batch

    def write_batch(self, batch: Batch) -> None:
        """One write (and one fsync in fsync mode) of the batch. SYNCHRONOUS: call
        it on the writer thread, one batch at a time, in take order. Raises
        WalWriteError; the file is then left as it was before the batch."""
        if batch.written:
            return
        if batch.cancelled:
            raise WalWriteError(f"batch {batch.first_lsn}..{batch.last_lsn} was rolled back")
        if batch.first_lsn != self._written_lsn + 1:
            raise WalWriteError(
                f"batch {batch.first_lsn}..{batch.last_lsn} does not follow LSN"
                f" {self._written_lsn}: an earlier batch failed and must be rolled back"
            )
        if not self._opened:
            raise WalWriteError("the engine is closed")
        self._wal.append(batch.first_lsn, batch.data)
        batch.written = True
        self._written_ts = batch.last_ts
        self._written_lsn = batch.last_lsn

    def rollback(self, batch: Batch) -> int:
        """Undo a batch whose write failed, with every change made after it (loop
        thread). Returns the first LSN undone: fail every request waiting for it
        or a later one."""
        if batch.written:
            raise EngineError("a written batch cannot be rolled back")
        if batch.cancelled:
            return batch.first_lsn
        try:
            at = next(i for i, b in enumerate(self._inflight) if b is batch)
        except StopIteration:
            raise EngineError("rollback of a batch this engine does not have in flight") from None
        victims = self._inflight[at:]
        undo = [entry for b in victims for entry in b.undo] + self._undo
        for kind, space, old, new in reversed(undo):
            UNDO[kind](self.catalog, space, old, new)
        for b in victims:
            b.cancelled = True
            b.undo = []
        del self._inflight[at:]
        if self._last_lsn != self._taken_lsn and self._doomed is None:
            self._doomed = Batch(self._taken_lsn + 1, self._last_lsn, b"", [], cancelled=True)
        self._frames, self._undo = [], []
        self._last_lsn = self._taken_lsn = batch.first_lsn - 1
        self.last_ts = None  # of an undone record: unknown now
        return batch.first_lsn

    def _prune(self) -> None:
        inflight = self._inflight
        while inflight and inflight[0].written:
            inflight.pop(0).undo = []

    # -- snapshots --
    def snapshot_due(self, now: float) -> bool:
        """True when a snapshot is due (Checkpoints.due; never before open() nor
        while one runs). `now` is the server's monotonic time."""
        if not self._opened:
            return False
        changed = self._durable() != self._checkpoints.lsn
        return self._checkpoints.due(now, self._wal.bytes_written, changed)

    def _durable(self) -> int:
        # In wal_mode "none" nothing waits for a write: every change counts.
        return self._written_lsn if self._log else self._last_lsn

    @property
    def wal_bytes_since_snapshot(self) -> int:
        return self._wal.bytes_written - self._checkpoints.wal_mark

    def begin_snapshot(self) -> SnapshotJob:
        """Capture the state as of the durable LSN (loop thread, cheap: pointer
        copies). Run job.run() on a worker thread, then finish_snapshot(job)."""
        if not self._opened:
            raise EngineError("the engine is not open")
        skipped = self._checkpoints.unfinished()
        if skipped is not None and skipped.finished:
            self.finish_snapshot(skipped)  # the caller skipped it: do it now
        self._prune()
        durable = self._durable()
        undo = [e for b in self._inflight if b.first_lsn > durable for e in b.undo]
        undo += self._undo
        ts = self._written_ts if self._log else self.last_ts
        return self._checkpoints.begin(
            durable, capture(self.catalog, undo), self._wal.bytes_written, ts
        )

    def finish_snapshot(self, job: SnapshotJob) -> list[str]:
        """After job.run() (loop thread), whether it succeeded or raised: on success
        keep the newest checkpoint_count snapshots, remove older ones and the WAL
        segments the oldest kept one covers. Returns the names of the files removed."""
        if not self._checkpoints.settle(job):
            return []
        cut = self._cut_segment(job.lsn)
        needed = self.retain_after() if self._log else None
        return self._checkpoints.retire(job.lsn, cut, needed, self._log)

    def _cut_segment(self, lsn: int) -> int | None:
        """After a snapshot at `lsn` while nothing was written since and the writer
        thread is idle (every batch taken is written): start the next segment, so
        a start from this snapshot opens only that one instead of passing over
        every record the snapshot holds. Returns its first LSN, or None. Only a
        shortcut: if the new segment cannot be made, the next write makes it."""
        if not self._log or not self._taken_lsn == self._written_lsn == lsn:
            return None
        with contextlib.suppress(WalWriteError):
            if self._wal.rotate(lsn + 1):
                return lsn + 1
        return None
