"""Recovery: rebuild the spaces from a snapshot and the WAL after it.

Owns: choosing the snapshot (the newest one that reads whole; a damaged one
falls back to the previous one), the order of segments, what damage means (a
torn tail of the last segment is cut off with a warning, its preallocated
zero tail without one; corruption and gaps
in the LSNs stop the start unless force_recovery; with no consistent base
left, the start stops even with it), the highest LSN seen on disk, progress
reports, and the final bulk build of every index (staging.py holds the rows
until then). What it found goes into a RecoveryReport (recovery_report.py).

Must not touch: writing records (only truncating a torn tail and removing
leftovers), the engine's pending changes, the clock (durations come from the
injected timer).

What "consistent" means (FORMAT.md §7): a base (a snapshot that reads whole,
or the empty state when the WAL starts at LSN 1), then every LSN after it
with no gap, up to at least the LSN the newest snapshot file covers.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path

from queuebox.protocol.walformat import HEADER_SIZE, HeaderError

from .catalog import Catalog
from .errors import CorruptLog, LsnGap, Unrecoverable
from .fileio import FileIO
from .framing import Damage
from .layout import Listing, sort_listing
from .reader import LogFile, Record
from .records import BadBody
from .recovery_report import RecoveryReport
from .space import StorageError
from .staging import WAL_APPLY, BadRecord, Stage, create_space, staged_space
from .walreplay import FastReplay

Progress = Callable[[int, int, float], None]  # (records, bytes, seconds)
SKIPS_LISTED = 20  # a forced start past a lost space definition may skip thousands


class Recovery:
    # Seconds between progress calls: often, so a caller can stop a long recovery
    # at once (a signal); it decides how often to log.
    PROGRESS_EVERY = 0.1

    def __init__(
        self,
        files: FileIO,
        directory: Path,
        *,
        force: bool,
        progress: Progress | None,
        timer: Callable[[], float],
    ) -> None:
        self.files = files
        self.dir = directory
        self.force = force
        self.progress = progress
        self.timer = timer
        self.report = RecoveryReport()
        self._records = 0
        self._bytes = 0
        self._unchecked = 0
        self._t0 = 0.0
        self._next_progress = 0.0
        self._wal_end = 0  # the highest LSN the segments read hold (or imply)
        self._skips = 0

    def run(self, catalog: Catalog) -> RecoveryReport:
        """Fill `catalog` (which must be empty) from the directory."""
        self._t0 = self.timer()
        self._next_progress = self._t0 + self.PROGRESS_EVERY
        listing = sort_listing(self.dir, self.files.listdir(self.dir))
        for _, path in listing.inprogress:
            self.files.unlink(path)
            self.report.warnings.append(f"removed unfinished snapshot {path.name}")
        stage = self._base(listing)
        self._replay(listing, stage)
        if listing.snap:
            self._check_reach(*listing.snap[-1])
        self._build(catalog, stage)
        del stage
        release_free_heap()
        self._note_highest()
        if self._skips > SKIPS_LISTED:
            self.report.skipped.append(f"and {self._skips - SKIPS_LISTED} more damages skipped")
        self.report.seconds = self.timer() - self._t0
        return self.report

    # -- the base: a snapshot, or the empty state --
    def _base(self, listing: Listing) -> Stage:
        report = self.report
        for lsn, path in reversed(listing.snap):
            try:
                stage = self._read_snapshot(path, lsn)
            except CorruptLog as e:
                report.damaged_snapshots.append(path)
                report.warnings.append(f"snapshot not used: {e}")
                continue
            report.snapshot = str(path)
            report.snapshot_lsn = report.last_lsn = lsn
            if report.damaged_snapshots:
                report.warnings.append(f"recovering from the older snapshot {path.name} instead")
            return stage
        self._check_empty_base(listing)
        if report.damaged_snapshots:
            report.warnings.append("recovering from the WAL alone, from LSN 1")
        return {}

    def _check_empty_base(self, listing: Listing) -> None:
        """The empty state is a base only where the WAL starts at LSN 1 (or nothing is
        on disk at all): else the space definitions are gone with the missing LSNs."""
        first = listing.wal[0][0] if listing.wal else None
        if first == 1 or (first is None and not listing.snap):
            return
        damaged = self.report.damaged_snapshots
        why = (
            f"no snapshot is usable ({', '.join(p.name for p in damaged)} damaged)"
            if damaged
            else "there is no snapshot"
        )
        wal = "there is no WAL" if first is None else f"the WAL starts at LSN {first}, not 1"
        raise Unrecoverable(f"{why} and {wal}: nothing consistent to start from in {self.dir}")

    def _read_snapshot(self, path: Path, lsn: int) -> Stage:
        log = self._open(path)
        if log.header.kind != "snap" or log.header.lsn != lsn:
            raise CorruptLog(str(path), 0, "header does not match the file name")
        stage: Stage = {}
        spaces = tuples = 0
        for ev in log.events():
            if isinstance(ev, Damage):
                raise CorruptLog(str(path), ev.offset, ev.reason)
            body = ev.body
            op = body["op"]
            if op == "end":
                if (body["spaces"], body["count"]) != (spaces, tuples):
                    raise CorruptLog(str(path), ev.offset, "end record counts do not match")
                self.report.snapshot_tuples = tuples
                self.report.last_ts = body.get("ts")
                self._tick(ev.end - ev.offset)
                return stage
            try:
                if op == "create_space":
                    create_space(stage, body)
                    spaces += 1
                else:
                    staged_space(stage, body).add_rows(body["tuples"])
                    tuples += len(body["tuples"])
            except (BadRecord, BadBody) as e:
                raise CorruptLog(str(path), ev.offset, str(e)) from None
            self._tick(ev.end - ev.offset)
        raise CorruptLog(str(path), log.size, "no end record: the snapshot is incomplete")

    # -- WAL --
    def _replay(self, listing: Listing, stage: Stage) -> None:
        report = self.report
        wal = listing.wal
        start = 0
        for i, (first, _) in enumerate(wal):
            if first <= report.snapshot_lsn + 1:
                start = i  # the last segment that can hold snapshot_lsn + 1
        needed = wal[start:]
        fast = FastReplay(stage, self._tick_many)
        for i, (first, path) in enumerate(needed):
            # A segment named F follows one that ended at F - 1.
            self._wal_end = max(self._wal_end, first - 1)
            if first > report.last_lsn + 1:
                self._gap(report.last_lsn + 1, first - 1, f"the WAL jumps to {path.name}")
            self._replay_segment(path, first, is_last=i == len(needed) - 1, stage=stage, fast=fast)
            report.wal_segments += 1

    def _replay_segment(
        self, path: Path, name_lsn: int, *, is_last: bool, stage: Stage, fast: FastReplay
    ) -> None:
        try:
            log = LogFile(path, self.files)
        except HeaderError as e:
            if is_last and self._unwritten_header(path):
                self.files.unlink(path)
                self.report.warnings.append(f"removed {path.name}: cut short while being created")
                return
            self._damaged(path, e.offset, e.reason)
            return
        if log.header.kind != "wal" or log.header.lsn != name_lsn:
            self._damaged(path, 0, "header does not match the file name")
            return
        # The records the snapshot covers are counted, not decoded (reader.py).
        covered = max(0, self.report.snapshot_lsn - name_lsn + 1)
        applied = 0
        chunks = log.chunks(skip=covered, fast=fast)
        try:
            self._lend(fast)
            for chunk in chunks:
                applied += self._took(fast)
                for ev in chunk:
                    if isinstance(ev, Record):
                        applied += 1
                        self._apply(path, ev, stage)
                    elif ev.resume is None and is_last:
                        chunks.close()
                        self._cut_tail(path, ev, applied + log.skipped)
                        return
                    else:
                        self._damaged(path, ev.offset, ev.reason)
                self._lend(fast)
            if is_last and log.zero_tail is not None:
                # Preallocated space the writer never reached (a stop without
                # its close: a crash, kill -9): not damage. Cut, so the log ends
                # on its last record again for every reader.
                self.files.truncate(path, log.zero_tail)
        finally:
            if log.skipped:  # they held name_lsn, name_lsn + 1, ...
                self._wal_end = max(self._wal_end, name_lsn + log.skipped - 1)

    def _unwritten_header(self, path: Path) -> bool:
        """A file header cut short or still all zeros (preallocated before it was
        written): what a crash while a segment was being created leaves."""
        fd = self.files.open_read(path)
        try:
            head = self.files.read(fd, HEADER_SIZE)
        finally:
            self.files.close(fd)
        return len(head) < HEADER_SIZE or head.count(0) == HEADER_SIZE

    def _apply(self, path: Path, ev: Record, stage: Stage) -> None:
        offset, end, body = ev
        report = self.report
        lsn = body["lsn"]
        if lsn > self._wal_end:
            self._wal_end = lsn
        if lsn <= report.last_lsn:
            if lsn > report.snapshot_lsn:
                self._damaged(path, offset, f"LSN {lsn} after LSN {report.last_lsn}")
            return  # else: already in the snapshot
        if lsn != report.last_lsn + 1:
            self._gap(
                report.last_lsn + 1,
                lsn - 1,
                f"{path.name} offset {offset} holds LSN {lsn} after LSN {report.last_lsn}",
            )
        op = body["op"]
        try:
            WAL_APPLY[op](stage, body)
        except (BadRecord, BadBody, TypeError, IndexError) as e:
            self._damaged(path, offset, str(e) or type(e).__name__)
            return
        report.last_lsn = lsn
        report.last_ts = body["ts"]
        report.wal_records += 1
        report.wal_bytes += end - offset
        self._tick(end - offset)

    def _lend(self, fast: FastReplay) -> None:
        """Where the fast path starts: after what recovery applied so far."""
        fast.last_lsn = self.report.last_lsn
        fast.last_ts = self.report.last_ts

    def _took(self, fast: FastReplay) -> int:
        """What the fast path applied since _lend, now in the report; how many."""
        took = fast.records
        if took:
            report = self.report
            report.last_lsn = fast.last_lsn
            report.last_ts = fast.last_ts
            report.wal_records += took
            report.wal_bytes += fast.bytes
            self._wal_end = max(self._wal_end, fast.last_lsn)
            fast.records = fast.bytes = 0
        return took

    def _check_reach(self, newest: int, path: Path) -> None:
        """The WAL must reach the LSN the newest snapshot file covers: if it ends
        before, the segments after its end are missing (and what they held)."""
        report = self.report
        if report.snapshot_lsn == newest:
            if report.wal_segments == 0 or self._wal_end >= newest:
                return
            reach = self._wal_end
        else:
            reach = report.last_lsn
            if reach >= newest:
                return
        self._gap(reach + 1, newest, f"the WAL ends at LSN {reach}, before {path.name}")

    def _cut_tail(self, path: Path, ev: Damage, held: int) -> None:
        size = self.files.size(path)
        if held == 0:
            self.files.unlink(path)
            self.report.warnings.append(
                f"removed {path.name}: no whole record, {size - HEADER_SIZE} torn bytes"
                f" ({ev.reason} at offset {ev.offset})"
            )
            return
        self.files.truncate(path, ev.offset)
        self.report.warnings.append(
            f"torn tail of {path.name} cut off: {size - ev.offset} bytes from offset"
            f" {ev.offset} ({ev.reason})"
        )

    def _damaged(self, path: Path, offset: int, reason: str) -> None:
        """Corruption: stop, unless force_recovery, which notes it and goes on."""
        if not self.force:
            raise CorruptLog(str(path), offset, reason)
        self._skips += 1
        if self._skips <= SKIPS_LISTED:
            self.report.skipped.append(f"{path}: skipped damage at offset {offset}: {reason}")

    def _gap(self, first: int, last: int, where: str) -> None:
        """LSNs first..last are nowhere on disk: stop, unless force_recovery, which
        notes the loss and goes on as if they had been applied."""
        what = f"LSN {first}" if first == last else f"LSNs {first}..{last}"
        text = f"{what} missing from {self.dir}: {where}"
        damaged = self.report.damaged_snapshots
        if damaged:
            text += f" (recovering around the damaged {', '.join(p.name for p in damaged)})"
        if not self.force:
            raise LsnGap(first, last, text)
        self.report.lost.append(text)
        self.report.last_lsn = max(self.report.last_lsn, last)

    def _note_highest(self) -> None:
        # Files removed above (torn, empty) no longer count; damaged ones do.
        listing = sort_listing(self.dir, self.files.listdir(self.dir))
        names = [lsn for lsn, _ in listing.snap + listing.wal]
        if listing.wal and self.files.size(listing.wal[-1][1]) == HEADER_SIZE:
            # A segment a snapshot started (engine.py) names the LSN its first
            # record will have: none was given yet, and the next write reuses it.
            names[-1] -= 1
        report = self.report
        report.highest_lsn = max([report.last_lsn, self._wal_end, *names])

    # -- common --
    def _open(self, path: Path) -> LogFile:
        """A snapshot, its rows read as the bytes a space holds (reader.py)."""
        try:
            return LogFile(path, self.files, raw_rows=True)
        except HeaderError as e:
            raise CorruptLog(str(path), e.offset, e.reason) from None

    def _tick_many(self, records: int, size: int) -> None:
        """The fast path applied `records` records of `size` bytes."""
        self._records += records
        self._bytes += size
        self._unchecked = 0
        self._report_progress()

    def _tick(self, size: int) -> None:
        self._records += 1
        self._bytes += size
        self._unchecked += 1
        # Look at the timer now and then: every 1024 records or big record.
        if self._unchecked >= 1024 or size >= 1 << 16:
            self._unchecked = 0
            self._report_progress()

    def _report_progress(self) -> None:
        """Tell `progress` how far recovery got, at most every PROGRESS_EVERY."""
        if self.progress is not None:
            now = self.timer()
            if now >= self._next_progress:
                self._next_progress = now + self.PROGRESS_EVERY
                self.progress(self._records, self._bytes, now - self._t0)

    def _build(self, catalog: Catalog, stage: Stage) -> None:
        for staged in sorted(stage.values(), key=lambda s: s.definition.id):
            space = catalog.add(staged.definition, log=False)
            try:
                space.load_rows(staged.values())
            except StorageError as e:
                raise CorruptLog(str(self.dir), 0, f"recovered rows of {space.name!r}: {e}") from e
            self.report.tuples += len(space)
        self.report.spaces = len(stage)


def release_free_heap() -> None:
    """Hand the C heap's free pages back to the OS (glibc's malloc_trim).

    Recovery allocates and frees big temporaries (decode buffers, staging
    dicts); glibc keeps such memory in its heap, which showed as ~25 extra
    resident bytes per task after a million-task start. Elsewhere: a no-op.
    """
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)
