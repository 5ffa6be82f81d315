"""A shard's primary makes its tubes and queue.cfg what the cluster map says.

Owns: the loop every node started with `--shard` runs (shard.py learnt its
number): it watches the cluster's keys (cluster_map.py) and, on a change, at
each promotion and every RESYNC_S anyway, reads P/map/NAME (the shard's state,
for `queuebox.shard()`), every shard's entry and leader key (the console's
cluster map) and, while this node is the running primary, applies
P/tubes and P/cfg (`apply`): a missing tube is created with its type and
options; a tube gone from P/tubes that this node saw there (as a primary or a
replica) is dropped when it has no task, else kept and reported (log,
`report.kept`, /metrics); P/cfg is given to queue.cfg when it differs from
what this queue was last given. All of it is idempotent, so a shard that was
down when a tube was created gets it when it is back.

A reading of the map can be older than a tube's change on this shard: the
router creates or drops a tube on every shard first and writes P/tubes after,
so a sync that read the map just before that write would undo the call (drop
the tube just made again, make again the one just dropped). A tube a call
made or dropped here is therefore left as the call left it until this loop
applies a reading of the map at least as new as the router's write for that
call: the router tells each shard the etcd revision of its P/tubes write
(`queuebox.tube_written(tube, revision)`, TUBE_WRITTEN) before it answers
its client, and a reading whose revision is older than that, or a newer call
on the same tube since, leaves the tube alone. A change no router tells of
(a call made on the shard itself, a router that died before it told) stands
until one does. Must not touch the
election, the map's writes (the CLI and the router make them), queue
semantics (the queue's own calls do the work).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Collection, Mapping
from typing import Any

from queuebox.drivers import reads
from queuebox.drivers.errors import QueueError
from queuebox.protocol import ErrorCode
from queuebox.protocol.placement import TUBE_WRITTEN

from ..core.app import App
from ..core.registry import CallContext
from ..queue.queue_calls import QueueCalls
from ..runtime.errors import CallError
from ..runtime.logs import RateLimitedLog, get_logger
from ..runtime.loop import cancel_and_wait
from ..settings.config import ADMIN, Config
from .cluster_map import ClusterMap, TubeSpec, connect
from .etcd_tls import EtcdTls
from .leader import LeaderError, etcd_errors
from .role import Role
from .shard import ShardState, SyncReport

log = get_logger("queuebox.shard")

RESYNC_S = 5.0  # looked at again this often even without a watch event (a lost watch)
LOOK_S = 0.25  # a promotion (a new queue) is noticed within this
RETRY_S = 1.0


class TubeApplier:
    """The synchronous part: one queue made to match one reading of the map."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.namespace = app.config.queue_namespaces[0]
        self.known: set[str] = set()  # tubes seen in P/tubes during this run
        self.report = SyncReport()
        self._cfg_given: tuple[int, dict[str, Any]] | None = None  # (id of the queue, cfg)
        # Each tube name's last create or drop in this queue when this loop last
        # left it (reads.LiveReads.tube_changes); the tubes a call made or dropped
        # since, left alone: name -> that change's number; and what routers told
        # of them: name -> (the revision of their P/tubes write, the name's change
        # number then). See the top.
        self._left: tuple[int, dict[str, int]] | None = None
        self._held: dict[str, int] = {}
        self._told: dict[str, tuple[int, int]] = {}

    def told(self, queue: QueueCalls, name: str, revision: int) -> None:
        """A router wrote P/tubes/NAME at `revision` after it made or dropped the
        tube here: a reading at least that new settles the tube."""
        number = queue.reads().tube_changes().get(name)
        if number is not None:
            self._told[name] = (revision, number)

    def apply(
        self,
        queue: QueueCalls,
        tubes: Mapping[str, TubeSpec],
        cfg: dict[str, Any],
        unreadable: Collection[str] = (),
        revision: int = 0,
    ) -> None:
        """`unreadable`: P/tubes keys that are no tube spec: said, left alone.
        `revision`: the etcd revision of this reading of P/tubes."""
        report = self.report
        report.failed, report.kept, report.differs = {}, {}, {}
        conn_id = self.app.next_conn_id()  # its own, never a client's
        catalog = queue.catalog
        here = reads.tubes(catalog)
        settling = self._settling(queue, queue.reads().tube_changes(), revision)
        for name, spec in tubes.items():
            self.known.add(name)
            info = here.get(name)
            if info is None and name not in settling:
                self._create(queue, conn_id, spec)
            elif info is not None and info.type != spec.type:
                report.differs[name] = f"{info.type} here, {spec.type} in the cluster map"
        for name in unreadable:
            report.failed[name] = "its P/tubes value is not a tube: {type, opts}"
        for name, info in here.items():
            if name in tubes or name in unreadable or name in settling:
                continue
            if name in self.known:
                self._drop_if_empty(queue, conn_id, name, info)
        self._cfg(queue, conn_id, cfg)
        self._left = (id(queue.modern), queue.reads().tube_changes())
        report.syncs += 1

    def _settling(self, queue: QueueCalls, changes: dict[str, int], revision: int) -> set[str]:
        """The tubes a call made or dropped here that no reading as new as the
        router's write for that call (`told`) has settled yet."""
        held, told = self._held, self._told
        if self._left is not None and self._left[0] == id(queue.modern):
            left = self._left[1]
            for name, number in changes.items():
                if left.get(name) != number:
                    held[name] = number
        else:  # a new queue (a promotion): nothing to compare with
            held.clear()
            told.clear()
        for name, (written, number) in list(told.items()):
            if held.get(name) != number:
                del told[name]  # a call changed the tube again since: wait to be told of it
            elif written <= revision:
                del told[name], held[name]
        return set(held)

    def _create(self, queue: QueueCalls, conn_id: int, spec: TubeSpec) -> None:
        args = [spec.name, spec.type, {**spec.opts, "if_not_exists": True}]
        try:
            queue.modern.call(conn_id, f"{self.namespace}.create_tube", args)
        except QueueError as e:
            self.report.failed[spec.name] = e.message
            log.error("cannot create the cluster's tube", tube=spec.name, error=e.message)
            return
        self.report.created += 1
        log.info("created the cluster's tube", tube=spec.name, type=spec.type)

    def _drop_if_empty(
        self, queue: QueueCalls, conn_id: int, name: str, info: reads.TubeInfo
    ) -> None:
        total = reads.counts_report(queue.catalog, info)["tasks"]["total"]
        if total:
            self.report.kept[name] = f"{total} tasks"
            return
        try:
            queue.modern.call(conn_id, f"{self.namespace}.tube.{name}:drop", [])
        except QueueError as e:  # consumers wait in it: kept, said, tried again later
            self.report.kept[name] = e.message
            return
        finally:
            self.app.registry.forget()  # names bound to the dropped tube
        self.known.discard(name)
        self.report.dropped += 1
        log.info("dropped a tube the cluster no longer has", tube=name)

    def _cfg(self, queue: QueueCalls, conn_id: int, cfg: dict[str, Any]) -> None:
        given = (id(queue.modern), cfg)
        if not cfg or self._cfg_given == given:
            return
        try:
            queue.modern.call(conn_id, f"{self.namespace}.cfg", [cfg])
        except QueueError as e:
            self.report.failed["cfg"] = e.message
            log.error("cannot apply the cluster's queue.cfg", cfg=cfg, error=e.message)
            return
        self._cfg_given = given
        log.info("applied the cluster's queue.cfg", cfg=cfg)


