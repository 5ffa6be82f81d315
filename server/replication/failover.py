"""Failover coordinated by etcd: one leader key, held with a lease.

Owns the loop every instance with `etcd_endpoints` runs. All of them start
read-only; the one that takes the key PREFIX/leader (its value: this
instance's `advertise` address) is promoted, the others follow the address
the key holds. The lease is the fence: a primary stops taking changes when
it cannot prove its lease is alive (`app.lease_ok` is the lease's own
clock check, asked before every change, so a process resumed after SIGSTOP
refuses at once), and steps down (role.py) when the lease is lost.

    start ─▶ key vacant? ──yes, and a candidate──▶ take it ─▶ promote ─▶ primary
               │ no: held by L                                  │ lease lost
               ▼                                                ▼
             follow L ──(the key changes or lapses)──▶ again   step down, again

"Caught up": a replica that followed a primary takes the key only once it
has applied every LSN that primary announced, or after one lease period
without news (it then starts without what it never received: the loss of
asynchronous replication). Must not touch: queue semantics, the WAL.
"""

from __future__ import annotations

import asyncio

from ..config import Config, parse_listen
from ..leader import LeaderError, Leadership
from ..logs import get_logger
from ..loop import cancel_and_wait
from .role import PromotionFailed, Role

log = get_logger("queuebox.failover")


def advertised(config: Config) -> str:
    return config.advertise or f"{config.listen_host}:{config.listen_port}"


class Failover:
    def __init__(self, role: Role, config: Config) -> None:
        self.role = role
        self.config = config
        self.me = advertised(config)
        self.lease = Leadership(
            ",".join(config.etcd_endpoints),
            f"{config.etcd_prefix.rstrip('/')}/leader",
            self.me.encode(),
            config.etcd_lease_ttl,
            on_lost=self._lost,
        )
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.role.automatic = True
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
        if not self.role.app.read_only:
            try:
                await self.lease.resign()  # a clean stop hands over at once
            except LeaderError as e:
                log.warning("could not give up the leader key", error=str(e))
        await self.lease.close()

    async def _run(self) -> None:
        while True:
            try:
                await self.lease.start()
                break
            except LeaderError as e:
                log.error("etcd unreachable; staying read-only", error=str(e))
                await asyncio.sleep(1.0)
        while True:
            try:
                await self._round()
            except LeaderError as e:
                log.warning("etcd", error=str(e))
                await asyncio.sleep(0.5)

    async def _round(self) -> None:
        leader = await self.lease.leader()
        if leader is not None and leader.decode() != self.me:
            address = leader.decode()
            log.info("following the leader", leader=address)
            self.role.start_applier((parse_listen(address),))
            await self.lease.wait_changed(leader)
            return
        if leader is not None:
            # Our own address, from a lease of this instance's previous run: it
            # lapses within its TTL, and only a lease of our own counts.
            await self.lease.wait_vacant()
            return
        if not await self._caught_up():
            await self.lease.wait_changed(None)  # not a candidate: wait for a leader
            return
        if not await self.lease.try_acquire():
            return  # another one was quicker: follow it
        # We hold the key: promote, then keep it until it is lost.
        self.role.app.lease_ok = self.lease.holds
        log.info("leader key taken", key=self.me)
        try:
            await self.role.promote("etcd: this instance holds the leader key")
        except PromotionFailed as e:
            log.error("promotion failed: giving the leader key up", why=e.why)
            await self.lease.resign()
            return
        await self.lease.wait_changed(self.me.encode())
        self._lost()

    async def _caught_up(self) -> bool:
        """May this instance take the key? Without an applier (a cluster's first
        start) yes; a replica that never reached a primary, or diverged from it,
        no (it would start the queue without its data); a replica that did,
        once it applied all the primary announced, or one lease period later."""
        applier = self.role.applier
        if applier is None:
            return True
        if applier.diverged is not None or not applier.ever_connected:
            log.warning(
                "not a candidate for the leader key",
                why=applier.diverged or "it never reached a primary",
            )
            return False
        waited = 0.0
        while not applier.caught_up and waited < self.config.etcd_lease_ttl:
            await asyncio.sleep(0.05)
            waited += 0.05
        if not applier.caught_up:
            log.error(
                "taking over without the primary's last changes",
                applied_lsn=self.role.engine.last_lsn,
                primary_lsn=applier.primary_lsn,
            )
        return True

    def _lost(self) -> None:
        if not self.role.app.read_only:
            self.role.step_down("fenced: the leader lease was lost")
