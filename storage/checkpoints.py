"""The snapshots of one data directory: when the next one is due, the one being
written, and which files a finished one lets go.

Owns: the two triggers (WAL bytes written since the last snapshot, time passed
with changes), the job in progress, the LSN of the newest snapshot, and the
retention rule (FORMAT.md §2): keep the newest `count` snapshots and every WAL
segment a start from the oldest kept one, or a replica, still needs.

Must not touch: the spaces, LSN assignment, the WAL writer (the engine passes
what it knows: the durable LSN, the bytes written, the segment it cut).
"""

from __future__ import annotations

from pathlib import Path

from .errors import EngineError
from .fileio import FileIO
from .layout import covered_segments, sort_listing
from .snapshot import SnapshotJob, SpaceView


class Checkpoints:
    """count: snapshots kept (at least 1). wal_bytes / interval_s: the triggers
    due() checks. record_size: the most bytes of a snapshot record."""

    def __init__(
        self,
        files: FileIO,
        data_dir: Path,
        *,
        count: int,
        wal_bytes: int,
        interval_s: float,
        record_size: int,
    ) -> None:
        if count < 1:
            raise ValueError(f"checkpoint_count must be at least 1, not {count}")
        self._files = files
        self._dir = data_dir
        self.count = count
        self.wal_bytes = wal_bytes
        self.interval_s = interval_s
        self.record_size = record_size
        self.lsn = 0  # of the newest snapshot, written or recovered from
        self.wal_mark = 0  # the WAL's bytes written when that snapshot was begun
        self._job: SnapshotJob | None = None
        self._interval_start: float | None = None

    @property
    def running(self) -> bool:
        return self._job is not None and not self._job.finished

    def due(self, now: float, wal_written: int, changed: bool) -> bool:
        """True when the WAL grew by `wal_bytes` since the last snapshot, or
        `interval_s` passed with changes. `now` is monotonic; the interval runs
        from the first call after a start or after the last finished snapshot."""
        if self.running:
            return False
        if self._interval_start is None:
            self._interval_start = now
        if wal_written - self.wal_mark >= self.wal_bytes:
            return True
        return changed and now - self._interval_start >= self.interval_s

    def begin(
        self, lsn: int, views: list[SpaceView], wal_mark: int, ts: float | None
    ) -> SnapshotJob:
        if self.running:
            raise EngineError("a snapshot is already in progress")
        self._job = SnapshotJob(
            self._files,
            self._dir,
            lsn,
            views,
            needed=lsn != self.lsn,
            wal_mark=wal_mark,
            ts=ts,
            record_size=self.record_size,
        )
        return self._job

    def unfinished(self) -> SnapshotJob | None:
        """A job that ran but was never finished (its caller skipped it)."""
        return self._job

    def settle(self, job: SnapshotJob) -> bool:
        """Forget `job` (after its run, whether it succeeded or raised); True when
        the state it captured is now on disk (written, or needed no file)."""
        if job is not self._job:
            raise EngineError("finish_snapshot of a job this engine did not begin")
        self._job = None
        if job.error is not None or (job.needed and job.result is None):
            return False
        self.lsn = max(self.lsn, job.lsn)
        self.wal_mark = job.wal_mark
        self._interval_start = None
        return True

    def retire(self, lsn: int, cut: int | None, needed: int | None, logged: bool) -> list[str]:
        """After a snapshot at `lsn`: remove the snapshots older than the newest
        `count`, and the WAL segments the oldest kept one covers, but none after
        `needed` (a replica reads them) and not the segment ending at `cut` (the
        one the engine just closed). Returns the names removed."""
        listing = sort_listing(self._dir, self._files.listdir(self._dir))
        kept = [at for at, _ in listing.snap if at <= lsn][-self.count :]
        oldest = kept[0] if kept else lsn
        doomed = [p for at, p in listing.snap if at < oldest]
        if logged:
            # The segment this snapshot cut stays as it would have while being
            # written: a damaged newest snapshot can still fall back to it.
            wal = [w for w in listing.wal if cut is None or w[0] < cut]
            doomed += covered_segments(wal, oldest if needed is None else min(oldest, needed))
        else:
            # No WAL is written in this mode: every segment is older than the state
            # in memory, and a kept one would look like a WAL cut short at the next start.
            doomed += [p for _, p in listing.wal]
        removed = []
        for path in doomed:
            try:
                self._files.unlink(path)
            except OSError:
                continue  # harmless: retried after the next snapshot
            removed.append(path.name)
        return removed
