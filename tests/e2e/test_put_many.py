"""`Tube.put_many` (docs/client.md) against a real node and a real cluster of two
shards through the self-routing client: results in the order of the items, the
window, the first error stops the batch, each task its own key, round robin over
the shards and a utube's tasks on its home shard, a cut connection, puts refused as
read-only sent again to the writable instance; `Connection.run_many` of any calls
(takes, acks) the same way.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from queuebox.clients import aio
from queuebox.clients.calls import modern
from queuebox.clients.errors import ConnectionLost, QueueFull
from tests.e2e.client_targets import Target, unique
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.routing import Sharded
from tests.e2e.serverproc import StartServer
from tests.e2e.test_client_async import conn, proxy_to, target
from tests.e2e.test_client_failover import FAST, Pair, pair, replicated
from tests.proxy import FaultProxy, forward
from tests.waiting import wait_for_async

__all__ = ["conn", "pair", "proxy_to", "target"]  # other tests' fixtures, used here


class Counted:
    """The items 0, 1, ... `count` - 1 of a put_many, and how many it has taken."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.pulled = 0

    def __iter__(self) -> Iterator[int]:
        for n in range(self.count):
            self.pulled += 1
            yield n


async def test_put_many_answers_in_order_each_task_with_a_key_of_its_own(
    conn: aio.Connection,
) -> None:
    jobs = await conn.create_tube(unique("many"), "fifottl")
    tasks = await jobs.put_many(["same"] * 300 + list(range(300)), window=7, pri=2)
    assert [t.data for t in tasks] == ["same"] * 300 + list(range(300))
    assert len({t.id for t in tasks}) == 600  # one key each: no put answered another's
    stats = await jobs.statistics()
    assert stats["tasks"]["ready"] == 600
    assert (await jobs.take(0)).id == tasks[0].id  # type: ignore[union-attr]
    await jobs.truncate()
    await jobs.drop()


async def test_put_many_gives_each_task_a_key_of_its_own_over_the_callers(
    conn: aio.Connection,
) -> None:
    jobs = await conn.create_tube(unique("own"), "fifo")
    tasks = await jobs.put_many(["a", "b", "c"], window=2, key="order-7")
    assert [t.data for t in tasks] == ["a", "b", "c"] and len({t.id for t in tasks}) == 3
    await jobs.truncate()
    await jobs.drop()


async def test_run_many_runs_any_calls_in_order(conn: aio.Connection) -> None:
    jobs = await conn.create_tube(unique("calls"), "fifo")
    tasks = await jobs.put_many(range(40), window=16)
    taken = await conn.run_many([modern.take(jobs.name, 0) for _ in range(41)], window=8)
    assert [t.data if t else None for t in taken] == [*range(40), None]
    acked = await conn.run_many([modern.ack(jobs.name, t.id) for t in tasks], window=8)
    assert [t.id for t in acked] == [t.id for t in tasks]
    assert (await jobs.statistics())["tasks"]["done"] == 40
    await jobs.drop()


async def test_put_many_with_one_key_of_the_caller_makes_one_task(target: Target) -> None:
    async with aio.connect(**target.kwargs(), put_keys=False) as plain:
        jobs = await plain.create_tube(unique("keyed"), "fifo")
        tasks = await jobs.put_many(["a", "b", "c"], window=1, key="order-7")
        assert {t.id for t in tasks} == {tasks[0].id}  # the 2nd and 3rd answer the 1st
        assert (await jobs.statistics())["tasks"]["ready"] == 1
        await jobs.truncate()
        await jobs.drop()


async def test_put_many_stops_at_the_first_error_and_raises_it(conn: aio.Connection) -> None:
    limited = await conn.create_tube(unique("lim"), "limfifottl", capacity=5)
    with pytest.raises(QueueFull):
        await limited.put_many(range(50), window=4)
    assert (await limited.statistics())["tasks"]["ready"] == 5
    await limited.truncate()
    await limited.drop()


