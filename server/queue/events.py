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

A non-temporary tube's events are its WAL records, a temporary tube's come
from the queue as they happen: event_streams.py, which draws how a stream
reads back from the WAL and then goes live.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sized
from typing import Any, cast

from queuebox.drivers import reads
from queuebox.drivers.callnames import CallPath, in_namespace
from queuebox.protocol import ErrorCode
from queuebox.storage.batch import Batch
from queuebox.storage.errors import EngineError
from queuebox.storage.walfeed import records_of

from ..core.app import App
from ..core.registry import Bound, CallContext, Handler
from ..core.session import Session
from ..core.store import Store
from ..runtime.errors import CallError
from ..runtime.logs import get_logger
from ..settings.config import READ
from .event_streams import Gone, MemoryStream, Stream, WalStream, lost

log = get_logger("queuebox.events")

METHOD = "events"
STOP = "queuebox.events.stop"  # a stream's own connection ends it early


class EventService:
    def __init__(self, app: App) -> None:
        self.app = app
        self.heartbeat_s = app.config.events_heartbeat_s
        self.streams: set[Stream] = set()
        self._namespaces = app.config.queue_namespaces

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
    def resolve(self, name: str, path: CallPath) -> Bound | None:
        rest = in_namespace(path, self._namespaces)
        if rest is None or len(rest) != 2 or rest[0] != "tube" or path.method != METHOD:
            return None
        tube = rest[1]
        return Bound(self._handler(name, tube), READ, tube, pushes=True)

    def exists(self, tube: str) -> bool:
        return reads.tube(self.engine.catalog, tube) is not None

    def _handler(self, name: str, tube: str) -> Handler:
        def subscribe(ctx: CallContext, args: list[Any]) -> Any:
            catalog = self.engine.catalog
            found = reads.tube(catalog, tube)
            if found is None:
                raise CallError(ErrorCode.ER_NO_SUCH_PROC, f"Procedure '{name}' is not defined")
            since, timeout = _arguments(args)
            session = cast(Session, ctx)
            if session.outlet is None:
                raise CallError(ErrorCode.ER_UNSUPPORTED, "events need a connection to push to")
            temporary = reads.is_temporary(catalog, found)
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
                space=found.space,
                normalize=found.normalize(),
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
