"""The primary's side of replication: join, subscribe, acks.

Owns the three calls a replica makes (the `replication` right, which admin
does not include; a replica logs in as `replication_user`):

- `queuebox.replication.join(uuid, sync)`: the newest snapshot file, pushed
  in chunks (IPROTO chunk replies with the replica's `sync`); the answer is
  [snapshot LSN, bytes] ([0, 0] when the WAL from LSN 1 is all it needs).
- `queuebox.replication.subscribe(uuid, after_lsn, sync, after_ts)`: the WAL frames
  after `after_lsn`, pushed as [`"wal"`, last LSN, frames], read from disk
  until the feed reaches what is written, then handed over live as each
  batch is written; [`"beat"`, written LSN, b""] every `replication_timeout`
  seconds of quiet. The call answers only when the feed ends (an error: the
  LSN is gone from the WAL, or the replica diverged: ahead of this primary,
  or its record at `after_lsn` (timestamp `after_ts`) is not this primary's).
- `queuebox.replication.ack(uuid, lsn)`: the replica wrote up to `lsn`
  (for the quorum of synchronous replication). Counted only when it comes
  on the connection that holds that replica's subscribed feed, for an LSN
  the feed has sent; from anywhere else (another session, any user) it is
  refused and counts for nothing: an ack is the replica's word that the
  records are in its WAL, and only the stream that carried them can give it.
- `queuebox.backup.join(sync)` and `queuebox.backup.subscribe(after_lsn, sync)`:
  the same snapshot and the same feed for `queuebox backup` (server/start/backup.py),
  served on a read-only replica too (they change nothing here), and kept out of
  the in-sync set: a backup never acknowledges, so it is not a replica.

    from disk ──(cursor reached the written LSN)──▶ live ──(a batch did not
        ▲                                              follow, or the replica
        └──────────────────────────────────────────────reads too slowly)

Must not touch: the WAL format (storage/walfeed.py reads it), queue calls.
The WAL a connected replica still needs is kept at snapshots
(`engine.retain_after`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sized
from typing import Any, cast

from queuebox.protocol import ErrorCode, encode_reply
from queuebox.protocol.constants import KEY_DATA, RESPONSE_CHUNK
from queuebox.storage.engine import Engine
from queuebox.storage.errors import EngineError
from queuebox.storage.walfeed import FileChunks

from ..core.app import App
from ..core.registry import CallContext
from ..core.session import Outlet, Session
from ..runtime.errors import CallError
from ..runtime.logs import get_logger
from ..settings.config import REPLICATION
from .quorum import Quorum

log = get_logger("queuebox.replication")

HIGH_WATER = 4 << 20  # unsent bytes to one replica before its feed pauses
SNAPSHOT_CHUNK = 1 << 20


def push(outlet: Outlet, sync: int, schema: int, kind: str, lsn: int, payload: bytes) -> None:
    outlet.send(encode_reply(RESPONSE_CHUNK, sync, schema, {KEY_DATA: [kind, lsn, payload]}))


def arguments(args: list[Any], usage: str, *kinds: type) -> list[Any]:
    """The call's arguments if they are of `kinds` (ints not negative), else
    ER_ILLEGAL_PARAMS naming the usage: never a traceback for a bad call."""
    good = len(args) == len(kinds) and all(
        type(a) is k and not (type(a) is int and a < 0) for a, k in zip(args, kinds, strict=False)
    )
    if not good:
        raise CallError(ErrorCode.ER_ILLEGAL_PARAMS, f"usage: queuebox.replication.{usage}")
    return args


class Feed:
    """One subscribed replica."""

    def __init__(
        self, session: Session, replica: str, after: int, sync: int, backup: bool = False
    ) -> None:
        assert session.outlet is not None
        self.backup = backup  # a `queuebox backup`, not a replica: no place in the in-sync set
        self.session = session
        self.outlet = session.outlet
        self.replica = replica
        self.sync = sync
        self.sent = after  # the LSN of the last frame pushed
        self.live = False
        self.stopped = False
        self.wake = asyncio.Event()

    def push(self, kind: str, lsn: int, payload: bytes) -> None:
        push(self.outlet, self.sync, self.session.schema_version, kind, lsn, payload)

    def stop(self) -> None:
        self.stopped = True
        self.wake.set()


class Feeds:
    def __init__(self, app: App, engine: Engine, quorum: Quorum) -> None:
        self.app = app
        self.engine = engine
        self.quorum = quorum
        self.feeds: dict[str, Feed] = {}
        self.joining: dict[str, int] = {}  # replica -> snapshot LSN it is loading
        engine.retain_after = self._retain

    def install(self) -> None:
        registry = self.app.registry
        # replace: the feeds of a re-bootstrapped engine take over the names (build.py).
        registry.register("queuebox.replication.join", self._join, REPLICATION, replace=True)
        registry.register(
            "queuebox.replication.subscribe", self._subscribe, REPLICATION, replace=True
        )
        registry.register(
            "queuebox.replication.ack", self._ack, REPLICATION, read_only_ok=True, replace=True
        )
        for name, call in (("join", self._backup_join), ("subscribe", self._backup_subscribe)):
            registry.register(
                f"queuebox.backup.{name}", call, REPLICATION, read_only_ok=True, replace=True
            )
        # At a shutdown the feeds end first, so they do not hold it for its grace.
        self.app.add_stopping_listener(self.stop_all)

    def stop_all(self) -> None:
        for feed in list(self.feeds.values()):
            feed.stop()

    def _retain(self) -> int | None:
        needed = [f.sent for f in self.feeds.values()] + list(self.joining.values())
        return min(needed) if needed else None

    # -- live --
    def audience(self) -> tuple[Sized, Callable[[Any], None]]:
        """`written` with whom it is for (Durability calls it only while there is one)."""
        return self.feeds, self.written

    def written(self, batch: Any) -> None:
        """Every batch written here while a replica is subscribed (build.py's
        Durability checks `feeds`, the audience, before it calls)."""
        self.quorum.insync.written(batch.last_lsn)
        for feed in self.feeds.values():
            if not feed.live or batch.last_lsn <= feed.sent:
                continue
            if batch.first_lsn == feed.sent + 1 and feed.outlet.unsent() < HIGH_WATER:
                feed.push("wal", batch.last_lsn, batch.data)
                feed.sent = batch.last_lsn
            else:
                feed.live = False  # back to the disk, from feed.sent on
                feed.wake.set()
                log.info(
                    "replica behind: its feed reads the WAL", replica=feed.replica, lsn=feed.sent
                )

    # -- the calls --
    def _check_source(self, what: str = "replication") -> None:
        if self.engine.wal_mode == "none":
            raise CallError(
                ErrorCode.ER_UNSUPPORTED, f"{what} needs a WAL: wal_mode write or fsync"
            )

    def _ack(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        replica, lsn = arguments(args, "ack(uuid, lsn)", str, int)
        feed = self.feeds.get(replica)
        if feed is None or feed.session is not ctx:
            raise CallError(
                ErrorCode.ER_ACCESS_DENIED,
                f"an ack of replica {replica} counts only on its subscribed replication stream",
            )
        if lsn > feed.sent:
            raise CallError(
                ErrorCode.ER_ILLEGAL_PARAMS,
                f"ack of LSN {lsn}: replica {replica} was sent up to LSN {feed.sent}",
            )
        self.quorum.ack(replica, lsn)
        return []

    def _subscribe(self, ctx: CallContext, args: list[Any]) -> Any:
        self._check_source()
        usage = "subscribe(uuid, after_lsn, sync, after_ts)"
        ts = args.pop() if len(args) == 4 and type(args[3]) in (float, type(None)) else False
        replica, after, sync = arguments(args if ts is not False else [], usage, str, int, int)
        self._check_history(replica, after, ts)
        old = self.feeds.get(replica)
        if old is not None:
            old.stop()
        feed = self.feeds[replica] = Feed(cast(Session, ctx), replica, after, sync)
        self.joining.pop(replica, None)
        self.quorum.insync.connected(replica)
        log.info("replica subscribed", replica=replica, peer=feed.session.peer, after_lsn=after)
        return self._run(feed)

    def _backup_name(self, ctx: CallContext) -> str:
        return f"backup:{id(ctx)}"  # one backup per connection; never a replica's uuid

    def _backup_join(self, ctx: CallContext, args: list[Any]) -> Any:
        self._check_source("a backup")
        (sync,) = arguments(args, "backup.join(sync)", int)
        session, name = cast(Session, ctx), self._backup_name(ctx)
        # The WAL after the snapshot is kept for the subscribe that follows; a
        # backup that leaves before it must not hold the WAL for ever.
        session.closed.add_done_callback(lambda _: self.joining.pop(name, None))
        return self._send_snapshot(session, name, sync)

    def _backup_subscribe(self, ctx: CallContext, args: list[Any]) -> Any:
        """The feed a replica gets, from `after` on; the backup ends it by
        closing its connection once it has what it came for."""
        self._check_source()
        after, sync = arguments(args, "backup.subscribe(after_lsn, sync)", int, int)
        if after > self.engine.durable_lsn:
            raise CallError(
                ErrorCode.ER_ILLEGAL_PARAMS,
                f"after_lsn {after} is ahead of this server's {self.engine.durable_lsn}",
            )
        name = self._backup_name(ctx)
        feed = self.feeds[name] = Feed(cast(Session, ctx), name, after, sync, backup=True)
        self.joining.pop(name, None)
        log.info("backup subscribed", peer=feed.session.peer, after_lsn=after)
        return self._run(feed)

    def _check_history(self, replica: str, after: int, ts: float | None) -> None:
        """The replica's last record must be this primary's record at that LSN:
        same LSN, same timestamp. A replica ahead, or with other records at the
        same LSNs (a primary that wrote what never reached its replicas, then
        lost its place), has diverged: feeding it would mix two histories."""
        written = self.engine.durable_lsn
        if after > written:
            why = f"is at LSN {after}, ahead of this primary's {written}"
        elif ts is not None and after and self.engine.record_ts(after) not in (None, ts):
            why = f"has another record at LSN {after} than this primary"
        else:
            return
        raise CallError(
            ErrorCode.ER_PROC_LUA,
            f"replica {replica} {why}: it has changes the primary never had; "
            "it sets them aside and re-bootstraps",
        )

    async def _run(self, feed: Feed) -> list[Any]:
        try:
            await self._feed(feed)
        except EngineError as e:
            log.error("replica feed stopped", replica=feed.replica, error=str(e))
            raise CallError(
                ErrorCode.ER_PROC_LUA, f"{e}; the replica re-bootstraps from this primary"
            ) from None
        finally:
            if self.feeds.get(feed.replica) is feed:
                del self.feeds[feed.replica]
                if not feed.backup:
                    self.quorum.insync.disconnected(feed.replica)
            log.info("replica left", replica=feed.replica, sent_lsn=feed.sent)
        return [feed.sent]

    async def _feed(self, feed: Feed) -> None:
        closed = feed.session.closed
        beat = self.app.config.replication_timeout
        cursor = None
        while not closed.done() and not feed.stopped:
            feed.wake.clear()
            if feed.outlet.unsent() > HIGH_WATER:
                await asyncio.sleep(0.005)
                continue
            if feed.live:
                cursor = None
                waiter: asyncio.Future[Any] = asyncio.ensure_future(feed.wake.wait())
                done, _ = await asyncio.wait({waiter, closed}, timeout=beat)
                waiter.cancel()
                if not done:
                    feed.push("beat", self.engine.durable_lsn, b"")
                continue
            if cursor is None or cursor.next_lsn != feed.sent + 1:
                cursor = self.engine.wal_cursor(feed.sent)
            data = cursor.read()
            if data:
                feed.sent = cursor.next_lsn - 1
                feed.push("wal", feed.sent, data)
            elif feed.sent >= self.engine.durable_lsn:
                feed.live = True
                # Caught up: a beat now lets the replica acknowledge what it has,
                # so it can join the in-sync set before the next write.
                feed.push("beat", self.engine.durable_lsn, b"")
            else:
                await asyncio.sleep(0.002)  # a batch is between its sync and its report

    def _join(self, ctx: CallContext, args: list[Any]) -> Any:
        self._check_source()
        replica, sync = arguments(args, "join(uuid, sync)", str, int)
        return self._send_snapshot(cast(Session, ctx), replica, sync)

    async def _send_snapshot(self, session: Session, replica: str, sync: int) -> list[Any]:
        found = self.engine.newest_snapshot()
        if found is None:
            return [0, 0]  # the WAL from LSN 1 holds everything
        lsn, path = found
        self.joining[replica] = lsn
        outlet = session.outlet
        assert outlet is not None
        loop = asyncio.get_running_loop()
        sent = 0
        log.info("replica joining", replica=replica, peer=session.peer, snapshot=path.name)
        chunks = FileChunks(self.engine.files, path)
        try:
            while not session.closed.done():
                chunk = await loop.run_in_executor(None, chunks.read, SNAPSHOT_CHUNK)
                if not chunk:
                    break
                push(outlet, sync, session.schema_version, "snap", lsn, chunk)
                sent += len(chunk)
                while outlet.unsent() > HIGH_WATER and not session.closed.done():
                    await asyncio.sleep(0.005)
        finally:
            chunks.close()
        return [lsn, sent]