async def test_a_cut_connection_fails_the_batch_with_connection_lost(
    target: Target, conn: aio.Connection, proxy_to: FaultProxy
) -> None:
    jobs = await conn.create_tube(unique("cut"), "fifo")
    items = Counted(200_000)

    assert target.proc is not None and target.proc.proc is not None
    server = target.proc.proc.pid
    async with aio.connect(
        "127.0.0.1", proxy_to.port, target.user, target.password, put_keys=False,
        backoff_initial=0.01,
    ) as cut:  # fmt: skip
        # The server stopped: no reply comes, so the window's puts are in flight
        # when the connection goes (a fast server could answer them all first).
        os.kill(server, signal.SIGSTOP)
        try:
            batch = asyncio.ensure_future(cut.tube(jobs.name).put_many(items, window=64))
            await wait_for_async(lambda: items.pulled >= 64, "a window of puts sent")
            proxy_to.cut_all()
            with pytest.raises(ConnectionLost):  # no key: not sent again, the caller decides
                await asyncio.wait_for(batch, 30)
        finally:
            os.kill(server, signal.SIGCONT)
    await jobs.truncate()
    await jobs.drop()


def test_put_many_through_the_self_routing_client_spreads_keeps_order_and_homes_a_utube(
    start_server: StartServer, etcd: EtcdProc, tmp_path: Path
) -> None:
    cluster = Sharded(start_server, etcd, tmp_path)
    primaries = [nodes[0] for nodes in cluster.start().values()]
    tube = unique("m")

    async def run() -> None:
        async with aio.connect(
            user="tester", password="secret", etcd_endpoints=etcd.endpoints,
            etcd_prefix=cluster.prefix,
        ) as conn:  # fmt: skip
            jobs = await conn.create_tube(tube, "fifo")
            tasks = await jobs.put_many(range(400), window=32)
            assert [t.data for t in tasks] == list(range(400))
            assert sorted(Counter(t.id % 1024 for t in tasks).values()) == [200, 200]
            await window_on_each_shard(jobs)
            utubes = await conn.create_tube(f"{tube}_u", "utube")
            homed = await utubes.put_many(range(20), window=8, utube="u1")
            assert [t.data for t in homed] == list(range(20))
            assert len({t.id % 1024 for t in homed}) == 1  # one utube, one shard
            single = await conn.create_tube(f"{tube}_l", "limfifottl", capacity=3)
            with pytest.raises(QueueFull):  # 3 a shard, then the first refusal stops it
                await single.put_many(range(100), window=2)
            assert (await single.statistics())["tasks"]["ready"] == 6
            wide = await conn.create_tube(f"{tube}_w", "limfifottl", capacity=150)
            with pytest.raises(QueueFull):  # refused in the middle of a burst of 64
                await wide.put_many(range(2000), window=64)
            assert (await wide.statistics())["tasks"]["ready"] == 300
            taken = await conn.run_many([modern.take(tube, 0) for _ in range(10)], window=4)
            assert sorted(t.data for t in taken if t is not None) == list(range(10))
            assert len({t.id % 1024 for t in taken}) == 2  # taken from both shards
            # Each ack goes to its task's shard (round robin would send half of
            # them to the other shard, which answers that it has no such task).
            acked = await conn.run_many([modern.ack(tube, t.id) for t in taken], window=4)
            assert [t.id for t in acked] == [t.id for t in taken]
            assert (await jobs.statistics())["tasks"]["taken"] == 0

    async def window_on_each_shard(jobs: aio.Tube) -> None:
        # The window holds on each shard's connection, as on one node's: with both
        # shards stopped (no reply can come), a burst sends 16 to each and waits.
        items = Counted(100)
        pids = [proc.proc.pid for proc in primaries if proc.proc is not None]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            batch = asyncio.ensure_future(jobs.put_many(items, window=16))
            await wait_for_async(lambda: items.pulled >= 32, "a window of puts sent to each shard")
            assert items.pulled == 32  # no more before a reply
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        assert [t.data for t in await batch] == list(range(100))

    asyncio.run(run())


async def test_put_many_refused_as_read_only_goes_to_the_writable_one(pair: Pair) -> None:
    # As test_client_failover's put: the address found writable starts refusing
    # changes while the client stays connected; every refused put is sent again.
    tube_name = unique("refused")
    with forward(pair.primary.port) as proxy:
        addresses = [f"127.0.0.1:{proxy.port}", pair.at(pair.primary)]
        async with aio.connect(addresses=addresses, **FAST) as conn:
            tube = await conn.create_tube(tube_name, "fifo")
            replicated(pair, tube_name)
            proxy.switch(pair.replica.port)
            tasks = await tube.put_many(range(50), window=16)
            assert [t.data for t in tasks] == list(range(50))
            assert len({t.id for t in tasks}) == 50
            assert conn.port == pair.primary.port
            assert (await tube.statistics())["tasks"]["ready"] == 50