class ShardSync:
    def __init__(self, app: App, role: Role, config: Config, state: ShardState) -> None:
        self.app = app
        self.role = role
        self.config = config
        self.state = state
        self.applier = TubeApplier(app)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._say = RateLimitedLog(log, burst=1, every_s=10.0)

    @property
    def report(self) -> SyncReport:
        return self.applier.report

    def start(self) -> None:
        # admin: the right of the create_tube or drop it follows (the router
        # calls it as its client, on the same connection).
        self.app.registry.register(TUBE_WRITTEN, self._tube_written, ADMIN, replace=True)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def _tube_written(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        name, revision = [*args, None, None][:2]
        if not isinstance(name, str) or type(revision) is not int:
            raise CallError(ErrorCode.ER_PROC_LUA, f"{TUBE_WRITTEN}(tube, revision)")
        queue = self._primary()
        if queue is None:
            return [False]  # a replica's loop applies nothing
        self.applier.told(queue, name, revision)
        self._wake.set()  # the next reading may settle it
        return [True]

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)

    async def _run(self) -> None:
        tls = EtcdTls(self.config.etcd_ca, self.config.etcd_cert, self.config.etcd_key)
        while True:
            try:
                client = await connect(",".join(self.config.etcd_endpoints), tls)
            except LeaderError as e:
                self._say.warning("shard sync: etcd unreachable", error=str(e))
                await asyncio.sleep(RETRY_S)
                continue
            try:
                await self._follow(ClusterMap(client, self.config.etcd_prefix))
            except LeaderError as e:
                self._say.warning("shard sync: etcd trouble; retrying", error=str(e))
                await asyncio.sleep(RETRY_S)
            finally:
                await client.close()

    async def _follow(self, cluster: ClusterMap) -> None:
        """Sync now, then on each watch event, at a promotion (a new queue, looked
        for every LOOK_S) and every RESYNC_S; a broken watch reconnects (LeaderError)."""
        watcher = asyncio.get_running_loop().create_task(self._watch(cluster))
        synced_queue: QueueCalls | None = None
        next_sync = 0.0
        loop = asyncio.get_running_loop()
        try:
            while True:
                if watcher.done():
                    watcher.result()
                    raise LeaderError("etcd watch of the cluster map ended")
                queue = self._primary()
                if self._wake.is_set() or queue is not synced_queue or loop.time() >= next_sync:
                    self._wake.clear()
                    await self.sync(cluster)
                    synced_queue, next_sync = queue, loop.time() + RESYNC_S
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), LOOK_S)
        finally:
            await cancel_and_wait(watcher)

    async def _watch(self, cluster: ClusterMap) -> None:
        # The map (every shard's entry, for the console too), the tubes, the cfg,
        # and any shard's leader key (the console shows each shard's primary).
        relevant = (cluster.map_dir, cluster.tubes_dir, cluster.cfg_key)
        leaders = f"{cluster.prefix}/shards/".encode()
        try:
            with etcd_errors("watch the cluster map"):
                events = await cluster.client.watch_prefix(f"{cluster.prefix}/".encode())
                try:
                    async for event in events:
                        key = bytes(event.kv.key)
                        if key.startswith(relevant) or (
                            key.startswith(leaders) and key.endswith(b"/leader")
                        ):
                            self._wake.set()
                finally:
                    await events.cancel()
        finally:
            self._wake.set()  # the loop looks at the watch at once

    async def _read_map(self, cluster: ClusterMap) -> None:
        """Every shard and its primary, for the console's cluster map (no counts:
        those are each shard's own, docs/console.md)."""
        entries = await cluster.shards()
        leaders = await asyncio.gather(*(cluster.leader(name) for name in entries))
        self.state.cluster = [
            {"name": e.name, "number": e.number, "state": e.state, "primary": leader}
            for e, leader in sorted(
                zip(entries.values(), leaders, strict=True), key=lambda found: found[0].number
            )
        ]
        self.state.cluster_read = time.monotonic()

    def _primary(self) -> QueueCalls | None:
        queue = self.role.queue
        if queue is None or self.app.read_only or self.app.refuses_changes():
            return None
        return queue

    async def sync(self, cluster: ClusterMap) -> None:
        entry = await cluster.shard(self.state.name)
        self.state.state = entry.state if entry is not None else "removed"
        await self._read_map(cluster)
        tubes = await cluster.tubes()
        # A replica learns the cluster's tubes too: promoted, it drops one the map
        # lost meanwhile (it saw it there).
        self.applier.known.update(tubes)
        if self._primary() is None:
            return
        cfg = await cluster.cfg()
        queue = self._primary()  # looked at again: the awaits let a step-down in
        if queue is None:
            return
        self.applier.apply(queue, tubes, cfg, cluster.unreadable, cluster.tubes_revision)
        kept = self.report.kept
        if kept:
            self._say.warning("tubes gone from the cluster map kept: not empty", kept=kept)
        written = self.app.durability.barrier(acknowledges=False)
        if written is not None:
            try:
                await written
            except Exception as e:  # noqa: BLE001 -- rolled back: the next sync does it again
                self._say.warning("shard sync: its changes were not written", error=str(e))
