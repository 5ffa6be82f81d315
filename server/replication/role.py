"""Which role this instance plays, and the moves between them.

Owns: starting as a primary (the queue built and served) or read-only (a
replica's applier, or `read_only`; the queue's reads served by view.py),
promotion, fencing, and the admin call `queuebox.promote`. The states, as
`queue.state()` reports them (the module's own names, drivers/queue_state.py):

    INIT ──start, primary──▶ STARTUP ──queue built──▶ RUNNING
    INIT ──start, read-only──▶ WAITING
    read-only (WAITING) ──promote──▶ STARTUP ──queue rebuilt──▶ RUNNING (primary)
                                     (the applier stopped, its last records
                                      written; taken tasks of sessions that
                                      did not survive released, as at a restart)
    RUNNING ──fence (the leader lease lost)──▶ WAITING, read-only for good:
            changes refused at once, replies waiting for a quorum fail

Must not touch: sockets (the applier's link and the feed's calls are theirs),
queue semantics (QueueCalls is built as a restart builds it), etcd (the
failover loop in failover.py drives promote/fence).
"""

from __future__ import annotations

import asyncio
from typing import Any

from queuebox.drivers.queue_state import RUNNING, STARTUP, WAITING
from queuebox.protocol import ErrorCode

from ..app import App
from ..config import ADMIN
from ..dispatch import CallContext
from ..errors import CallError, read_only_error
from ..logs import get_logger
from ..queue_calls import QueueCalls
from ..store import Store
from .applier import Applier
from .feed import Feeds
from .quorum import Quorum
from .view import ReplicaView

log = get_logger("queuebox.replication")


class Role:
    def __init__(self, app: App, store: Store, replica_id: str) -> None:
        self.app = app
        self.store = store
        self.engine = store.engine
        self.replica_id = replica_id
        config = app.config
        self.queue: QueueCalls | None = None
        self.view = ReplicaView(app, self.engine.catalog)
        self.quorum = Quorum(config.replication_synchro_quorum, config.replication_synchro_timeout)
        self.feeds = Feeds(app, self.engine, store.commit, self.quorum)
        self.applier: Applier | None = None
        self.fenced = False
        # Set by failover.py: promotion by hand is then refused (etcd decides).
        self.automatic = False
        self._promoting = asyncio.Lock()  # two promote calls at once build one queue

    def start(self) -> None:
        """Called once the engine is open, before the listener accepts."""
        self.feeds.install()
        if self.quorum.need:
            local = self.app.durability_barrier
            self.app.durability_barrier = lambda: self.quorum.barrier(local(), self.engine.last_lsn)
        self.app.registry.register("queuebox.promote", self._promote_call, ADMIN, read_only_ok=True)
        self.app.add_shutdown_hook(self.stop, first=True)
        if self.app.read_only:
            self.app.state = WAITING
            self.engine.writable = False
            self.view.install()
            sources = self.app.config.replication_source
            if sources:
                self.start_applier(sources)
        else:
            self.app.state = STARTUP
            self._build_queue()
            self.app.state = RUNNING

    async def stop(self) -> None:
        """At shutdown, before the store closes: nothing more is applied or fed."""
        self.feeds.stop_all()
        if self.applier is not None:
            await self.applier.stop()

    def start_applier(self, sources: tuple[tuple[str, int], ...]) -> None:
        if self.applier is None:
            self.applier = Applier(
                self.app.config, self.engine, self.store.commit.barrier, self.replica_id, sources
            )
            self.applier.start()
        else:
            self.applier.follow(sources)

    async def promote(self, why: str) -> dict[str, Any]:
        """Become the writable primary; the answer says from which LSN on."""
        async with self._promoting:
            return await self._promote(why)

    async def _promote(self, why: str) -> dict[str, Any]:
        app = self.app
        if self.fenced:
            raise CallError(
                ErrorCode.ER_PROC_LUA,
                "this instance lost its leader lease; restart it as a replica to rejoin",
            )
        if not app.read_only:
            return {"state": app.state, "lsn": self.engine.last_lsn, "promoted": False}
        app.state = STARTUP
        log.info("promoting to primary", why=why, lsn=self.engine.last_lsn)
        if self.applier is not None:
            await self.applier.stop()
            self.applier = None
        await self.store.commit.drain()  # every applied record is in our WAL
        self.engine.writable = True
        self.view.uninstall()
        self._build_queue()
        app.read_only = False
        app.state = RUNNING
        log.info("promoted: RUNNING as the primary", lsn=self.engine.last_lsn)
        return {"state": app.state, "lsn": self.engine.last_lsn, "promoted": True}

    def fence(self, why: str) -> None:
        """Stop taking changes now (the leader lease is gone): for good, in this process."""
        if self.fenced:
            return
        self.fenced = True
        app = self.app
        app.read_only = True
        app.state = WAITING
        self.engine.writable = False
        self.quorum.fail_all(read_only_error())
        self.feeds.stop_all()
        log.error("fenced: no more changes on this instance", why=why, lsn=self.engine.last_lsn)

    def _build_queue(self) -> None:
        # As a restart builds it: taken tasks go back to ready, due timers run.
        queue = self.queue = QueueCalls(self.app, self.engine.catalog)
        queue.install()
        self.store.commit.on_rollback = queue.reload
        self.app.durability_barrier()  # the rebuild's own changes go to the WAL

    async def _promote_call(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        if self.automatic:
            raise CallError(
                ErrorCode.ER_PROC_LUA, "failover is etcd's here: promotion by hand is refused"
            )
        return [await self.promote(f"admin call by {ctx.user}")]
