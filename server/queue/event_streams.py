"""The streams of task-change events: one subscription each, what it pushed up
to, and how it waits for more.

Owns: `Stream` (pushes, beats, the drop, the wait), `WalStream` (a tube whose
changes are written: read back from the WAL, then live from every written
batch) and `MemoryStream` (a tube whose changes are never written), and the
`lost` error a stream that cannot go on without a gap answers. Must not
touch: the subscription call and its arguments (events.py), the queue, the
WAL's format (storage/walfeed.py reads it), sockets (pushes go through the
session's outlet).

A non-temporary tube's events are its WAL records (each names its event,
FORMAT.md §5.2), so an event goes out only once written, never for a change
a failed write undid, and its position is its LSN. since=N resumes after
record N: read back from the WAL, then live, as a replica's feed does:

    from the WAL ──(reached what is written)──▶ live: every written batch
         ▲                                          │
         └──(a batch skipped ahead, or the client reads too slowly)

A beat's LSN says every record up to it was looked at: resuming from it is
resuming without a gap. A position the WAL no longer holds (retention:
checkpoint_count) is answered with an error, never skipped silently. A
temporary tube's changes are never written (with wal_mode none, nobody's
are): its events come from the queue as they happen, with lsn nil; such a
stream cannot resume, and a since for it is refused.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, cast

from queuebox.drivers.events import Normalize, ReadBack, TaskChange, record_change
from queuebox.protocol import ErrorCode, encode_packed_chunk
from queuebox.storage.engine import Engine
from queuebox.storage.errors import EngineError
from queuebox.storage.packed import spliced
from queuebox.storage.walfeed import WalCursor, records_of

from ..core.app import App
from ..core.session import Outlet, Session
from ..runtime.errors import CallError

HIGH_WATER = 1 << 20  # unsent bytes to one subscriber before its stream waits
READ_CHUNK = 1 << 20  # WAL bytes read back per step
MEMORY_BACKLOG = 10_000  # events of a tube without WAL waiting for a slow reader
Gone = Callable[[dict[str, Any]], Any]  # a record -> the task it deleted, if known


class Service(Protocol):
    """What a stream reads of the service that made it (events.EventService)."""

    app: App
    engine: Engine
    heartbeat_s: float

    def exists(self, tube: str) -> bool: ...


def lost(why: str) -> CallError:
    """A stream that cannot go on without a gap: the client must read the
    tube's state again (select, peek) and subscribe anew."""
    return CallError(ErrorCode.ER_PROC_LUA, f"events lost: {why}")


class Stream:
    """One subscription: what it pushed up to (`position`), and how it waits."""

    def __init__(
        self, service: Service, session: Session, sync: int, tube: str, deadline: float
    ) -> None:
        assert session.outlet is not None
        self.service = service
        self.session = session
        self.outlet: Outlet = session.outlet
        self.sync = sync
        self.tube = tube
        self.deadline = deadline
        self.position: int | None = None
        self.wake = asyncio.Event()
        self.stopped = False
        self.dropped = False
        self._loop = asyncio.get_running_loop()
        self._quiet_since = self._loop.time()

    def ended(self) -> bool:
        return (
            self.stopped
            or self.dropped
            or self.session.closed.done()
            or self._loop.time() >= self.deadline
        )

    def push(self, event: dict[str, Any]) -> None:
        self.outlet.send(
            encode_packed_chunk(self.sync, self.session.schema_version, 1, spliced([event]))
        )
        self._quiet_since = self._loop.time()

    def beat(self) -> None:
        self.push({"event": "beat", "lsn": self.position})

    def drop(self, lsn: int | None) -> None:
        self.push({"event": "drop", "lsn": lsn, "tube": self.tube})
        self.dropped = True

    def stop(self) -> None:
        self.stopped = True
        self.wake.set()

    async def pause(self) -> None:
        """Until woken, the next beat is due, the deadline, or the client left."""
        beat_at = self._quiet_since + self.service.heartbeat_s
        timeout = max(0.0, min(beat_at, self.deadline) - self._loop.time())
        waiter: asyncio.Future[Any] = asyncio.ensure_future(self.wake.wait())
        closed: asyncio.Future[Any] = self.session.closed
        try:
            await asyncio.wait({waiter, closed}, timeout=timeout)
        finally:
            waiter.cancel()
        self.wake.clear()
        if self._loop.time() >= beat_at and not self.ended():
            if not self.service.exists(self.tube):
                self.drop(self.position)
            else:
                self.beat()

    async def run(self) -> None:
        raise NotImplementedError


