"""The server's parts, built in order by plain code, in one place, and built
again over a data directory loaded anew (a replica's in-process re-bootstrap).

Owns: `Server` (the app and the typed parts around it), `build_server`, and
the one place that opens and closes the parts over the data directory:

    App (config, registry, users)
      └─ PluginHost: each configured plugin loaded (its drivers must be
         known before the queue rebuilds its tubes)
      └─ Role (replication/role.py): which role this instance plays; lives as
         long as the process
           └─ Store: the engine, recovered from the data directory, and   ┐ open_data /
              group commit                                                │ close_data:
                └─ the role's parts over it (role.attach): the quorum,    │ at start and
                   the feeds, the view's catalog; a primary's QueueCalls  │ shutdown, and
                   (the modern and legacy cores), or a replica's applier  │ at a rejoin
                └─ EventService: the task-change streams, from the        │
                   store's WAL and written batches, on every role         │
                └─ Spaces: SELECT on the queue's spaces; the schema       │
                   version moves with every space created or dropped      │
                └─ Durability (durability.py), the app's: group commit, the   │
                   quorum when synchronous, and who hears of each write:  │
                   metrics, the replication feed, the event streams; a    │
                   failed write rebuilds the role's queue                 ┘
      └─ failover (etcd), builtins, test hooks, operator_calls (queuebox.release, kick_task),
        route_calls (queuebox.act_as, await_ready: what a router calls),
        schedule_calls (queuebox.schedule and co.)

A rejoin, when the applier gives up (its primary refused it, or a record did
not apply):

    compare histories (history.py) ── agree, and refused for another reason ──▶
      │ diverged, or behind the primary's WAL                  follow again later
      ▼
    INIT: close_data (no snapshot); the records not shown to be the primary's
    set aside in `set-aside-*` files (storage/setaside.py; named in the log at
    error level and on /metrics), the directory emptied; the primary's snapshot
    fetched (applier.bootstrap); open_data ─▶ INIT or WAITING as before, following

Must not touch sockets (the listener's: serve.py starts the ports, the 1.5
one with this `Server`'s queue) nor signals (serve.py's). Runs inside the
event loop: group commit and the queue glue keep the loop.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from queuebox.drivers.queue_state import INIT
from queuebox.storage.errors import EngineError
from queuebox.storage.fileio import FileIO, InjectedFaults
from queuebox.storage.layout import LOCK_NAME
from queuebox.storage.setaside import SetAside, empty, set_aside

from ..core import builtins
from ..core.app import App
from ..core.spaces import Spaces
from ..core.store import Store, build_store, install_fault_hooks
from ..plugins import PluginHost
from ..queue import operator_calls, route_calls, schedule_calls
from ..queue.events import EventService
from ..queue.queue_calls import QueueCalls
from ..replication import shard, status
from ..replication.applier import bootstrap
from ..replication.history import AGREE, DIVERGED, Verdict, compare_with
from ..replication.link import LinkError
from ..replication.role import Role
from ..replication.shard import ShardState, SyncReport
from ..replication.status import ClusterState, instance_name
from ..runtime.durability import Durability
from ..runtime.logs import get_logger
from ..runtime.loop import cancel_and_wait
from ..runtime.outcomes import WalObserver

if TYPE_CHECKING:  # brings the etcd client: imported only by a shard
    from ..replication.shard_sync import ShardSync

log = get_logger("queuebox.replication")

RETRY_FIRST_S = 1.0  # a rejoin that could not decide, or failed, tries again after this
RETRY_MAX_S = 30.0


class Server:
    def __init__(self, app: App) -> None:
        self.app = app
        self.faults = InjectedFaults() if app.config.test_hooks else None
        name = instance_name(app.config, str(app.instance_uuid))
        self.role = Role(app, name)
        self.cluster = ClusterState(name)  # what failover learns, for status and /metrics
        self.role.on_stopped = self._applier_stopped
        self.plugins = PluginHost(app)
        self.events = EventService(app)
        # written(records, bytes, seconds) after each WAL write, of every store (metrics).
        self.wal_observers: list[WalObserver] = []
        self.rebootstraps = 0
        self.shard_sync: ShardSync | None = None  # a shard's: applies the cluster's tubes
        self.set_aside: list[SetAside] = []  # what each re-bootstrap kept (for /metrics)
        self._open = False
        self._closing = False
        self._set_aside_done = False
        self._rejoin: asyncio.Task[None] | None = None
        self._retry_s = RETRY_FIRST_S

    @property
    def store(self) -> Store:
        """The store over the data directory (until a rejoin opens the next one)."""
        return self.role.store

    @property
    def queue(self) -> QueueCalls | None:
        """The queue, once this instance is writable (a promotion builds it)."""
        return self.role.queue

    # -- the parts over the data directory --
    async def open_data(self, stopping: Callable[[], bool] | None = None) -> None:
        """Recover the data directory; the role's parts go over it. `stopping()`
        True stops a long recovery (RecoveryStopped)."""
        stop = stopping or (lambda: self._closing)
        with _collector_paused():
            store = await build_store(self.app, self.faults, stop)
        role = self.role
        role.attach(store)
        if store.archive is not None:
            store.archive.keep_unarchived(store.engine)  # after the feeds set their rule
        self.events.attach(store)
        engine = store.engine
        self.app.durability = Durability(
            store.commit,
            quorum=role.quorum if role.quorum.need else None,
            last_lsn=lambda: engine.last_lsn,
            observers=self.wal_observers,
            listeners=(role.feeds.audience(), self.events.audience()),
            rolled_back=role.rolled_back,
        )
        self.app.spaces = Spaces(self.app, store.engine.catalog)
        if self.role.started:  # a rejoin; at start, once the queue is built (build_server)
            self.watch_ddl()
        self._open = True

    def watch_ddl(self) -> None:
        """The schema version moves with every space created or dropped from now on;
        not with those the queue makes at start (their number is the base version)."""
        self.store.engine.catalog.ddl_listeners.append(self.app.schema_changed)

    async def close_data(self, snapshot: bool) -> None:
        self._open = False
        self.events.detach()
        self.app.spaces = None
        await self.role.detach()
        await self.role.store.close(snapshot)

    def shard_status(self) -> tuple[ShardState, SyncReport] | None:
        sync = self.shard_sync
        return None if sync is None else (sync.state, sync.report)

    def observe_wal(self, written: WalObserver) -> None:
        """written(records, bytes, seconds) after each WAL write, of every store."""
        self.wal_observers.append(written)

    async def close(self) -> None:
        """At shutdown, after the last connection: a rejoin under way stops where
        it is (what it set aside stays; an empty directory bootstraps at the next
        start), then the parts close with a snapshot."""
        self._closing = True
        if self._rejoin is not None:
            await cancel_and_wait(self._rejoin)
        if self._open:
            await self.close_data(snapshot=True)

    # -- rejoining the primary --
    def _applier_stopped(self, host: str, port: int, why: str, applying: bool) -> None:
        if self._rejoin is None or self._rejoin.done():
            work = self._rejoin_from(host, port, why, applying)
            self._rejoin = asyncio.get_running_loop().create_task(work)

    async def _rejoin_from(self, host: str, port: int, why: str, applying: bool) -> None:
        role = self.role
        try:
            verdict: Verdict | None = await compare_with(role.engine, self.app.config, host, port)
        except LinkError as e:
            log.warning("could not compare this history with the primary's", error=str(e))
            verdict = None
        if verdict is None or (verdict.kind == AGREE and not applying):
            # Nothing shows this instance off the primary's history: follow again, later.
            log.warning("following again later", primary=f"{host}:{port}", why=why)
            await asyncio.sleep(self._retry_s)
            self._retry_s = min(self._retry_s * 2, RETRY_MAX_S)
            role.start_applier(role.sources)
            return
        await self.rebootstrap(verdict, why)

    async def rebootstrap(self, verdict: Verdict, why: str) -> None:
        """Load the data directory anew from the primary, in-process (see the top)."""
        app, role = self.app, self.role
        self.rebootstraps += 1
        role.rejoining = True
        app.state = INIT
        log.error("re-bootstrapping from the primary", why=why, history=verdict.why)
        await self.close_data(snapshot=False)
        keeping: Verdict | None = verdict
        while True:
            try:
                await self._reload(keeping)
                break
            except (EngineError, OSError) as e:
                # Failed before the set-aside: it is done again (nothing was removed);
                # after it: what came from the primary is removed and fetched again.
                log.error("re-bootstrap failed; trying again", error=str(e), in_s=self._retry_s)
                await asyncio.sleep(self._retry_s)
                self._retry_s = min(self._retry_s * 2, RETRY_MAX_S)
                if self._set_aside_done:
                    keeping = None
        role.rejoining = False
        app.state = role.idle_state
        self._retry_s = RETRY_FIRST_S
        log.info("re-bootstrapped from the primary", lsn=role.engine.last_lsn)
        role.start_applier(role.sources)

    async def _reload(self, keeping: Verdict | None) -> None:
        """Set this history aside after the LSN `keeping` shows shared (None: keep
        nothing, the directory holds what came from the primary), fetch the
        primary's, open it. The directory stays locked until the engine locks it."""
        files = self.faults or FileIO()
        directory = Path(self.app.config.data_dir)
        lock = files.lock(directory / LOCK_NAME, f"pid {os.getpid()} (re-bootstrap)")
        try:
            self._set_aside_done = False
            if keeping is None:
                empty(files, directory)
            else:
                kept = set_aside(files, directory, keeping.shared, _stamp())
                self._keep(kept, keeping)
            self._set_aside_done = True
            await bootstrap(self.app.config, self.role.replica_id, lambda: self.role.sources)
        finally:
            files.unlock(lock)
        await self.open_data()

    def _keep(self, kept: SetAside, verdict: Verdict) -> None:
        if not kept.paths:
            return
        self.set_aside.append(kept)
        log.error(
            "records set aside: this instance held them; its primary does not have them"
            if verdict.kind == DIVERGED
            else "records set aside: its primary cannot show it has them",
            files=[str(p) for p in kept.paths],
            records=kept.records,
            lsns=f"{kept.first_lsn}..{kept.last_lsn}" if kept.records else None,
            hint="read them with `queuebox wal cat FILE`",
        )


