"""Keyed puts through the self-routing client when a shard misbehaves, with
real processes (etcd, two shard primaries; docs/cluster.md "The self-routing
client"):
- a put whose answer is lost while the cluster's map moves the key's home
  (here shard b resumed after a drain; a shard added does the same) is sent
  again to the shard it went to, which answers the task it made, never to the
  key's new home, which would make a second task (shard a behind the tests'
  TCP proxy: its leader key names the proxy, so the client reaches a through it);
- a put to a shard that stopped answering (SIGSTOP) fails at the call timeout
  with `CallTimeout` (its outcome unknown), and the same put again once the
  shard answers gets the task the first made.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time

import pytest

from queuebox.clients import aio
from queuebox.clients.errors import CallTimeout, TaskNotFound
from queuebox.protocol.placement import owner
from tests.e2e.cluster import connect as node_conn
from tests.e2e.routing import Sharded
from tests.e2e.serverproc import ServerProc, unique
from tests.e2e.test_self_routing import shard_number
from tests.e2e.test_shards import shard_cli
from tests.proxy import CLIENT, FaultProxy, forward
from tests.waiting import wait_for_async

# Bytes per second through the proxy while the put is in flight: its request
# (about 60 bytes) takes seconds, time to resume b and for the client to see
# it; its answer too, time to find the task on a and cut the connection.
SLOW_BYTES_S = 10.0


def total(node: ServerProc, tube: str) -> int:
    with node_conn(node) as direct:
        return int(direct.call("queue.statistics", [tube]).data[0]["tasks"]["total"])


def test_a_keyed_put_sent_again_goes_where_it_went_when_its_home_moved(
    sharded: Sharded,
) -> None:
    upstream: list[int] = []
    proxy = forward(0)
    proxy.upstream = lambda: upstream[0]
    proxy.start()
    try:
        (a1,) = sharded.groups["a"].start(1, "--advertise", f"127.0.0.1:{proxy.port}")
        upstream.append(a1.port)
        (b1,) = sharded.groups["b"].start(1)
        na, nb = shard_number(a1), shard_number(b1)
        etcd, prefix = sharded.etcd, sharded.prefix
        assert shard_cli(etcd, prefix, "drain", "b").returncode == 0
        # A key at home on a while b drains, on b once b is active again.
        key = next(
            k for k in (f"k{i}" for i in range(10_000))
            if owner(k, [na]) == na and owner(k, [na, nb]) == nb
        )  # fmt: skip
        tube = unique("kh")
        asyncio.run(_put_across_the_move(sharded, proxy, a1, b1, na, nb, key, tube))
    finally:
        proxy.stop()


async def _put_across_the_move(
    sharded: Sharded,
    proxy: FaultProxy,
    a1: ServerProc,
    b1: ServerProc,
    na: int,
    nb: int,
    key: str,
    tube: str,
) -> None:
    etcd, prefix = sharded.etcd, sharded.prefix
    async with aio.connect(
        user="tester", password="secret", etcd_endpoints=etcd.endpoints, etcd_prefix=prefix,
        map_refresh=0.2,
    ) as conn:  # fmt: skip
        jobs = await conn.create_tube(tube, "fifottl")
        await wait_for_async(lambda: not conn.view.shards[nb].active, "the client seeing b drain")
        proxy.network.slow(CLIENT, "server", SLOW_BYTES_S)
        # The proxy's copies read the rate before their next read: one call on a
        # through it, and the put's request and answer are the slow ones.
        with contextlib.suppress(TaskNotFound):
            await jobs.peek(na + 1024 * 999)
        started = time.monotonic()
        put = asyncio.ensure_future(jobs.put("once", key=key))  # to a: b drains
        resumed = await asyncio.to_thread(shard_cli, etcd, prefix, "resume", "b")
        assert resumed.returncode == 0, resumed.stderr
        await wait_for_async(lambda: conn.view.shards[nb].active, "the client seeing b again")
        await wait_for_async(lambda: asyncio.to_thread(total, a1, tube), "the put made on a")
        assert not put.done(), "the answer came before the cut: a slower proxy is needed"
        proxy.network.unslow(CLIENT, "server")
        proxy.cut_all()  # the answer is lost: the client sends the put again
        task = await put
        print(f"\nput answered {time.monotonic() - started:.1f} s after it was sent: {task}")
        assert task.id % 1024 == na, "sent again to the key's new home"
        assert (total(a1, tube), total(b1, tube)) == (1, 0)


def test_a_keyed_put_to_a_stopped_shard_times_out_and_is_put_once_when_sent_again(
    sharded: Sharded,
) -> None:
    nodes = sharded.start()
    a1, b1 = nodes["a"][0], nodes["b"][0]
    na, nb = shard_number(a1), shard_number(b1)
    key = next(k for k in (f"k{i}" for i in range(1000)) if owner(k, [na, nb]) == na)
    tube = unique("ks")
    assert a1.proc is not None

    async def run() -> None:
        async with aio.connect(
            user="tester", password="secret", etcd_endpoints=sharded.etcd.endpoints,
            etcd_prefix=sharded.prefix, call_timeout=1.0,
        ) as conn:  # fmt: skip
            jobs = await conn.create_tube(tube, "fifottl")
            a1.proc.send_signal(signal.SIGSTOP)
            try:
                started = time.monotonic()
                # The bound is the test's: a put without one waited forever.
                async with asyncio.timeout(15):
                    with pytest.raises(CallTimeout):
                        await jobs.put("once", key=key)
                print(f"\nCallTimeout after {time.monotonic() - started:.1f} s")
            finally:
                a1.proc.send_signal(signal.SIGCONT)
            again = await jobs.put("once", key=key)
            assert again.id % 1024 == na
            assert (await conn.statistics(tube))["tasks"]["total"] == 1

    asyncio.run(run())
