"""Recovery: rebuild the spaces from the newest snapshot and the WAL after it.

Owns: choosing the snapshot, the order of segments, what damage means (a torn
tail of the last segment is cut off with a warning; anything else stops the
start unless force_recovery), progress reports, and the final bulk build of
every index.

Must not touch: writing records (only truncating a torn tail and removing
leftovers), the engine's pending changes, the clock (durations come from the
injected timer).

Why staging: replaying a million records one index insert at a time costs
seconds per index. Instead each space's rows are kept in a plain dict by
primary key while records are applied (O(1) each), and every index is then
built with one sort (Space.load_many).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from .catalog import Catalog
from .errors import CorruptLog
from .fileio import FileIO
from .framing import HEADER_SIZE, Damage, HeaderError
from .layout import Listing, sort_listing
from .reader import LogFile, Record
from .records import BadBody, space_def
from .space import SpaceDef, StorageError, Tuple

Progress = Callable[[int, int, float], None]  # (records, bytes, seconds)


@dataclass
class RecoveryReport:
    snapshot: str | None = None
    snapshot_lsn: int = 0
    snapshot_tuples: int = 0
    wal_segments: int = 0
    wal_records: int = 0  # records replayed (LSN after the snapshot)
    wal_bytes: int = 0  # their framed size
    last_lsn: int = 0
    spaces: int = 0
    tuples: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # torn tails cut, leftovers removed
    skipped: list[str] = field(default_factory=list)  # damage passed over by force_recovery


SHORT = 16  # characters: statuses, utube names; never payloads


class _Staged:
    """One space during recovery: its rows as a list, or keyed once the WAL touches it."""

    def __init__(self, definition: SpaceDef) -> None:
        self.definition = definition
        # Applied to each tuple as it is decoded, see _first_share.
        self.share: Callable[[Tuple], Tuple] = self._first_share
        self._sharer: Callable[[Tuple], Tuple] | None = None
        # The bare field for one-part keys: no per-row key tuple to allocate.
        self.key_of: Callable[[Tuple], Any] = itemgetter(*definition.indexes[0].parts)
        self.rows: list[Tuple] | None = []
        self.by_key: dict[Any, Tuple] | None = None

    def keyed(self) -> dict[Any, Tuple]:
        if self.by_key is None:
            key_of = self.key_of
            self.by_key = {key_of(t): t for t in self.rows or ()}
            self.rows = None
        return self.by_key

    def values(self) -> list[Tuple]:
        return list(self.by_key.values()) if self.by_key is not None else self.rows or []

    def _first_share(self, t: Tuple) -> Tuple:
        """Make equal short strings one object, from now on.

        msgpack gives every decoded string its own object: a million tasks of
        utube "consumer-7" would each carry their own copy, where tasks made
        at run time share one. Fields that are short strings in the first tuple
        (a space keeps each field's type) are rebuilt with a shared object, as
        each tuple is decoded, so the unshared copy dies at once.
        """
        if self._sharer is None:
            self._sharer = _sharer(t)
            self.share = self._sharer
        return self._sharer(t)


def _sharer(first: Tuple) -> Callable[[Tuple], Tuple]:
    # One-character strings are shared by CPython already.
    positions = [p for p, v in enumerate(first) if type(v) is str and 1 < len(v) <= SHORT]
    if not positions:
        return _unchanged
    canon: dict[str, str] = {}
    keep = canon.setdefault

    def share(t: Tuple) -> Tuple:
        fields = list(t)
        for p in positions:
            v = fields[p] if p < len(fields) else None
            if type(v) is str and len(v) <= SHORT:
                fields[p] = keep(v, v)
        return tuple(fields)

    return share


def _unchanged(t: Tuple) -> Tuple:
    return t


class _Bad(Exception):
    """A record that is whole but cannot be applied."""


Stage = dict[str, _Staged]


def _put(stage: Stage, body: dict[str, Any]) -> None:
    staged = _space(stage, body)
    t = staged.share(body["tuple"])
    staged.keyed()[staged.key_of(t)] = t


def _delete(stage: Stage, body: dict[str, Any]) -> None:
    staged = _space(stage, body)
    staged.keyed().pop(staged.key_of(body["tuple"]), None)


def _create(stage: Stage, body: dict[str, Any]) -> None:
    d = space_def(body)
    if d.name in stage:
        raise _Bad(f"create_space of existing space {d.name!r}")
    stage[d.name] = _Staged(d)


def _drop(stage: Stage, body: dict[str, Any]) -> None:
    _space(stage, body)
    del stage[body["space"]]


def _space(stage: Stage, body: dict[str, Any]) -> _Staged:
    staged = stage.get(body["space"])
    if staged is None:
        raise _Bad(f"{body['op']} in unknown space {body['space']!r}")
    return staged


_PUTS = frozenset(("insert", "replace"))
WAL_APPLY: dict[str, Callable[[Stage, dict[str, Any]], None]] = {
    "insert": _put,
    "replace": _put,
    "delete": _delete,
    "create_space": _create,
    "drop_space": _drop,
}


class Recovery:
    PROGRESS_EVERY = 1.0  # seconds between progress calls

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

    def run(self, catalog: Catalog) -> RecoveryReport:
        """Fill `catalog` (which must be empty) from the directory."""
        self._t0 = self.timer()
        self._next_progress = self._t0 + self.PROGRESS_EVERY
        listing = sort_listing(self.dir, self.files.listdir(self.dir))
        for _, path in listing.inprogress:
            self.files.unlink(path)
            self.report.warnings.append(f"removed unfinished snapshot {path.name}")
        stage = self._load_snapshot(listing)
        self._replay(listing, stage)
        self._build(catalog, stage)
        del stage
        release_free_heap()
        self.report.seconds = self.timer() - self._t0
        return self.report

    # -- snapshot --
    def _load_snapshot(self, listing: Listing) -> Stage:
        for lsn, path in reversed(listing.snap):
            try:
                stage = self._read_snapshot(path, lsn)
            except CorruptLog as e:
                if not self.force:
                    raise
                self.report.skipped.append(f"snapshot not used: {e}")
                continue
            self.report.snapshot = str(path)
            self.report.snapshot_lsn = self.report.last_lsn = lsn
            return stage
        return {}

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
                self._tick(ev.end - ev.offset)
                return stage
            try:
                if op == "create_space":
                    _create(stage, body)
                    spaces += 1
                else:
                    staged = _space(stage, body)
                    assert staged.rows is not None
                    staged.rows.extend(map(staged.share, body["tuples"]))
                    tuples += len(body["tuples"])
            except (_Bad, BadBody) as e:
                raise CorruptLog(str(path), ev.offset, str(e)) from None
            self._tick(ev.end - ev.offset)
        raise CorruptLog(str(path), log.size, "no end record: the snapshot is incomplete")

    # -- WAL --
    def _replay(self, listing: Listing, stage: Stage) -> None:
        snap_lsn = self.report.snapshot_lsn
        wal = listing.wal
        start = 0
        for i, (first, _) in enumerate(wal):
            if first <= snap_lsn + 1:
                start = i  # the last segment that can hold snap_lsn + 1
        needed = wal[start:]
        if needed and needed[0][0] > snap_lsn + 1:
            self.report.warnings.append(
                f"WAL resumes at LSN {needed[0][0]} after LSN {snap_lsn}: the changes in"
                " between were never written (wal_mode = none) or their segment is missing"
            )
        for i, (first, path) in enumerate(needed):
            self._replay_segment(path, first, is_last=i == len(needed) - 1, stage=stage)
            self.report.wal_segments += 1

    def _replay_segment(self, path: Path, name_lsn: int, *, is_last: bool, stage: Stage) -> None:
        try:
            log = LogFile(path, self.files)
        except HeaderError as e:
            if is_last and self.files.size(path) < HEADER_SIZE:
                self.files.unlink(path)
                self.report.warnings.append(f"removed {path.name}: cut short while being created")
                return
            self._damaged(path, e.offset, e.reason)
            return
        if log.header.kind != "wal" or log.header.lsn != name_lsn:
            self._damaged(path, 0, "header does not match the file name")
            return
        held = 0
        chunks = log.chunks()
        for chunk in chunks:
            for ev in chunk:
                if isinstance(ev, Record):
                    held += 1
                    self._apply(path, ev, stage)
                elif ev.resume is None and is_last:
                    chunks.close()
                    self._cut_tail(path, ev, held)
                    return
                else:
                    self._damaged(path, ev.offset, ev.reason)

    def _apply(self, path: Path, ev: Record, stage: Stage) -> None:
        offset, end, body = ev
        report = self.report
        lsn = body["lsn"]
        if lsn <= report.last_lsn:
            if lsn > report.snapshot_lsn:
                self._damaged(path, offset, f"LSN {lsn} after LSN {report.last_lsn}")
            return  # else: already in the snapshot
        op = body["op"]
        staged = stage.get(body["space"])
        if op in _PUTS and staged is not None and staged.by_key is not None:
            # The common case, inline: a million of these is a WAL-only start.
            t = staged.share(body["tuple"])
            staged.by_key[staged.key_of(t)] = t
        else:
            try:
                WAL_APPLY[op](stage, body)
            except (_Bad, BadBody, TypeError, IndexError) as e:
                self._damaged(path, offset, str(e))
                return
        report.last_lsn = lsn
        report.wal_records += 1
        report.wal_bytes += end - offset
        self._tick(end - offset)

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
        self.report.skipped.append(f"{path}: skipped damage at offset {offset}: {reason}")

    # -- common --
    def _open(self, path: Path) -> LogFile:
        try:
            return LogFile(path, self.files)
        except HeaderError as e:
            raise CorruptLog(str(path), e.offset, e.reason) from None

    def _tick(self, size: int) -> None:
        self._records += 1
        self._bytes += size
        self._unchecked += 1
        # Look at the timer now and then: every 1024 records or big record.
        if self.progress is not None and (self._unchecked >= 1024 or size >= 1 << 16):
            self._unchecked = 0
            now = self.timer()
            if now >= self._next_progress:
                self._next_progress = now + self.PROGRESS_EVERY
                self.progress(self._records, self._bytes, now - self._t0)

    def _build(self, catalog: Catalog, stage: Stage) -> None:
        for staged in sorted(stage.values(), key=lambda s: s.definition.id):
            space = catalog.add(staged.definition, log=False)
            try:
                space.load_many(staged.values())
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
