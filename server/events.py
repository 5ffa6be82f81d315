"""Task-change events for clients: the long call `queue.tube.<t>:events(since, opts)`.

Owns: the subscription call (resolved before the queue's own names, on a
primary and a replica alike), its streams, the pushes they send and the
final answer. Must not touch: the queue (a stream reads WAL records and, for
tubes without any, the changes the ChangeHub hears), the WAL's format
(storage/walfeed.py reads it), sockets (pushes go through the session's
outlet, as replication's do).

    queue.tube.jobs:events(since, {timeout = s})
      pushes: IPROTO chunks (code 0x80, the call's sync, as box.session.push),
      each one event in DATA:
        {"event": "take", "lsn": 42, "ts": 1700000000.25, "tube": "jobs",
         "task": [id, "t", data]}                        a change (drivers/events.py)
        {"event": "beat", "lsn": 57}                     the position, at the start
                                                         and after a quiet interval
        {"event": "drop", "lsn": 60, "tube": "jobs"}     the tube is gone; the end
      answer, when the stream ends (timeout, drop, shutdown, or the same
      connection's queuebox.events.stop(sync)): [position]

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
from collections.abc import Callable, Sized
from typing import Any, cast

from queuebox.drivers.driver import DRIVERS
from queuebox.drivers.events import (
    Normalize,
    ReadBack,
    TaskChange,
    normalizer,
    record_change,
)
from queuebox.drivers.tubes import QUEUE_SPACE
from queuebox.protocol import ErrorCode, encode_packed_chunk
from queuebox.storage.batch import Batch
from queuebox.storage.errors import EngineError
from queuebox.storage.packed import spliced
from queuebox.storage.walfeed import WalCursor, records_of

from .app import App
from .config import READ
from .errors import CallError
from .logs import get_logger
from .registry import Bound, CallContext, Handler
from .session import Outlet, Session
from .store import Store

log = get_logger("queuebox.events")

HIGH_WATER = 1 << 20  # unsent bytes to one subscriber before its stream waits
READ_CHUNK = 1 << 20  # WAL bytes read back per step
MEMORY_BACKLOG = 10_000  # events of a tube without WAL waiting for a slow reader
METHOD = "events"
STOP = "queuebox.events.stop"  # a stream's own connection ends it early
Gone = Callable[[dict[str, Any]], Any]  # a record -> the task it deleted, if known


def lost(why: str) -> CallError:
    """A stream that cannot go on without a gap: the client must read the
    tube's state again (select, peek) and subscribe anew."""
    return CallError(ErrorCode.ER_PROC_LUA, f"events lost: {why}")


