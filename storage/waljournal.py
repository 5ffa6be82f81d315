"""The WAL journal: every change to the spaces, from the moment it is made until
its WAL write is known (the half of the engine between memory and the WAL).

Owns: LSN assignment, the pending batch (WAL frames and undo entries of the
changes made since the last take), the batches in flight, rollback after a
failed write, and the changes a replica takes from its primary (with the
primary's frames). Must not touch: asyncio, threads, sockets, wall time (the
engine passes its `clock`), files other than through the WalWriter it is
given, the data directory, recovery and snapshots (engine.py).

A batch's life (LSNs are given when a change is made, so a request knows the
LSN it waits for as soon as its handler returns):

    pending --take_batch--> in flight --write_batch ok--> written (durable)
                                 \\--write_batch fails--> rollback(batch)
    or, overlapping syncs (fsync mode, the server's group commit):
    in flight --append_batch--> on file --sync_batch ok, then batch_synced--> written
                     \\--fails: rollback(batch)   \\--fails: rollback(the oldest not written)
    A batch on file but not synced is not written: rollback takes it (the
    WalWriter gives up the file's unsynced tail: WalWriter.forget_unsynced).
    rollback(batch) undoes, newest first, every change with LSN >= batch.first_lsn:
    the pending changes, every later batch already taken, and the batch itself
    (later changes may build on the failed ones, so they cannot stay). LSNs are
    then given again from batch.first_lsn, so the WAL stays gapless. Every
    request whose change was undone must fail; the journal helps a server that
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

from collections.abc import Callable
from typing import Any, NoReturn

from queuebox.protocol.walformat import frame_head

from .batch import DDL_UNDO_KIND, UNDO, Batch
from .catalog import Catalog
from .errors import (
    EngineError,
    ReadOnlyChange,
    ReplicationError,
    UnloggableChange,
    WalWriteError,
)
from .records import change_record, ddl_body, packer
from .replicated import apply_record
from .snapshot import TUPLE, Undo
from .space import Space
from .wal import WalWriter


class WalJournal:
    """The changes of one catalog on their way to the WAL `wal` (log=False:
    wal_mode "none", nothing is written). The engine opens and closes it
    (`_opened`) and sets its LSNs after recovery."""

    def __init__(self, wal: WalWriter, log: bool, clock: Callable[[], float]) -> None:
        self._wal = wal
        self._log = log
        self._clock = clock  # wall time for record timestamps, from the server
        self.catalog = Catalog(on_change=self._on_change, on_space=self._on_space)
        self._opened = False
        # LSNs: written <= taken <= last (given to the newest change).
        self._last_lsn = 0
        self._taken_lsn = 0
        self._written_lsn = 0  # durable: advanced by write_batch or batch_synced
        self._appended_lsn = 0  # on file, maybe not synced (append_batch), or 0
        self._frames: list[bytes] = []  # the pending frames' bytes, in pieces
        self._pack = packer()  # records are encoded on the loop thread only
        self._undo: list[Undo] = []
        self._inflight: list[Batch] = []  # taken, not yet known written, oldest first
        self._doomed: Batch | None = None  # stands for pending changes a rollback undid
        # A replica (or a fenced primary) takes changes only from its primary:
        # apply_replicated() hands the hooks the primary's frame in _incoming.
        self.writable = True
        self._incoming: bytes | None = None
        # The timestamp of the record at last_lsn (None: unknown, e.g. a start
        # from a snapshot alone): with the LSN it names one history, so a
        # primary can tell a replica that wrote other records at the same LSNs.
        self.last_ts: float | None = None
        self._written_ts: float | None = None  # of the record at the durable LSN

    # -- LSNs --
    @property
    def last_lsn(self) -> int:
        """LSN of the newest change in memory (a request's change waits for it)."""
        return self._last_lsn

    @property
    def durable_lsn(self) -> int:
        """Every change up to this LSN is durable under wal_mode."""
        return self._written_lsn

    # -- the change hooks (loop thread) --
    def _on_change(self, space: Space, op: str, old: Any, new: Any) -> None:
        # old, new: the space's rows (rows.py), spliced into the record as they are.
        entry: Undo = (TUPLE, space, old, new)
        if self._to_encode(entry):
            lsn, ts = self._last_lsn + 1, self._clock()
            try:
                record = change_record(self._pack, lsn, ts, op, space, old, new)
            except Exception as e:
                self._refuse(entry, space, e)
            self._log_change(record, ts, entry)

    def _on_space(self, op: str, space: Space) -> None:
        entry: Undo = (DDL_UNDO_KIND[op], space, None, None)
        if self._to_encode(entry):
            lsn, ts = self._last_lsn + 1, self._clock()
            try:
                record = self._pack(ddl_body(lsn, ts, op, space.definition))
            except Exception as e:
                self._refuse(entry, space, e)
            self._log_change(record, ts, entry)

    def _to_encode(self, entry: Undo) -> bool:
        """True if the hook encodes this change's record and logs it. Else the
        change is journaled with the primary's frame (or refused: read-only),
        or counted only (wal_mode "none")."""
        if self._incoming is not None or not self.writable:
            self._journal_incoming(entry)
            return False
        if not self._log:
            self._count_change(entry)
            return False
        if not self._opened:
            self._refuse(entry, entry[1], EngineError("the engine is not open"))
        return True

    def _refuse(self, entry: Undo, space: Space, e: Exception) -> NoReturn:
        UNDO[entry[0]](self.catalog, *entry[1:])
        raise UnloggableChange(f"change to space {space.name!r} not made: {e}") from e

    def _log_change(self, record: bytes, ts: float, entry: Undo) -> None:
        # Encoded when made, not at take time: what is logged is the row as it was.
        self._last_lsn += 1
        self.last_ts = ts
        # Head and body kept apart: take_batch joins the batch's pieces in one go,
        # so a record is not copied once more into a frame of its own.
        frames = self._frames
        frames.append(frame_head(record))
        frames.append(record)
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
        data = b"".join(self._frames)
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
        it on one thread at a time, in take order, with no batch appended and
        not yet synced (append_batch). Raises
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

    def can_append(self, batch: Batch) -> bool:
        """May `batch` be appended now and synced later (append_batch)? Not
        when it needs a new WAL segment or a repair: write_batch it then, with
        nothing else in flight."""
        return self._log and self._opened and self._wal.can_write(len(batch.data))

    def append_batch(self, batch: Batch) -> tuple[int, bool]:
        """Write `batch` after the last one appended, without its sync (loop
        thread, take order); sync_batch then makes it durable and
        batch_synced says so. Returns what those two need. Raises WalWriteError."""
        if batch.cancelled:
            raise WalWriteError(f"batch {batch.first_lsn}..{batch.last_lsn} was rolled back")
        if batch.first_lsn != max(self._appended_lsn, self._written_lsn) + 1:
            raise WalWriteError(
                f"batch {batch.first_lsn}..{batch.last_lsn} does not follow the WAL's end:"
                " an earlier batch failed and must be rolled back"
            )
        if not self._opened:
            raise WalWriteError("the engine is closed")
        ticket = self._wal.write(batch.data)
        self._appended_lsn = batch.last_lsn
        return ticket

    def sync_batch(self, slot: int, ticket: tuple[int, bool]) -> None:
        """Sync every batch appended so far on sync slot `slot` (a sync worker
        thread, one per slot at a time). Raises WalWriteError."""
        self._wal.sync(slot, ticket[1])

    def batch_synced(self, batch: Batch, ticket: tuple[int, bool]) -> None:
        """A sync begun after `batch` was appended returned, and so did every
        earlier batch's (loop thread, in WAL order): `batch` is durable."""
        self._wal.synced(ticket[0])
        batch.written = True
        self._written_ts = batch.last_ts
        self._written_lsn = batch.last_lsn

    @property
    def broken(self) -> str | None:
        """Why the WAL accepts no write until a restart (wal.py's `broken`), or None."""
        return self._wal.broken

    def cut_unsynced(self) -> str | None:
        """After a failed write or sync, once no sync runs (loop thread): the
        file's tail past the last synced batch goes now (WalWriter.cut_unsynced).
        Returns why it could not (the failed batches may come back at a start,
        and nothing more is written), or None."""
        if self._log and not self._wal.cut_unsynced():
            return self._wal.broken
        return None

    @property
    def sync_slots(self) -> int:
        """How many syncs may run at once (0: append_batch is never used)."""
        return self._wal.sync_slots if self._log else 0

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
        if self._appended_lsn >= batch.first_lsn:
            # Appended, not synced: the file's tail past the last synced batch
            # is given up (the next write_batch cuts it away first).
            self._appended_lsn = 0
            self._wal.forget_unsynced()
        self.last_ts = None  # of an undone record: unknown now
        return batch.first_lsn

    def _prune(self) -> None:
        inflight = self._inflight
        while inflight and inflight[0].written:
            inflight.pop(0).undo = []

    def _durable(self) -> int:
        # In wal_mode "none" nothing waits for a write: every change counts.
        return self._written_lsn if self._log else self._last_lsn
