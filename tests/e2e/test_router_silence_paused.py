"""A shard that stopped reading a router's connection on purpose (its
`max_in_flight_per_conn` requests wait there: readiness waits for takes) is
healthy, not silent: the router must not drop that connection, nor so give
back the client's taken tasks there (docs/cluster.md "A shard that stops
answering": "a take waiting on a shard that answers is never cut"). But one
whose host takes no more bytes on it (as on a flow that died on the way,
while new connections are greeted) is dropped, its calls answered: no hang.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.etcdproc import EtcdProc
from tests.e2e.routing import RouterProc, Sharded
from tests.e2e.serverproc import ServerProc, StartServer, unique
from tests.e2e.test_router import shard_number
from tests.e2e.test_router_silence import BOUND_S, atnt, keys_on, router_metric, shard_tasks
from tests.waiting import wait_for_async

SILENCE_S = 2.0


@pytest.fixture
def tight(
    start_server: StartServer, etcd: EtcdProc, tmp_path: Path
) -> Iterator[tuple[dict[str, list[ServerProc]], RouterProc]]:
    """Shards a and b that stop reading a connection with one request waiting
    there, and a router on them."""
    cluster = Sharded(start_server, etcd, tmp_path, "--max-in-flight-per-conn", "1")
    try:
        nodes = cluster.start()
        yield nodes, cluster.router("--shard-silence", str(SILENCE_S))
    finally:
        cluster.stop_routers()


async def test_a_shard_not_reading_a_waiting_connection_is_not_dropped(
    tight: tuple[dict[str, list[ServerProc]], RouterProc],
) -> None:
    nodes, router = tight
    a, b = nodes["a"][0], nodes["b"][0]
    na, nb = shard_number(a), shard_number(b)
    tube, idle = unique("p"), unique("q")
    conn = await atnt(router.port)
    try:
        await conn.call("queue.create_tube", [tube, "fifottl", {}])
        await conn.call("queue.create_tube", [idle, "fifottl", {}])
        key = keys_on(na, [na, nb], 1)[0]
        put_id = (await conn.call(f"queue.tube.{tube}:put", ["t", {"key": key}]))[0][0]
        assert (await conn.call(f"queue.tube.{tube}:take", [BOUND_S]))[0][0] == put_id
        # A take that waits: the router's readiness wait on each shard fills
        # the connection's one in-flight place, so the shard reads it no more.
        waiting = asyncio.ensure_future(conn.call(f"queue.tube.{idle}:take", [120]))

        def counts(name: str) -> list[float]:
            return [router_metric(router, f"queuebox_router_shard_{name}_total", s) for s in "ab"]

        # Two silences' worth of ticks (4 per silence), each with a ping unread.
        def enough() -> bool:
            return min(counts("pings")) >= 8

        await wait_for_async(lambda: asyncio.to_thread(enough), "pings", timeout=BOUND_S)
        assert not waiting.done()
        assert counts("silent") == [0, 0]
        assert shard_tasks(a, tube)["taken"] == 1  # still held by conn
        waiting.cancel()
    finally:
        await conn.disconnect()


async def test_a_shard_that_takes_no_more_bytes_is_dropped_though_it_greets(
    tight: tuple[dict[str, list[ServerProc]], RouterProc],
) -> None:
    # Its host acknowledges nothing more on the connection (the shard reads it
    # no more and its receive buffer is full): as a flow that died on the way.
    nodes, router = tight
    na, nb = (shard_number(n[0]) for n in nodes.values())
    tube, idle = unique("f"), unique("g")
    conn = await atnt(router.port)
    try:
        await conn.call("queue.create_tube", [tube, "fifottl", {}])
        await conn.call("queue.create_tube", [idle, "fifottl", {}])
        waiting = asyncio.ensure_future(conn.call(f"queue.tube.{idle}:take", [120]))
        key = keys_on(na, [na, nb], 1)[0]
        big = "x" * (1 << 20)
        puts = [conn.call(f"queue.tube.{tube}:put", [big, {"key": key}]) for _ in range(24)]
        answered = await asyncio.wait_for(asyncio.gather(*puts, return_exceptions=True), BOUND_S)
        silent = router_metric(router, "queuebox_router_shard_silent_total", "a")
        assert silent >= 1
        errors = [e for e in answered if isinstance(e, Exception)]
        assert errors and all("shard a stopped answering" in str(e) for e in errors)
        waiting.cancel()
    finally:
        await conn.disconnect()
