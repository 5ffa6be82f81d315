"""The asyncio client routing by itself over a sharded cluster (docs/cluster.md).

Owns: `ClusterConnection`, which reads the cluster map from etcd
(`clients.sharding.read_map`), keeps one `Connection` to each shard's primary,
re-reads the map every `refresh` seconds (a shard added, drained, removed, or a
new primary after a failover) and runs each call where docs/cluster.md says:
by id % 1024, put by hash(utube or key) or spread round robin over the active
shards, take fair over the shards (each take starts at the next shard; with
none ready it waits on every shard at once with `queuebox.await_ready`),
create_tube/drop/cfg/truncate on every shard, statistics summed. It is a `Connection`
whose `run` routes (so `conn.tube(name)` is the ordinary `Tube` and every queue
call of `Connection` works); `run_bulk` (put_many's puts and `run_many`'s calls,
spread over the shards) is its base `clients.aio.spread.SpreadPuts`. Must not touch sockets
(each shard's `Connection` does).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from queuebox.clients import failover, iproto, sharding
from queuebox.clients.aio import fanout
from queuebox.clients.aio.connection import Connection
from queuebox.clients.aio.spread import SpreadPuts
from queuebox.clients.calls import Call
from queuebox.clients.errors import (
    ConnectionLost,
    NetworkError,
    QueueboxError,
    ServerError,
    TaskNotFound,
    TubeNotFound,
)
from queuebox.clients.sharding import ClusterView, Route, Shard
from queuebox.protocol.placement import TUBE_WRITTEN, tube_write

if TYPE_CHECKING:
    import ssl

T = TypeVar("T")
log = logging.getLogger("queuebox.client")
AWAIT_SLICE = 1.0  # longest await_ready: a shard added meanwhile is asked at the next turn
NEW_SHARD_S = 30.0  # a shard this young may still be making the cluster's tubes
TASK_NOT_FOUND = 0x7E  # the queue module's error code for "Task N not found"


class ClusterConnection(SpreadPuts, Connection):
    """Every shard primary of a cluster, behind one connection's API: a `Connection`
    whose queue calls (create_tube, statistics, tubes, schedules, ...) run through
    `run`, routed; it opens no socket of its own, so Link's state is never set up."""

    def __init__(  # noqa: PLW0231 -- no Link.__init__: it would dial one address
        self,
        endpoints: str,
        prefix: str,
        user: str | None,
        password: str | None,
        options: iproto.Options,
        refresh: float = 1.0,
        etcd_tls: ssl.SSLContext | None = None,
    ) -> None:
        self.endpoints, self.prefix = endpoints, prefix
        self._user, self._password, self._opts = user, password, options
        self._refresh, self._etcd_tls = refresh, etcd_tls
        self.view = ClusterView()
        self._conns: dict[int, tuple[str, Connection]] = {}  # number -> (address, conn)
        self._spread = itertools.count(random.randrange(sharding.ID_SHARDS))  # many short clients
        self._turn = 0
        self._watcher: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._sessions = False
        self._closed = False
        self._unreached: dict[int, str | None] = {}
        self._etcd_away = False
        self.put_keys = options.put_keys  # Tube.put keys every put (clients.calls.put_key)

    # -- life cycle --------------------------------------------------------------------

    async def start(self) -> Self:
        """Read the map and connect to the primaries; with `wait_for_server`, keep
        trying that long while etcd does not answer or the map has no primary yet."""
        deadline = time.monotonic() + self._opts.wait_for_server
        for pause in self._opts.backoff():
            try:
                await self._reload()
                if not self._conns:
                    raise sharding.MapError(f"no shard primary in the map under {self.prefix}")
                break
            except sharding.MapError:
                if time.monotonic() + pause > deadline:
                    raise
                await asyncio.sleep(pause)
        self._watcher = asyncio.get_running_loop().create_task(self._watch())
        return self

    async def close(self) -> None:
        self._closed = True
        if self._watcher is not None:
            self._watcher.cancel()
        for _, conn in list(self._conns.values()):
            await conn.close()
        self._conns.clear()

    async def _watch(self) -> None:
        while not self._closed:
            await asyncio.sleep(self._refresh)
            try:
                await self._reload()
                self._etcd_away = False
            except NetworkError as exc:  # etcd away: keep serving with the map we have
                if not self._etcd_away:  # said once per outage
                    log.warning("cluster map not refreshed, serving with the last: %s", exc)
                self._etcd_away = True

    async def _reload(self) -> None:
        view = await asyncio.to_thread(
            sharding.read_map,
            self.endpoints,
            self.prefix,
            self._opts.connect_timeout,
            self._etcd_tls,
        )
        self.view = view
        for number in [k for k in self._conns if k not in view.shards]:
            await self._drop(number)
        for shard in view.serving():
            await self._follow(shard)
        self._changed.set()
        self._changed = asyncio.Event()

    async def _follow(self, shard: Shard) -> None:
        """Connect to the shard's primary, or to its new one after a failover."""
        had = self._conns.get(shard.number)
        if had is not None and had[0] == shard.leader and not had[1].closed:
            return
        if shard.leader is None:
            return  # no primary right now: the old connection may still answer, or fail
        host, port = iproto.parse_address(shard.leader)
        conn = Connection(iproto.Peer(host, port, self._user, self._password, self._opts))
        try:
            await conn.start()
            if had is not None and had[1].session is not None:
                await _quietly(conn.identify(had[1].session))
            elif self._sessions:
                await conn.ensure_session()
        except NetworkError as exc:
            if self._unreached.get(shard.number) != shard.leader:  # said once per address
                log.warning("shard %s: primary %s not reached: %s", shard.name, shard.leader, exc)
            self._unreached[shard.number] = shard.leader
            return
        self._unreached.pop(shard.number, None)
        self._conns[shard.number] = (shard.leader, conn)
        if had is not None:
            await had[1].close()

    async def _drop(self, number: int) -> None:
        _, conn = self._conns.pop(number)
        await conn.close()

    # -- what Tube needs -----------------------------------------------------------------

    async def ensure_session(self) -> None:
        """A queue session on each shard (each re-joined after its reconnects)."""
        self._sessions = True
        for _, conn in list(self._conns.values()):
            await conn.ensure_session()

    @property
    def session(self) -> bytes | None:
        """Not None once every shard connection has its queue session."""
        conns = [conn for _, conn in list(self._conns.values())]
        if not self._sessions or any(conn.session is None for conn in conns):
            return None
        return conns[0].session if conns else None

    @property
    def closed(self) -> bool:
        return self._closed

    def post(self, call: Call[T]) -> asyncio.Future[T]:
        """`run(call)` in a task: a call whose reply need not be awaited at once."""
        return asyncio.get_running_loop().create_task(self.run(call))

    async def run(self, call: Call[T]) -> T:
        where = sharding.route(call.function, call.args)
        if where.kind == "take":
            return cast(T, await self._take(call))
        if where.kind in ("every", "summed", "kick", "listed"):
            return await self._every(call, where)
        if where.kind == "id" and self._pick(where) is None:
            raise TaskNotFound(TASK_NOT_FOUND, f"Task {call.args[0]} not found")
        if where.kind == "spread":
            return await self._spread_put(call, where)
        if where.kind == "pages":
            serving = [s.number for s in self.view.serving() if s.number in self._conns]
            return cast(T, await fanout.page(call, [(k, self._conns[k][1]) for k in serving]))
        if where.kind == "key":
            return await self._keyed(call, where)
        return await self._retrying(call, lambda: self._pick(where))

    async def _keyed(self, call: Call[T], where: Route) -> T:
        """A put by its key's (or utube's) hash: always that shard, so a put sent again
        with its key meets the first. A shard added a moment ago may not have made
        the tube yet: wait for it (within failover_timeout), never go elsewhere.
        This call's own sends after a lost answer go to the shard the first went
        to, even if the map moved the key's home meanwhile (a shard added,
        drained or resumed during the failover): that shard answers the task it
        made; the new home would make a second one."""
        deadline = time.monotonic() + self._opts.failover_timeout
        home: list[int] = []  # the shard number this call was first sent to

        def pick() -> Shard | None:
            shard = self.view.shards.get(home[0]) if home else None
            if shard is None:  # the first send, or its shard gone from the map
                shard = self._pick(where)
                sent = shard is not None and shard.number in self._conns  # else not sent
                home[:] = [shard.number] if sent and shard is not None else []
            return shard

        while True:
            try:
                return await self._retrying(call, pick)
            except TubeNotFound:
                shard = pick()
                young = shard is not None and time.time() - shard.added < NEW_SHARD_S
                if not young or time.monotonic() > deadline:
                    raise
                await self._await_change(deadline)

    async def _spread_put(self, call: Call[T], where: Route) -> T:
        """A put nothing ties to a shard: a shard just added may not have made the
        tube yet (its primary makes P/tubes' tubes as it starts), so try the others."""
        lacking: set[int] = set()
        tried: list[Shard | None] = []

        def pick() -> Shard | None:  # another shard at each retry: any one will do
            tried.append(self._pick(where, lacking))
            return tried[-1]

        while True:
            try:
                return await self._retrying(call, pick)
            except TubeNotFound:
                shard = tried[-1]
                if shard is None or len(lacking) + 1 >= len(self.view.active()):
                    raise
                lacking.add(shard.number)

    def _pick(self, where: Route, skip: set[int] | frozenset[int] = frozenset()) -> Shard | None:
        if where.kind == "id":
            return self.view.shards.get(where.number) if where.number is not None else None
        if where.kind == "key":
            active = self.view.active()
            return sharding.by_hash(where.key, active) if active else None
        if where.kind == "spread":
            active = [s for s in self.view.active() if s.number not in skip]
            led = [s for s in active if s.number in self._conns] or active
            return led[next(self._spread) % len(led)] if led else None
        serving = [s for s in self.view.serving() if s.number in self._conns]
        return serving[0] if serving else None

    async def _retrying(self, call: Call[T], pick: Any) -> T:
        """Run `call` on the shard `pick()` names; after a failover (read-only answer,
        primary gone) read the map again and go on as clients.failover says."""
        deadline = time.monotonic() + self._opts.failover_timeout
        for attempt in range(1, failover.MAX_ATTEMPTS + 1):
            shard = pick()
            conn = self._conns.get(shard.number) if shard is not None else None
            try:
                if conn is None:
                    raise sharding.no_primary(shard)
                return await conn[1].run(call)
            except ConnectionLost:
                if (
                    failover.verdict(failover.Event.LOST_IN_FLIGHT, call.repeatable)
                    is failover.Verdict.RAISE
                ):
                    raise
            except ServerError as exc:
                if not failover.refused_read_only(exc.code):
                    raise
            except NetworkError:
                if attempt == failover.MAX_ATTEMPTS or time.monotonic() > deadline:
                    raise
            await self._await_change(deadline)
        raise sharding.no_primary(pick())

    async def _await_change(self, deadline: float) -> None:
        """Wait for the next read of the map (the watcher's), at most until `deadline`."""
        changed = self._changed
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                await changed.wait()
        except TimeoutError:
            pass

    async def _every(self, call: Call[T], where: Route) -> T:
        conns = [conn for _, conn in list(self._conns.values())]
        if not conns:
            raise sharding.no_primary(None)
        if where.kind == "kick":
            return cast(T, await fanout.kick(call, conns))
        raw = Call(call.function, call.args, list, call.wait, None, call.tolerate, call.repeatable)
        answers = await asyncio.gather(*(conn.run(raw) for conn in conns))
        # The shards first: P/tubes then makes it on a shard added later (and a shard's
        # sync, racing this call, finds it made).
        written: tuple[str, int] | None = None
        change = tube_write(call.function, call.args)
        if change is not None and change.tube_type is not None:
            written = change.tube, await asyncio.to_thread(
                sharding.put_tube, self.endpoints, self.prefix, change.tube, change.tube_type,
                change.opts,
                self._opts.connect_timeout, self._etcd_tls,
            )  # fmt: skip
        elif change is not None:
            written = change.tube, await asyncio.to_thread(
                sharding.drop_tube, self.endpoints, self.prefix, change.tube,
                self._opts.connect_timeout, self._etcd_tls,
            )  # fmt: skip
        if written is not None:  # each shard follows the map for it from that revision on
            told = Call(TUBE_WRITTEN, written, list)
            replies = await asyncio.gather(
                *(conn.run(told) for conn in conns), return_exceptions=True
            )
            if any(isinstance(reply, Exception) for reply in replies):  # as the router says it
                log.warning("a shard was not told of the cluster's tube %s", written[0])
        if where.kind == "summed":
            return call.parse([sharding.summed([a[0] if a else {} for a in answers])])
        if where.kind == "listed":
            return call.parse([[row for a in answers if a and a[0] for row in a[0]]])
        return call.parse(answers[0])

    async def _take(self, call: Call[Any]) -> Any:
        """Fair over shards: each take starts one shard further than the take before
        it began at (as a router's takes do), so takes in flight together start on
        different shards; with none ready, wait on every shard with
        queuebox.await_ready."""
        tube = sharding.split(call.function)[0]  # type: ignore[index]
        timeout = call.args[0] if call.args else None
        deadline = None if timeout is None else time.monotonic() + timeout
        first = self._turn
        self._turn += 1
        while True:
            shards = [s for s in self.view.serving() if s.number in self._conns]
            missing: list[TubeNotFound] = []
            for i in range(len(shards)):
                shard = shards[(first + i) % len(shards)]
                try:
                    got = await self._take_now(call, shard)
                except TubeNotFound as exc:  # a shard just added, its tubes not made yet
                    missing.append(exc)
                    continue
                if got is not None:
                    return got
            if shards and len(missing) == len(shards):
                raise missing[0]
            left = AWAIT_SLICE if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return None
            await self._await_ready(tube, min(left, AWAIT_SLICE), shards)

    async def _take_now(self, call: Call[Any], shard: Shard) -> Any:
        entry = self._conns.get(shard.number)
        if entry is None:
            return None
        conn = entry[1]
        try:
            await conn.ensure_session()
            return await conn.run(Call(call.function, (0,), call.parse, 0.0, call.undo))
        except NetworkError as exc:
            log.warning("take on shard %s: %s", shard.name, exc)
            return None

    async def _await_ready(self, tube: str, wait: float, shards: list[Shard]) -> None:
        conns = [self._conns[s.number][1] for s in shards if s.number in self._conns]
        if not conns:
            await self._await_change(time.monotonic() + wait)
            return
        waits: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(fanout.ready(c, tube, wait)) for c in conns
        ]
        waits.append(asyncio.ensure_future(self._await_change(time.monotonic() + wait)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    # -- what only one node can do ---------------------------------------------------

    async def call(self, function: str, *args: Any, timeout: float | None = 0.0) -> list[Any]:
        """A call by name, on the first shard (what names no shard)."""
        shard = self._pick(Route("first"))
        if shard is None:
            raise sharding.no_primary(None)
        return await self._conns[shard.number][1].call(function, *args, timeout=timeout)

    async def ping(self) -> None:
        await asyncio.gather(*(c.ping() for _, c in list(self._conns.values())))

    async def eval(self, expr: str, *args: Any) -> list[Any]:
        raise _one_node("eval")

    async def call_pushing(self, function: str, args: tuple[Any, ...], on_push: Any) -> list[Any]:
        raise _one_node("events and pushing calls")

    async def identify(self, uuid: bytes | None = None) -> bytes:
        raise _one_node("identify (a session is per shard)")

    def legacy(self, space: int) -> Any:
        raise _one_node("the legacy 1.5 API")

    @property
    def connected(self) -> bool:
        return bool(self._conns) and all(c.connected for _, c in self._conns.values())

    def shard_connections(self) -> dict[str, Connection]:
        """Each shard's name -> its primary's connection (for tools and tests)."""
        names = {s.number: s.name for s in self.view.serving()}
        return {names.get(k, str(k)): conn for k, (_, conn) in self._conns.items()}

    async def cluster(self, tube: str | None = None) -> dict[str, Any]:
        """The cluster per shard, as a router's `queuebox.cluster()` answers it."""
        conns = {k: conn for k, (_, conn) in self._conns.items()}
        return await fanout.view(self.view.serving(), conns, tube)


def _one_node(what: str) -> QueueboxError:
    return QueueboxError(f"{what}: a single node's call; use shard_connections()")


async def _quietly(work: Any) -> None:
    try:
        await work
    except ServerError as exc:
        log.warning("could not re-join the queue session: %s", exc)
