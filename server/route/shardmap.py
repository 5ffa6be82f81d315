"""The shards a router serves and where their primaries are, as etcd says.

Owns `RouterMap`: the shards of P/map (name, number, state) and the address in
each P/shards/NAME/leader, read at start, then again on every change a watch
on P reports (a failover is followed without a restart) and every
`REFRESH_S` (how it learns that etcd answers again). When etcd cannot be
read it keeps the map it has and says so (`etcd_ok`, the router's /metrics).
Must not touch client or shard connections: they ask `shard(k)`, `serving()`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..replication.cluster_map import ACTIVE, ClusterMap, base, connect
from ..replication.leader import LeaderError
from ..runtime.logs import get_logger

log = get_logger("queuebox.router")
REFRESH_S = 1.0  # a read of the map while no watch event comes: etcd's health
RETRY_S = 0.5  # after etcd failed: how soon to try again


@dataclass(frozen=True)
class Shard:
    name: str
    number: int
    state: str
    leader: str | None  # "host:port" of its primary; None while it has none

    @property
    def active(self) -> bool:
        return self.state == ACTIVE


class RouterMap:
    def __init__(self, endpoints: str, prefix: str) -> None:
        self.endpoints = endpoints
        self.prefix = base(prefix)
        self.by_number: dict[int, Shard] = {}
        self._serving: list[Shard] = []  # read on every call: kept, not sorted each time
        self._active: list[Shard] = []
        self._led: list[Shard] = []  # serving, with a primary
        self._spread: list[Shard] = []  # active with a primary (or every active one)
        self.etcd_ok = False
        self.loads = 0  # maps read (a test waits for one after a change)
        self.cluster: ClusterMap | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._changed = asyncio.Event()
        self.on_change: list[Callable[[], None]] = []

    # -- what the router asks --
    def shard(self, number: int) -> Shard | None:
        return self.by_number.get(number)

    def serving(self) -> list[Shard]:
        """Every shard in number order (draining ones too: their tasks are taken)."""
        return self._serving

    def active(self) -> list[Shard]:
        """The shards new tasks go to."""
        return self._active

    def led(self) -> list[Shard]:
        """The serving shards that have a primary now (a take asks them)."""
        return self._led

    def spread_over(self) -> list[Shard]:
        """Where a put that names no shard may go: the active shards with a
        primary, or every active one while none has (the put then says so)."""
        return self._spread

    # -- life --
    async def start(self) -> None:
        """Read the map once (etcd must answer at start), then follow it."""
        client = await connect(self.endpoints)
        self.cluster = ClusterMap(client, self.prefix)
        await self._load()
        self._tasks = [
            asyncio.ensure_future(self._watch()),
            asyncio.ensure_future(self._refresh()),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                await self.cluster.client.close()

    async def _load(self) -> None:
        assert self.cluster is not None
        entries = await self.cluster.shards()
        leaders = await asyncio.gather(*(self.cluster.leader(n) for n in entries))
        found = {
            e.number: Shard(e.name, e.number, e.state, leader)
            for e, leader in zip(entries.values(), leaders, strict=True)
        }
        if found != self.by_number:
            log.info("shard map", shards={s.name: s.leader for s in found.values()})
        self.by_number = found
        self._serving = [found[k] for k in sorted(found)]
        self._active = [s for s in self._serving if s.active]
        # Kept with the map, not filtered again on every put and take.
        self._led = [s for s in self._serving if s.leader]
        self._spread = [s for s in self._active if s.leader] or self._active
        self.loads += 1
        if not self.etcd_ok:
            log.info("etcd answers: the shard map is current")
        self.etcd_ok = True
        for listener in self.on_change:
            listener()

    def _failed(self, e: Exception) -> None:
        if self.etcd_ok:
            log.warning("etcd unreachable: serving with the shard map it has", error=str(e))
        self.etcd_ok = False

    async def _refresh(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), REFRESH_S)
            self._changed.clear()
            try:
                await asyncio.wait_for(self._load(), 5.0)
            except (LeaderError, TimeoutError, OSError) as e:
                self._failed(e)
                await asyncio.sleep(RETRY_S)

    async def _watch(self) -> None:
        """Any event under P (a map entry, a leader key) reads the map again."""
        assert self.cluster is not None
        while True:
            watch = None
            try:
                watch = await self.cluster.client.watch_prefix(f"{self.prefix}/".encode())
                async for _ in watch:
                    self._changed.set()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # grpc drops watches when etcd goes: watch again
                self._failed(e)
            finally:
                if watch is not None:
                    with contextlib.suppress(Exception):
                        await watch.cancel()
            await asyncio.sleep(RETRY_S)
