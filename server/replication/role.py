"""Which role this instance plays, and the moves between them.

Owns: starting as a primary (the queue built and served) or read-only (a
replica's applier, or `read_only`; the queue's reads served by view.py),
promotion, stepping down, and the admin call `queuebox.promote`. The states,
as `queue.state()` reports them (the module's own names, drivers/queue_state.py;
its `queue_state.lua` draws the same cycle):

                                 promote (by hand, or etcd's leader key)
    INIT/WAITING (read-only) ────────────────────────▶ STARTUP
      ▲  follows a primary (start_applier),             │ each step bounded: the applier
      │  or `read_only`                                 │ stopped, the WAL drained, the
      │                                                 │ queue built as at a restart
      │                      a step that fails ◀────────┤ (PromotionFailed: back to
      │                      or is overtaken            │ INIT/WAITING, the caller gives up)
      │                                                 ▼
    ENDING ◀────── step_down(why) ───────────────── RUNNING (the primary)
      waiting calls answered ER_READONLY,    fenced (the lease lost) or demoted: changes
      the queue torn down, the view          refused at once, before anything else runs;
      installed, the WAL drained             replies waiting for a quorum fail

A primary at start goes straight to RUNNING (its queue built as above). An
instance started read-only (a replica, `read_only`) says INIT until its queue
first ran (as the module, which a read-only Tarantool does not start), WAITING
after. A replica that its primary refuses (diverged, or behind the primary's WAL)
re-bootstraps in-process (build.py): INIT (the data directory set aside and
loaded again; reads answer ER_LOADING) ─▶ INIT or WAITING as before, following.

The parts over one data directory (the store, the quorum, the feeds, the
applier, the queue) come and go with it: `attach` after it is opened,
`detach` before it is closed; the role itself, the view and the state stay.

Must not touch: sockets (the applier's link and the feed's calls are theirs),
queue semantics (QueueCalls is built as a restart builds it), etcd (the
failover loop in failover.py drives promote and step_down).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from queuebox.drivers.queue_state import ENDING, INIT, RUNNING, STARTUP, WAITING
from queuebox.protocol import ErrorCode

from ..core.app import App
from ..core.registry import CallContext
from ..core.store import Store
from ..queue.queue_calls import QueueCalls
from ..runtime.errors import CallError, loading_error, read_only_error
from ..runtime.logs import get_logger
from ..settings.config import ADMIN, REPLICATION
from .applier import Address, Applier, OnStopped
from .feed import Feeds, arguments
from .history import answer_record
from .quorum import Quorum
from .view import ReplicaView

log = get_logger("queuebox.replication")

T = TypeVar("T")

# The most one step of a promotion or a step-down may take (the applier to
# stop, the WAL writes in flight): past it the step has failed. Under etcd it is
# two lease periods, when that is less: the cluster has no primary meanwhile.
STEP_TIMEOUT_S = 10.0


class PromotionFailed(CallError):
    """A promotion that did not finish: the instance stays read-only."""

    def __init__(self, why: str) -> None:
        super().__init__(ErrorCode.ER_PROC_LUA, f"promotion failed: {why}")
        self.why = why


async def bounded(step: Awaitable[T], what: str, timeout_s: float) -> T:
    """`step`, or PromotionFailed after `timeout_s`. Shielded: a step given up on
    (the WAL writes of a hanging disk) still finishes for those waiting on it."""
    try:
        return await asyncio.wait_for(asyncio.shield(step), timeout_s)
    except TimeoutError:
        raise PromotionFailed(f"{what} did not finish within {timeout_s:g} s") from None


def _hook(queue: QueueCalls, hook: str) -> None:
    """Run a driver lifecycle hook on every tube; a driver that raises is logged."""
    for tube, exc in queue.modern.lifecycle(hook):
        log.error(f"a tube's driver failed in {hook}()", tube=tube, error=repr(exc))


class Role:
    def __init__(self, app: App, replica_id: str) -> None:
        self.app = app
        self.replica_id = replica_id
        self.queue: QueueCalls | None = None
        self.view = ReplicaView(app)
        self.applier: Applier | None = None
        self.sources: tuple[Address, ...] = app.config.replication_source  # whom to follow
        # Set by failover.py: promotion by hand is then refused (etcd decides).
        self.automatic = False
        # etcd failover: told when the WAL broke, to give the leader key up.
        self.on_broken: Callable[[], None] | None = None
        # Set by build.py: the applier stopped for good (on_stopped), and while
        # the data directory is being loaded again (rejoining).
        self.on_stopped: OnStopped | None = None
        self.rejoining = False
        self.started = False  # start() ran (a later attach is a rejoin's)
        self._promoting = asyncio.Lock()  # one promotion or step-down at a time
        self._epoch = 0  # moved on by every step-down: a promotion it overtook gives up
        self._ending: asyncio.Future[None] | None = None
        self.step_downs = 0
        # What queue.state() says while read-only: INIT until the queue first ran
        # here (the module, started read-only, is not started: INIT), then WAITING.
        self.idle_state = INIT
        # A WAL write on a healthy disk takes milliseconds.
        self.step_timeout_s = min(STEP_TIMEOUT_S, 2 * app.config.etcd_lease_ttl)

    @property
    def running(self) -> bool:
        """The queue serves every call (`queue.state()` is RUNNING)."""
        return self.app.state == RUNNING

    @property
    def stepping_down(self) -> bool:
        """A primary stepping down: its changes refused, what it started finishing."""
        return self.app.state == ENDING

    def attach(self, store: Store) -> None:
        """Put the role over a store just opened (at start, after a re-bootstrap)."""
        app, config = self.app, self.app.config
        self.store, self.engine = store, store.engine
        self.quorum = Quorum(
            config.replication_synchro_quorum,
            config.replication_synchro_timeout,
            config.replication_lag_timeout,
        )
        self.feeds = Feeds(app, self.engine, self.quorum)
        self.feeds.install()
        self.view.catalog = self.engine.catalog
        if app.read_only:
            self.engine.writable = False

    def start(self) -> None:
        """Called once, after the first attach, before the listener accepts."""
        self.started = True
        registry = self.app.registry
        registry.register("queuebox.promote", self._promote_call, ADMIN, read_only_ok=True)
        record = "queuebox.replication.record"  # a refused replica asks it (history.py)
        registry.register(record, self._record_call, REPLICATION, read_only_ok=True)
        if self.app.read_only:
            self.app.state = self.idle_state
            self.view.install()
            if self.sources:
                self.start_applier(self.sources)
        else:
            self.app.state = STARTUP
            self._build_queue()
            self.app.state = RUNNING

    async def detach(self) -> None:
        """Before the store closes (shutdown, re-bootstrap): nothing more is applied,
        fed or timed; reads answer ER_LOADING until the next attach."""
        self.feeds.stop_all()
        if self.applier is not None:
            await self.applier.stop()
        if self.queue is not None:
            self.queue.uninstall(read_only_error)
        self.view.catalog = None

    def start_applier(self, sources: tuple[Address, ...]) -> None:
        """Follow the first writable one of `sources` (a new leader: switch to it)."""
        self.sources = sources
        if self.rejoining:
            return  # followed once the data directory is loaded again
        applier = self.applier
        if applier is None or applier.engine is not self.engine:  # a new data directory
            applier = self.applier = Applier(
                self.app.config,
                self.engine,
                self.store.commit.barrier,
                self.replica_id,
                sources,
                self.on_stopped,
            )
        applier.follow(sources)
        applier.start()  # (again, if it had stopped: what it knew of its primary kept)

    # -- promotion --
    async def promote(self, why: str) -> dict[str, Any]:
        """Become the writable primary; the answer says from which LSN on.
        PromotionFailed if a step does not finish in time, or a step-down
        overtook it: the instance is then read-only (INIT or WAITING)."""
        async with self._promoting:
            return await self._promote(why)

    async def _promote(self, why: str) -> dict[str, Any]:
        app = self.app
        if not app.read_only:
            return {"state": app.state, "lsn": self.engine.last_lsn, "promoted": False}
        if self.rejoining:
            raise PromotionFailed("this instance is re-bootstrapping from its primary")
        epoch = self._epoch
        app.state = STARTUP
        log.info("promoting to primary", why=why, lsn=self.engine.last_lsn)
        applier, self.applier = self.applier, None
        try:
            if applier is not None:
                await bounded(applier.stop(), "stopping the applier", self.step_timeout_s)
            self._check_not_overtaken(epoch)
            await self._drained()
            self._check_not_overtaken(epoch)
        except PromotionFailed as e:
            log.error("promotion failed: staying read-only", why=e.why)
            if self._epoch == epoch:
                app.state = self.idle_state
                if applier is not None:  # follows on, with what it knew of its primary
                    self.applier = applier
                    applier.start()
            raise
        self.engine.writable = True
        self.view.uninstall()
        self._build_queue()
        app.read_only = False
        app.state = RUNNING
        log.info("promoted: RUNNING as the primary", lsn=self.engine.last_lsn)
        return {"state": app.state, "lsn": self.engine.last_lsn, "promoted": True}

    async def _drained(self) -> None:
        await bounded(self.store.commit.drain(), "the WAL writes in flight", self.step_timeout_s)

    def _check_not_overtaken(self, epoch: int) -> None:
        if self._epoch != epoch:
            raise PromotionFailed("this instance stepped down meanwhile")

    def _build_queue(self) -> None:
        # Everything up to here may have been answered already (by a previous
        # primary, or run): the in-sync set starts from it (quorum.py).
        self.quorum.begin(self.engine.last_lsn)
        # As a restart builds it: taken tasks go back to ready, due timers run.
        queue = self.queue = QueueCalls(self.app, self.engine.catalog)
        queue.install()
        self.idle_state = WAITING
        _hook(queue, "start")  # the module's STARTUP: each driver's start()
        self.app.durability.barrier(acknowledges=False)  # the rebuild's own changes go to the WAL

    def rolled_back(self) -> None:
        """A WAL write failed and its changes were undone in the spaces: the
        queue this instance runs (a primary's) rebuilds itself from them. If
        the WAL is broken (a failed write it could not cut back: wal.py), no
        write can be kept until a restart: the instance steps down instead
        (read-only, reads go on; with etcd it gives the leader key up). A
        rebuild would write (taken tasks go back to ready), fail and roll
        back again, every loop turn, failing the reads of that turn too."""
        broken = self.engine.broken
        if broken is not None:
            if not self.app.read_only:
                log.error("the WAL is broken: restart this instance", why=broken)
                self.step_down(f"the WAL is broken: {broken}")
                if self.on_broken is not None:
                    self.on_broken()
            return
        if self.queue is not None:
            self.queue.reload()

    # -- stepping down --
    def step_down(self, why: str) -> asyncio.Future[None]:
        """RUNNING → ENDING → WAITING (fenced: the leader lease lost; or demoted).

        Synchronous first, before any other request or timer runs: changes are
        refused (ER_READONLY), replies waiting for a quorum fail, the feeds to
        replicas stop. The returned task does the rest: calls waiting in the
        queue are answered ER_READONLY (a take waiting for a task, a put waiting
        for room: neither changed anything, so "refused, go to the primary" is
        the whole truth, and a client that retries read-only refusals on the
        primary loses nothing), the queue is torn down and the read-only view
        installed, the WAL writes in flight finish. Then `start_applier` can
        follow a primary, and `promote` can make this instance primary again.
        A promotion under way gives up (PromotionFailed)."""
        app = self.app
        if app.read_only and app.state != STARTUP:
            if self._ending is not None:
                return self._ending  # stepping down already, or stepped down
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)  # read-only from the start: nothing to end
            return done
        self._epoch += 1
        self.step_downs += 1
        app.read_only = True
        self.engine.writable = False
        app.state = ENDING
        self.quorum.abandon(f"this instance stopped being the primary: {why}")
        self.feeds.stop_all()
        log.error("stepping down: no more changes here", why=why, lsn=self.engine.last_lsn)
        self._ending = asyncio.get_running_loop().create_task(self._end())
        return self._ending

    async def _end(self) -> None:
        async with self._promoting:  # a promotion it overtook has given up by now
            queue, self.queue = self.queue, None
            if queue is not None:
                _hook(queue, "stop")  # the module's ENDING: each driver's stop()
                queue.uninstall(read_only_error)
            self.view.install()
            try:
                await self._drained()
            except PromotionFailed as e:
                log.error("stepped down without the last WAL writes done", why=e.why)
            self.app.state = WAITING
            log.info("stepped down: WAITING, read-only", lsn=self.engine.last_lsn)

    async def _record_call(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        (lsn,) = arguments(args, "record(lsn)", int)
        if self.rejoining:
            raise loading_error()
        return [await answer_record(self.engine, lsn)]

    async def _promote_call(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        if self.automatic:
            raise CallError(
                ErrorCode.ER_PROC_LUA, "failover is etcd's here: promotion by hand is refused"
            )
        return [await self.promote(f"admin call by {ctx.user}")]