class WalStream(Stream):
    """A tube whose changes are WAL records: read back, then live."""

    def __init__(self, *args: Any, space: str, normalize: Normalize, since: int) -> None:
        super().__init__(*args)
        self.space = space
        self.normalize = normalize
        self.position = since
        self.live = False
        # A delete record holds only the task's key (FORMAT.md §5.2, version 4):
        # the tasks this stream read put while reading back from disk, so that
        # their ack/delete/ttl events carry their data as live ones do.
        self.read_back = ReadBack()

    async def run(self) -> None:
        engine = self.service.engine
        cursor: WalCursor | None = None
        self.beat()
        try:
            while not self.ended():
                if self.outlet.unsent() > HIGH_WATER:
                    await asyncio.sleep(0.005)
                elif self.live:
                    await self.pause()
                else:
                    cursor = self._cursor(cursor)
                    data = cursor.read(READ_CHUNK)
                    if data:
                        self.records(records_of(data), self.read_back)
                    elif cast(int, self.position) >= engine.durable_lsn:
                        self.live = True  # no await since the read: no batch slipped by
                        self.read_back = ReadBack()  # live deletes come with their tasks
                    else:
                        await asyncio.sleep(0.002)  # written, not yet reported
        except EngineError as exc:
            raise lost(f"{exc}; read the tube again and subscribe without since") from None
        finally:
            if cursor is not None:
                cursor.close()

    def _cursor(self, cursor: WalCursor | None) -> WalCursor:
        if cursor is not None and cursor.next_lsn == cast(int, self.position) + 1:
            return cursor
        if cursor is not None:
            cursor.close()
        return self.service.engine.wal_cursor(cast(int, self.position))

    def records(self, bodies: list[dict[str, Any]], gone: Gone) -> None:
        """Push the events of this tube's records; the position passes every record.
        `gone(body)`: the task a delete record removed, if known."""
        for body in bodies:
            lsn = body["lsn"]
            if lsn <= cast(int, self.position):
                continue
            if body["space"] == self.space:
                if body["op"] == "drop_space":
                    self.position = lsn
                    self.drop(lsn)
                    return
                change = record_change(self.tube, body, self.normalize, gone(body))
                if change is not None:
                    self.push(event_of(change))
            self.position = lsn

    def written(self, batch: Any, bodies: list[dict[str, Any]], gone: Gone) -> None:
        """A batch was written: its events, if it follows this stream's position."""
        position = cast(int, self.position)
        if batch.last_lsn <= position:
            return
        if batch.first_lsn != position + 1 or self.outlet.unsent() > HIGH_WATER:
            self.live = False  # back to the WAL on disk, from the position on
        else:
            self.records(bodies, gone)
            if not self.dropped:
                self.position = batch.last_lsn
        self.wake.set()


class MemoryStream(Stream):
    """A tube whose changes are not written: its changes as the queue makes them."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.pending: deque[dict[str, Any]] = deque()
        self.overflow = False

    def hear(self, changes: list[TaskChange]) -> None:
        for change in changes:
            if change.tube != self.tube:
                continue
            if len(self.pending) >= MEMORY_BACKLOG:
                self.overflow = True
                break
            event = event_of(change)
            event["ts"] = time.time()
            self.pending.append(event)
        self.wake.set()

    async def run(self) -> None:
        hub = self.service.app.changes
        hub.add(self.hear)
        try:
            self.beat()
            while not self.ended():
                if self.overflow:
                    raise lost(f"the client read too slowly ({MEMORY_BACKLOG} events waiting)")
                while self.pending and self.outlet.unsent() <= HIGH_WATER:
                    self.push(self.pending.popleft())
                if self.pending:
                    await asyncio.sleep(0.005)
                else:
                    await self.pause()
        finally:
            hub.remove(self.hear)


def event_of(change: TaskChange) -> dict[str, Any]:
    return {
        "event": change.event,
        "lsn": change.lsn,
        "ts": change.ts,
        "tube": change.tube,
        "task": change.task,
    }
