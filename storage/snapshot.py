"""Snapshots: a consistent view captured on the loop, written on a worker thread.

Owns: capturing the state as of the last durable LSN (cheaply, on the loop
thread), and writing it as a `.snap` file: to `.snap.inprogress`, fsync,
rename, fsync of the directory (FORMAT.md section 5.3), as a stream of
records no bigger than `record_size` (whole tuples in `rows` records, a
tuple too big for one in `part` records: FORMAT.md §5.3.1), so a state of
any size can be written.

Must not touch: the live spaces after capture (run() only reads the copied
lists and definitions), the WAL, threads (run() is synchronous; the server
decides where it runs).

Why the view is "as of the durable LSN": the loop keeps changing spaces while
batches are in flight, and an in-flight batch may still fail and be rolled
back. The capture copies each space's tuple list (a pointer copy) and then
walks the undo entries of every change not yet durable, newest first, to
note what each touched key held before: run() writes those old values
instead. The file thus holds exactly the changes up to its LSN.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from queuebox.protocol.rawmsgpack import array_head
from queuebox.protocol.walformat import encode_frame, encode_header

from .errors import SnapshotError
from .fileio import FileIO
from .layout import file_name
from .records import pack
from .space import Key, Space, SpaceDef

DEFAULT_RECORD_SIZE = 1 << 20  # the most bytes a snapshot record's body holds
MIN_RECORD_SIZE = 4 << 10  # room for a record's keys and a part of a tuple
_FLUSH_BYTES = 4 << 20  # write to the file in pieces of about this size

# Undo entries, as the engine keeps them: (kind, space, old row, new row).
TUPLE, CREATE, DROP = "tuple", "create", "drop"
Undo = tuple[str, Space, Any, Any]


@dataclass
class SpaceView:
    definition: SpaceDef
    rows: list[bytes]  # the space's rows (rows.py): each a tuple's file form
    key_of: Callable[[bytes], Key]
    # primary key -> the row durable at the snapshot's LSN (None: absent)
    overrides: dict[Key, bytes | None] = field(default_factory=dict)


def capture(spaces: Iterable[Space], undo_not_durable: list[Undo]) -> list[SpaceView]:
    """The state at the durable LSN: current spaces minus the changes in `undo_not_durable`
    (oldest first, as made). Runs on the loop thread: O(tuples) pointer copies plus
    O(changes not yet durable)."""
    views: dict[int, SpaceView] = {id(s): _view(s) for s in spaces}
    for kind, space, old, new in reversed(undo_not_durable):
        if kind == TUPLE:
            view = views.get(id(space))
            if view is not None:
                # Newest first: the last assignment is the oldest change's `old`.
                row = old if old is not None else new
                assert row is not None
                view.overrides[view.key_of(row)] = old
        elif kind == CREATE:
            views.pop(id(space), None)
        else:  # DROP: the space object still holds its rows as of the drop
            views[id(space)] = _view(space)
    return sorted(views.values(), key=lambda v: v.definition.id)


def _view(space: Space) -> SpaceView:
    rows = [] if space.temporary else space.copy_rows()
    return SpaceView(space.definition, rows, space.row_key)


@dataclass
class SnapshotResult:
    path: Path
    lsn: int
    tuples: int
    size: int


class SnapshotJob:
    """Made by Engine.begin_snapshot(); run() once, then Engine.finish_snapshot()."""

    def __init__(
        self,
        files: FileIO,
        directory: Path,
        lsn: int,
        views: list[SpaceView],
        needed: bool,
        wal_mark: int,
        ts: float | None = None,
        record_size: int = DEFAULT_RECORD_SIZE,
    ) -> None:
        if record_size < MIN_RECORD_SIZE:
            raise ValueError(f"record_size must be at least {MIN_RECORD_SIZE}, not {record_size}")
        self.files = files
        self.record_size = record_size
        self.lsn = lsn
        self.ts = ts  # of the WAL record at `lsn` (FORMAT.md §5.3), if known
        self.path = directory / file_name("snap", lsn)
        self.views = views
        # False when a snapshot of this very LSN already exists: nothing to write.
        self.needed = needed
        self.wal_mark = wal_mark  # the engine's WAL byte count at capture
        self.result: SnapshotResult | None = None
        self.error: BaseException | None = None
        self.finished = False  # run() returned or raised

    def run(self) -> SnapshotResult | None:
        """Write the file (synchronous; for a worker thread). Raises SnapshotError."""
        try:
            if not self.needed:
                return None
            tmp = self.path.with_name(file_name("inprogress", self.lsn))
            try:
                self.result = self._write(tmp)
            except OSError as e:
                self.error = e
                with contextlib.suppress(OSError):
                    self.files.unlink(tmp)
                raise SnapshotError(f"snapshot {self.path} not written: {e}") from e
            return self.result
        finally:
            self.views = []  # let the copied lists go
            self.finished = True

    def _write(self, tmp: Path) -> SnapshotResult:
        out = _Appender(self.files, self.files.create(tmp))
        try:
            out.add(encode_header("snap", self.lsn))
            for view in self.views:
                d = view.definition
                out.add(
                    _frame({"op": "create_space", "sid": d.id, "space": d.name, "def": d.to_wire()})
                )
            count = 0
            for view in self.views:
                if not view.definition.temporary:
                    rows = RowsWriter(out, view.definition, self.record_size)
                    count += rows.write(_rows(view))
            end: dict[str, object] = {"op": "end", "spaces": len(self.views), "count": count}
            if self.ts is not None:
                end["ts"] = self.ts
            out.add(_frame(end))
            out.flush()
            self.files.fsync(out.fd)
        finally:
            out.close()
        # Only a complete, durable file ever gets the real name.
        self.files.rename(tmp, self.path)
        self.files.fsync_dir(self.path.parent)
        return SnapshotResult(self.path, self.lsn, count, out.offset)


def _frame(body: dict[str, Any]) -> bytes:
    return encode_frame(pack(body))


def _rows(view: SpaceView) -> list[bytes]:
    """The view's rows as of the snapshot's LSN."""
    rows = view.rows
    if view.overrides:
        key_of, overrides = view.key_of, view.overrides
        rows = [row for row in rows if key_of(row) not in overrides]
        rows.extend(row for row in overrides.values() if row is not None)
    return rows


class RowsWriter:
    """One space's rows as records of at most `limit` body bytes: whole rows
    in `rows` records, and a row too big for one of its own cut into `part`
    records (FORMAT.md §5.3.1).

    A row is already its tuple's file form (rows.py), so a `rows` record is
    its head, an array head and the rows joined: nothing is encoded again."""

    def __init__(self, out: _Appender, definition: SpaceDef, limit: int) -> None:
        self.out = out
        self.sid, self.space = definition.id, definition.name
        # {"op": "rows", "sid", "space", "tuples": []} without the empty array:
        # an array of rows completes it.
        self.head = pack({"op": "rows", "sid": self.sid, "space": self.space, "tuples": []})[:-1]
        self.limit = limit

    def write(self, rows: list[bytes]) -> int:
        room = self.limit - len(self.head) - len(array_head(1 << 16))  # the widest head
        batch: list[bytes] = []
        size = 0
        for row in rows:
            if size + len(row) > room and batch:
                self._rows(batch)
                batch, size = [], 0
            if len(row) > room:
                with memoryview(row) as whole:
                    self._parts(whole)
                continue
            batch.append(row)
            size += len(row)
        if batch:
            self._rows(batch)
        return len(rows)

    def _rows(self, batch: list[bytes]) -> None:
        self.out.add(encode_frame(b"".join((self.head, array_head(len(batch)), *batch))))

    def _parts(self, data: memoryview) -> None:
        size = len(data)
        keys = {"op": "part", "sid": self.sid, "space": self.space, "size": size, "at": size}
        # An empty bin's head is 2 bytes, the widest 5.
        step = self.limit - len(pack({**keys, "bytes": b""})) - 3
        for at in range(0, size, step):
            keys["at"] = at
            self.out.add(_frame({**keys, "bytes": data[at : at + step]}))


class _Appender:
    """Buffers frames and writes them in big pieces."""

    def __init__(self, files: FileIO, fd: int) -> None:
        self.files = files
        self.fd = fd
        self.offset = 0
        self._pending: list[bytes] = []
        self._pending_size = 0

    def add(self, data: bytes) -> None:
        self._pending.append(data)
        self._pending_size += len(data)
        if self._pending_size >= _FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        data = b"".join(self._pending)
        self._pending, self._pending_size = [], 0
        self.files.write_all(self.fd, data, self.offset)
        self.offset += len(data)

    def close(self) -> None:
        self.files.close(self.fd)
