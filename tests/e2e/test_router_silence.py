"""A router answers the calls on a shard that stopped answering (SIGSTOP: its
connections stay up and no close ever comes) within `--shard-silence`, with an
error that names the shard; the shard, back, gives back what the router's
dropped connection had taken; and a take waiting on a healthy shard is not cut
by the pings (docs/cluster.md "Router", "Bad moments").

Real processes: etcd, two one-node shards whose leases outlast the stop (the
map keeps naming the stopped primary, so only the router's own watch can
tell), a router, asynctnt and the bundled client.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asynctnt
import pytest

from queuebox.clients.aio import connect as bundled_connect
from queuebox.clients.errors import ServerError
from queuebox.protocol.placement import owner
from tests.e2e.cluster import connect as node_conn
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.routing import RouterProc, Sharded
from tests.e2e.serverproc import ServerProc, StartServer, unique
from tests.e2e.test_router import shard_number
from tests.waiting import metric, wait_for, wait_for_async

SILENCE_S = 2.0  # the router's --shard-silence here
BOUND_S = 30.0  # how long any one answer is awaited: far above SILENCE_S, far below a hang


@pytest.fixture
def held(start_server: StartServer, etcd: EtcdProc, tmp_path: Path) -> Iterator[Sharded]:
    """Shards a and b whose leader keys outlive a stop of a minute."""
    cluster = Sharded(start_server, etcd, tmp_path, "--etcd-lease-ttl", "60")
    try:
        yield cluster
    finally:
        cluster.stop_routers()


async def atnt(port: int) -> asynctnt.Connection:
    """asynctnt on the router, reading no schema: a schema read goes to the first
    shard (a, stopped here), and asynctnt drops its connection when one fails."""
    conn = asynctnt.Connection(
        host="127.0.0.1", port=port, username="tester", password="secret", fetch_schema=False
    )
    await conn.connect()
    return conn


def keys_on(number: int, numbers: list[int], count: int) -> list[str]:
    """`count` put keys whose home is shard `number`."""
    found = [k for k in (f"k{i}" for i in range(10_000)) if owner(k, numbers) == number]
    return found[:count]


def router_metric(router: RouterProc, name: str, shard: str) -> float:
    return metric(router.metrics_port, name, shard=shard) or 0


def fault(call: Any) -> Any:
    """The error a call ended with (asynctnt's or the bundled client's)."""
    assert isinstance(call, asynctnt.exceptions.TarantoolDatabaseError | ServerError), call
    return call


def shard_tasks(node: ServerProc, tube: str) -> dict[str, int]:
    with node_conn(node) as c:
        return dict(c.call("queue.statistics", tube).data[0]["tasks"])


async def test_calls_to_a_stopped_shard_are_answered_and_nothing_is_lost_or_held_twice(
    held: Sharded,
) -> None:
    nodes = held.start()
    router = held.router("--shard-silence", str(SILENCE_S))
    a, b = nodes["a"][0], nodes["b"][0]
    assert a.proc is not None
    na, nb = shard_number(a), shard_number(b)
    on_a = keys_on(na, [na, nb], 6)
    on_b = keys_on(nb, [na, nb], 1)
    tube = unique("s")
    conn = await atnt(router.port)
    other = await atnt(router.port)
    bundled = await bundled_connect("127.0.0.1", router.port, "tester", "secret")
    put, take = f"queue.tube.{tube}:put", f"queue.tube.{tube}:take"
    try:
        await conn.call("queue.create_tube", [tube, "fifottl", {}])
        taken_id = (await conn.call(put, ["t", {"key": on_a[0]}]))[0][0]
        assert (await conn.call(take, [BOUND_S]))[0][0] == taken_id  # held by conn, on a
        ready_id = (await conn.call(put, ["x", {"key": on_a[1]}]))[0][0]  # ready on a
        # The bundled client's connection to shard a, opened (its key: the task above).
        assert (await bundled.tube(tube).put("x", key=on_a[1])).id == ready_id
        a.proc.send_signal(signal.SIGSTOP)
        try:
            calls = [
                conn.call(f"queue.tube.{tube}:ack", [taken_id]),
                conn.call(put, ["p", {"key": on_a[2]}]),
                bundled.tube(tube).put("q", key=on_a[3]),
            ]
            answered = asyncio.gather(*calls, return_exceptions=True)
            # A take over both shards: its round asks the stopped one too.
            waiting = asyncio.ensure_future(conn.call(take, [BOUND_S]))
            for error in map(fault, await asyncio.wait_for(answered, BOUND_S)):
                assert error.code == 116
                assert error.message.startswith(
                    "shard a stopped answering with the call in flight: it may have run there"
                ), error.message
            assert router_metric(router, "queuebox_router_shard_silent_total", "a") >= 1
            assert router_metric(router, "queuebox_router_shard_pings_total", "a") >= 1
            # The take goes on over the shard that answers, and gets its task.
            put_on_b = (await other.call(put, ["y", {"key": on_b[0]}]))[0][0]
            assert (await asyncio.wait_for(waiting, BOUND_S))[0][0] == put_on_b
            # A new call finds a connection the shard never greeted: never sent, retryable.
            with pytest.raises(asynctnt.exceptions.TarantoolDatabaseError) as refused:
                await asyncio.wait_for(conn.call(put, ["n", {"key": on_a[4]}]), BOUND_S)
            assert refused.value.code == 116
            assert refused.value.message == "shard a stopped answering: the call may be retried"
        finally:
            a.proc.send_signal(signal.SIGCONT)

        async def serves_a() -> bool:
            try:
                await other.call(put, ["z", {"key": on_a[5]}])
            except asynctnt.exceptions.TarantoolDatabaseError as e:
                assert e.code == 116, e.message
                return False
            return True

        await wait_for_async(serves_a, "the router serving shard a again", timeout=BOUND_S)
        # What the dropped connections had taken there went back: held by nobody.
        wait_for(lambda: shard_tasks(a, tube)["taken"] == 0, "shard a holding nothing")
        # Every key's put, sent again, answers the one task it made (or makes it now).
        again = [(await conn.call(put, ["again", {"key": k}]))[0][0] for k in on_a[1:]]
        assert again[0] == ready_id and len(set(again)) == 5
        # The taken task: acked after the stop (the ack ran) or ready again (it did not).
        acked = shard_tasks(a, tube)["done"]
        assert acked in (0, 1)
        expected = set(again) | (set() if acked else {taken_id})
        ids = []
        for _ in range(len(expected) + 1):
            got = await conn.call(take, [0])
            if not got:
                break
            ids.append(got[0][0])
        assert sorted(ids) == sorted(expected)  # each once, nothing lost
    finally:
        await bundled.close()
        await other.disconnect()
        await conn.disconnect()


async def test_a_long_take_on_healthy_shards_is_not_cut_by_the_silence_watch(
    held: Sharded,
) -> None:
    nodes = held.start()
    router = held.router("--shard-silence", str(SILENCE_S))
    na, nb = (shard_number(n[0]) for n in nodes.values())
    tube = unique("w")
    conn = await atnt(router.port)
    other = await atnt(router.port)
    try:
        await conn.call("queue.create_tube", [tube, "fifottl", {}])
        waiting = asyncio.ensure_future(conn.call(f"queue.tube.{tube}:take", [120]))

        def pinged() -> bool:
            # Each shard pinged through two silences' worth of ticks (4 per silence).
            return all(
                router_metric(router, "queuebox_router_shard_pings_total", s) >= 8 for s in "ab"
            )

        await wait_for_async(lambda: asyncio.to_thread(pinged), "pings", timeout=BOUND_S)
        assert not waiting.done()
        for shard in "ab":
            assert router_metric(router, "queuebox_router_shard_silent_total", shard) == 0
        key = keys_on(nb, [na, nb], 1)[0]
        put_id = (await other.call(f"queue.tube.{tube}:put", ["late", {"key": key}]))[0][0]
        assert (await asyncio.wait_for(waiting, BOUND_S))[0][0] == put_id
    finally:
        await other.disconnect()
        await conn.disconnect()
