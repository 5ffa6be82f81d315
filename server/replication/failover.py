"""Failover coordinated by etcd: who leads, who may take over, and healing after trouble.

Owns the loop every instance with `etcd_endpoints` runs, from its start to
its stop, through any number of terms. All instances start read-only. The
one holding PREFIX/leader (its value: the `advertise` address, under a
lease; PREFIX/shards/NAME/leader on shard NAME of a sharded cluster,
docs/cluster.md) is the primary; the others follow that address. Who may take the
vacant key is election.py's rule, checked against the in-sync record in the
same etcd transaction that takes it (keys.py); the lease is the fence (a
primary checks it before every change: `app.lease_ok`).

    ┌─────────────────────────────────────────────────────────────────────────────┐
    ▼                                                                             │
  read PREFIX/leader ──held by another──▶ follow it until the key changes ────────┤
    │ held under this instance's previous run's lease ──▶ wait until it lapses ───┤
    │ vacant                                                                      │
    ▼                                                                             │
  may I take it? (election.ineligible) ──no──▶ say why; wait for a leader ≤ TTL ──┤
    │ yes                                                                         │
    ▼                                                                             │
  offer my position, wait a window; a better offer? ──▶ defer to it ≤ patience ───┤
    │ mine is the best (or the better one never took the key)                     │
    ▼                                                                             │
  take the key and write the next in-sync record (one transaction) ──lost race ───┤
    │ won                                                                         │
    ▼                                                                             │
  promote, bounded ──failed, or too long──▶ give the key up, step down, say why ──┤
    │                                                                             │
    ▼                                                                             │
  primary: publish the in-sync set as it changes ─ lease lost ─▶ fenced, step down┘

etcd trouble at any step is said (at most once per 10 s, with a count of
what was held back) and the step retried: after an outage the loop goes on
from wherever the cluster is, with no restart. Must not touch: queue
semantics, the WAL, the replies (quorum.py fails the waiting ones).
"""

from __future__ import annotations

import asyncio
import contextlib

from ..runtime.logs import RateLimitedLog, get_logger
from ..runtime.loop import cancel_and_wait
from ..settings.config import Config
from ..settings.config_values import parse_listen
from .cluster_map import shard_prefix
from .election import (
    Candidate,
    Position,
    SyncRecord,
    best,
    ineligible,
    successor,
    too_far_behind,
)
from .etcd_tls import EtcdTls
from .insync import Publisher
from .keys import ClusterKeys
from .leader import LeaderError, Leadership
from .role import PromotionFailed, Role
from .status import ClusterState, advertised

log = get_logger("queuebox.failover")

RETRY_S = 0.5  # after an etcd error
SAY_EVERY_S = 10.0  # a repeated warning is said at most this often


