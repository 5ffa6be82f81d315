"""The durable engine: spaces plus WAL, snapshots and recovery, behind one object.

Owns: the data directory lock, recovery at open (and the repair after a start
that went past damage), what a replication feed reads back from disk, and
when snapshots are due. The way of each change to the WAL (LSNs, batches,
rollback) is the WAL journal's (waljournal.py), the Engine's base class.

Must not touch: asyncio, threads, sockets, wall time (the server passes a
`clock`). Which thread calls what is the server's business; the contract:

    loop thread:    catalog/spaces (changes), has_pending, take_batch, rollback,
                    begin_snapshot, finish_snapshot, snapshot_due, open, close
    writer thread:  write_batch           (one at a time, batches in take order,
                                           nothing else in flight)
    loop thread:    append_batch, batch_synced (overlapping syncs, in take order)
    sync worker:    sync_batch(slot)      (one per slot at a time)
    worker thread:  SnapshotJob.run       (while the loop goes on)
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from .checkpoints import Checkpoints
from .errors import CorruptLog, DataDirLocked, EngineError, LsnUnavailable, WalWriteError
from .fileio import FileIO
from .layout import LOCK_NAME, sort_listing
from .recovery import Progress, Recovery
from .recovery_report import RecoveryReport
from .snapshot import DEFAULT_RECORD_SIZE, SnapshotJob, capture
from .wal import WalWriter
from .walfeed import WalCursor, first_record
from .waljournal import WalJournal

WAL_MODES = ("none", "write", "fsync")


class Engine(WalJournal):
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
        self._timer = timer  # only to measure recovery
        wal = WalWriter(self._files, self.data_dir, segment_size, wal_mode == "fsync")
        super().__init__(wal, wal_mode != "none", clock)
        self._lock_fd: int | None = None
        # The lowest LSN a replica still needs the WAL after (None: no replica):
        # finish_snapshot keeps the segments after it.
        self.retain_after: Callable[[], int | None] = lambda: None

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
        return WalCursor(self._files, self.data_dir, after_lsn, self._wal.written_end)

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

    @property
    def snapshot_lsn(self) -> int:
        return self._checkpoints.lsn

    # -- snapshots --
    def snapshot_due(self, now: float) -> bool:
        """True when a snapshot is due (Checkpoints.due; never before open() nor
        while one runs). `now` is the server's monotonic time."""
        if not self._opened:
            return False
        changed = self._durable() != self._checkpoints.lsn
        return self._checkpoints.due(now, self._wal.bytes_written, changed)

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