def _stamp() -> str:
    """UTC time to the microsecond, and the pid: two set-asides never share a name."""
    now = time.time()
    second = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    return f"{second}.{int(now % 1 * 1e6):06d}Z-{os.getpid()}"


async def build_server(
    app: App, stopping: Callable[[], bool] | None = None, shard_state: ShardState | None = None
) -> Server:
    """Everything on top of `app`, made before the listener starts accepting;
    `stopping()` True (a signal) stops a long recovery (RecoveryStopped);
    `shard_state`: this node's shard of a sharded cluster (serve.py joined it)."""
    server = Server(app)
    server.plugins.load_all()  # before the queue rebuilds the tubes of their drivers
    await server.open_data(stopping)
    server.role.start()
    server.watch_ddl()
    server.events.install()
    status.install(server.role, server.cluster)
    app.add_shutdown_hook(server.close)
    if server.faults is not None:
        install_fault_hooks(app, server.faults)
    if app.config.etcd_endpoints:
        # Imported only here: the etcd client brings grpc, heavy to load.
        from ..replication.failover import Failover  # noqa: PLC0415

        failover = Failover(server.role, app.config, server.cluster)
        failover.start()
        app.add_shutdown_hook(failover.stop, first=True)
    if shard_state is not None:
        from ..replication.shard_sync import ShardSync  # noqa: PLC0415

        server.shard_sync = ShardSync(app, server.role, app.config, shard_state)
        server.shard_sync.start()
        app.add_shutdown_hook(server.shard_sync.stop, first=True)
    shard.install(server.role, shard_state)
    builtins.install(app)
    operator_calls.install(app, lambda: server.role.queue)
    route_calls.install(app, lambda: server.role.queue)
    schedule_calls.install(app, lambda: server.role.queue, lambda: server.role.engine.catalog)
    return server


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Recovery makes an object or three per task, and they all live on: the
    cyclic garbage collector would scan them again and again while they are
    made (it doubled the recovery time of a million tasks). Paused meanwhile;
    afterwards what recovery made is frozen, out of every later collection
    (task tuples hold no cycles; they are freed by reference counting)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