class Failover:
    def __init__(self, role: Role, config: Config, state: ClusterState) -> None:
        self.role = role
        self.config = config
        self.state = state
        self.me = advertised(config)
        ttl = config.etcd_lease_ttl
        # A shard's election runs under PREFIX/shards/NAME; a node without --shard
        # under PREFIX itself, as a single-shard cluster always has.
        prefix = shard_prefix(config.etcd_prefix, config.shard)
        self.lease = Leadership(
            ",".join(config.etcd_endpoints),
            f"{prefix}/leader",
            self.me.encode(),
            ttl,
            on_lost=self._on_lost,
            tls=EtcdTls(config.etcd_ca, config.etcd_cert, config.etcd_key),
        )
        self.keys = ClusterKeys(self.lease, prefix, ttl)
        # Candidates notice a vacancy within a few etcd round trips of each other:
        # the window lets every offer arrive before the best one takes the key.
        self.window = min(1.0, max(0.2, ttl / 4))
        self.patience = ttl + self.window  # deferring to a better offer, at most
        # role.py bounds each step of a promotion; this bounds the whole of it.
        self.promotion_timeout = 3 * role.step_timeout_s
        self._following: str | None = None
        self._lost = asyncio.Event()
        self._say = RateLimitedLog(log, burst=1, every_s=SAY_EVERY_S)  # lines that repeat
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.role.automatic = True
        self.role.on_broken = self._lost.set  # the term ends: _lead gives the key up
        self.state.etcd = True
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
        if not self.role.app.read_only and self.lease.holds():
            try:
                await self.lease.resign()  # a clean stop hands over at once
            except LeaderError as e:
                log.warning("could not give up the leader key", error=str(e))
        await self.lease.close()

    # -- the loop -------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                await self.lease.start()
                break
            except LeaderError as e:
                self._etcd_trouble("etcd unreachable; staying read-only", e)
                await asyncio.sleep(1.0)
        while True:
            try:
                await self._round()
            except LeaderError as e:
                self._etcd_trouble("etcd trouble; retrying", e)
                await asyncio.sleep(RETRY_S)
            except Exception:  # a bug must not end failover silently: said, and retried
                log.exception("failover round failed; retrying")
                await asyncio.sleep(1.0)

    async def _round(self) -> None:
        leader = await self.lease.leader()
        self.state.etcd_error = None
        self.state.leader = None if leader is None else leader.decode()
        broken = self.role.engine.broken
        if broken is not None:  # neither leads nor follows: nothing can be written here
            await self._stand_aside(f"its WAL is broken until a restart ({broken})")
        elif leader is None:
            await self._elect()
        elif leader.decode() != self.me:
            await self._follow(leader)
        else:
            # Our own address, from a lease of this instance's previous run: it
            # lapses within its TTL, and only a lease of our own counts.
            await self.lease.wait_vacant()

    async def _follow(self, leader: bytes) -> None:
        address = leader.decode()
        self.state.waiting = None
        if self._following != address or self.role.applier is None:
            log.info("following the leader", leader=address)
            self.role.start_applier((parse_listen(address),))
            self._following = address
        self.state.record, _ = await self.keys.sync()
        # Looked at again after a while: the in-sync record moves (status shows it).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.lease.wait_changed(leader), self.config.etcd_lease_ttl)

    # -- an election ----------------------------------------------------------

    async def _elect(self) -> None:
        record, revision = await self.keys.sync()
        self.state.record = record
        me = self._candidate()
        why = ineligible(record, me)
        if why is not None:
            return await self._stand_aside(why)
        term = record.term if record is not None else 0
        mine = Position(self.me, me.lsn, record is not None and record.primary == self.me, term)
        await self.keys.offer(mine)
        await asyncio.sleep(self.window)
        top = best(mine, await self.keys.positions())
        if top is not mine:
            log.info(
                "deferring to a more up-to-date candidate",
                candidate=top.name,
                its_lsn=top.lsn,
                lsn=me.lsn,
            )
            if await self._leader_within(self.patience):
                return
            me = self._candidate()
            why = ineligible(record, me)
            if why is None and (record is None or not record.quorum):
                why = too_far_behind(me, top.lsn)
            if why is not None:
                return await self._stand_aside(why)
        lsn = self.role.engine.last_lsn
        next_record = successor(record, self.me, self.config.replication_synchro_quorum, lsn)
        if not await self.keys.take(revision, next_record):
            return  # another was quicker, or the record moved: look again
        self.state.waiting = None
        self.state.elections += 1
        self.state.record = next_record
        await self._lead(next_record)

    def _candidate(self) -> Candidate:
        applier = self.role.applier
        lsn = self.role.engine.last_lsn
        followed = applier is not None and applier.ever_connected
        return Candidate(
            name=self.me,
            lsn=lsn,
            max_lag=self.config.maximum_lag_on_failover,
            diverged=(
                "it is loading its data directory anew from its primary"
                if self.role.rejoining
                else applier.diverged
                if applier is not None
                else None
            ),
            empty=lsn == 0 and not followed,
            primary_lsn=applier.primary_lsn if applier is not None else 0,
        )

    async def _stand_aside(self, why: str) -> None:
        """No primary rather than one that may miss acknowledged writes: said,
        shown in status and /metrics, and looked at again after a while."""
        self.state.waiting = why
        self._say.warning("not taking the vacant leader key", per=why, why=why)
        await self._leader_within(self.config.etcd_lease_ttl)

    async def _leader_within(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self.lease.wait_changed(None), seconds)
        except TimeoutError:
            return False
        return True

    # -- a term as the primary ------------------------------------------------

    async def _lead(self, record: SyncRecord) -> None:
        self._lost.clear()
        self._following = None
        quorum = self.role.quorum
        quorum.carried_over = record.members
        quorum.insync.publisher = self._publisher(record)
        self.role.app.lease_ok = self.lease.holds
        log.info("leader key taken", term=record.term, in_sync=sorted(record.members))
        why = f"etcd: this instance holds the leader key (term {record.term})"
        try:
            await asyncio.wait_for(self.role.promote(why), self.promotion_timeout)
        except TimeoutError:
            return await self._give_up(f"it took longer than {self.promotion_timeout:g} s")
        except PromotionFailed as e:
            return await self._give_up(e.why)
        except Exception as e:  # noqa: BLE001 -- any failure gives the key back, and says why
            log.exception("promotion failed")
            return await self._give_up(str(e) or type(e).__name__)
        self.state.promotions += 1
        await self._lost.wait()  # on_lost (or a broken WAL) has begun the step-down
        broken = self.role.engine.broken
        if broken is not None:  # a replica takes over; this one waits for its restart
            return await self._hand_over(f"the WAL is broken: {broken}")
        await self._step_down("the leader lease was lost")

    def _publisher(self, record: SyncRecord) -> Publisher:
        async def publish(members: frozenset[str]) -> None:
            written = record.with_members(members, self.role.engine.last_lsn)
            await self.keys.publish(written)
            self.state.record = written

        return publish

    async def _give_up(self, why: str) -> None:
        self.state.failed_promotions += 1
        log.error("promotion failed: giving the leader key up", why=why)
        await self._hand_over(f"the promotion failed: {why}")

    async def _hand_over(self, why: str) -> None:
        """Give the leader key up (at once, not when its lease lapses), then step down."""
        try:
            await self.lease.resign()
        except LeaderError as e:
            log.warning("could not give up the leader key; it lapses", error=str(e))
        await self._step_down(why)

    def _on_lost(self) -> None:
        # Synchronous, before anything else runs: no change is taken from now on,
        # and the replies waiting for the quorum learn their outcome is unknown.
        self.state.fencings += 1
        self.role.step_down("fenced: the leader lease was lost")
        self._lost.set()

    async def _step_down(self, why: str) -> None:
        """Back to WAITING (the role's step-down, begun by on_lost or begun here),
        then on with the loop: follow the next leader, or stand again."""
        self.role.quorum.insync.publisher = None
        await self.role.step_down(why)
        self._following = None

    def _etcd_trouble(self, event: str, error: LeaderError) -> None:
        self.state.etcd_error = str(error)
        self._say.warning(event, error=str(error))