class Stream:
    """One subscription: what it pushed up to (`position`), and how it waits."""

    def __init__(
        self, service: EventService, session: Session, sync: int, tube: str, deadline: float
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


class EventService:
    def __init__(self, app: App) -> None:
        self.app = app
        self.heartbeat_s = app.config.events_heartbeat_s
        self.streams: set[Stream] = set()
        self._prefixes = tuple(f"{ns}.tube." for ns in app.config.queue_namespaces)

    def install(self) -> None:
        # First: a replica's view answers every other queue name itself.
        self.app.registry.add_resolver(self.resolve, first=True)
        self.app.registry.register(STOP, self._stop, READ, read_only_ok=True)
        self.app.add_stopping_listener(self.stop_all)

    def attach(self, store: Store) -> None:
        """Stream from `store` (at start, and after a re-bootstrap loaded it anew)."""
        self.engine = store.engine

    def detach(self) -> None:
        """Before the store closes: every stream ends (its client resumes from
        its position once the next store is open)."""
        self.stop_all()

    def _stop(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        """queuebox.events.stop(sync): end this connection's stream of that sync
        (it answers its position); [true] if there was one."""
        sync = args[0] if args else None
        for stream in self.streams:
            if stream.session.conn_id == ctx.conn_id and stream.sync == sync:
                stream.stop()
                return [True]
        return [False]

    def stop_all(self) -> None:
        for stream in list(self.streams):
            stream.stop()

    def subscribers(self) -> dict[str, int]:
        """Open streams per tube (metrics)."""
        counts: dict[str, int] = {}
        for stream in self.streams:
            counts[stream.tube] = counts.get(stream.tube, 0) + 1
        return counts

    # -- the call --
    def resolve(self, name: str) -> Bound | None:
        prefix = next((p for p in self._prefixes if name.startswith(p)), None)
        if prefix is None:
            return None
        tube, sep, method = name[len(prefix) :].partition(":")
        if not sep or method != METHOD or not tube or "." in tube:
            return None
        return Bound(self._handler(name, tube), READ, tube, pushes=True)

    def _tube(self, tube: str) -> tuple[str, str, bool] | None:
        """(space name, driver type, temporary) of a tube, from the stored registry."""
        registry = self.engine.catalog.get(QUEUE_SPACE)
        row = registry.get((tube,)) if registry is not None else None
        if row is None:
            return None
        space = self.engine.catalog.get(row[2])
        return row[2], row[3], space is None or space.temporary

    def exists(self, tube: str) -> bool:
        return self._tube(tube) is not None

    def _handler(self, name: str, tube: str) -> Handler:
        def subscribe(ctx: CallContext, args: list[Any]) -> Any:
            found = self._tube(tube)
            if found is None:
                raise CallError(ErrorCode.ER_NO_SUCH_PROC, f"Procedure '{name}' is not defined")
            since, timeout = _arguments(args)
            session = cast(Session, ctx)
            if session.outlet is None:
                raise CallError(ErrorCode.ER_UNSUPPORTED, "events need a connection to push to")
            space, driver, temporary = found
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout if timeout is not None else float("inf")
            common = (self, session, session.sync, tube, deadline)
            if temporary or self.engine.wal_mode == "none":
                if since is not None:
                    why = "is temporary" if temporary else "is on a server with wal_mode none"
                    raise lost(
                        f"tube '{tube}' {why}: its changes are never written, so a stream "
                        "of them cannot resume; subscribe without since"
                    )
                return self._run(MemoryStream(*common))
            written = self.engine.durable_lsn
            if since is not None and since > written:
                raise lost(f"LSN {since} is ahead of this server's {written} (another history?)")
            stream = WalStream(
                *common,
                space=space,
                normalize=normalizer(DRIVERS.get(driver)),
                since=written if since is None else since,
            )
            return self._run(stream)

        return subscribe

    async def _run(self, stream: Stream) -> list[Any]:
        self.streams.add(stream)
        log.info("events subscribed", tube=stream.tube, conn_id=stream.session.conn_id)
        try:
            await stream.run()
        finally:
            self.streams.discard(stream)
        return [stream.position]

    # -- live: every written batch --
    def audience(self) -> tuple[Sized, Callable[[Any], None]]:
        """`written` with whom it is for (Durability calls it only while there is one)."""
        return self.streams, self.written

    def written(self, batch: Any) -> None:
        """Every batch written here while a stream is open (build.py's
        Durability checks `streams`, the audience, before it calls)."""
        live = [s for s in self.streams if isinstance(s, WalStream) and s.live]
        if not live:
            return
        try:
            bodies = records_of(batch.data)
        except EngineError:
            bodies = None
        gone = _removed_by(batch)
        for stream in live:
            if bodies is None:
                stream.live = False  # read it from disk, where the damage is reported
                stream.wake.set()
            else:
                stream.written(batch, bodies, gone)


def _removed_by(batch: Batch) -> Gone:
    """The tasks a written batch deleted, in its order, from its undo entries:
    a delete record holds only the key (FORMAT.md §5.2, version 4)."""
    removed: dict[tuple[str, Any], deque[Any]] = {}
    for _kind, space, old, new in batch.undo:
        if new is None and old is not None:  # rows (storage/rows.py)
            task = space.tuple_of(old)
            removed.setdefault((space.name, task[0]), deque()).append(task)

    def gone(body: dict[str, Any]) -> Any:
        if body["op"] != "delete":
            return None
        tasks = removed.get((body["space"], body["key"][0]))
        return tasks.popleft() if tasks else None

    return gone


def _arguments(args: list[Any]) -> tuple[int | None, float | None]:
    """(since, timeout) of events(since, opts)."""
    since = args[0] if args else None
    if since is not None and (type(since) is not int or since < 0):
        raise CallError(
            ErrorCode.ER_PROC_LUA, "events: since must be an LSN (an unsigned integer) or nil"
        )
    opts = args[1] if len(args) > 1 else None
    if opts is None:
        return since, None
    if not isinstance(opts, dict) or set(opts) - {"timeout"}:
        raise CallError(ErrorCode.ER_PROC_LUA, "events: opts are {timeout = seconds}")
    timeout = opts.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0
    ):
        raise CallError(ErrorCode.ER_PROC_LUA, "events: timeout must be a number of seconds")
    return since, timeout
