"""A router in front of two shards, with real processes: etcd, two shard
primaries (`serve --shard`), routers (`queuebox router`), and tarantool-python
and asynctnt as clients (docs/cluster.md "Router").

One cluster serves the module (its start is most of the time); a test that
kills something starts its own.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import asynctnt
import pytest
import tarantool

from queuebox.protocol.placement import owner
from tests.e2e.cluster import connect as node_conn
from tests.e2e.cluster import wait_state
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.routing import RouterProc, Sharded
from tests.e2e.serverproc import ServerProc, StartServer, login_tester, unique
from tests.waiting import metric, wait_for, wait_for_async, wait_for_waiting_takes_async


def via(router: RouterProc) -> Any:
    return login_tester(router.port)


def shard_number(node: ServerProc) -> int:
    with node_conn(node) as c:
        return int(c.call("queuebox.shard").data[0]["number"])


def error_of(call: Any) -> tuple[int, str]:
    with pytest.raises(tarantool.DatabaseError) as failed:
        call()
    return failed.value.args[0], failed.value.args[1]


def test_calls_on_tasks_go_to_their_shard_and_puts_spread(
    start_server: StartServer, etcd: EtcdProc, tmp_path: Path
) -> None:
    cluster = Sharded(start_server, etcd, tmp_path)
    nodes = cluster.start()
    router = cluster.router()
    try:
        conn = via(router)
        tube = unique("r")
        conn.call("queue.create_tube", tube, "fifottl", {})
        ids = [conn.call(f"queue.tube.{tube}:put", f"t{i}").data[0][0] for i in range(6)]
        numbers = {shard_number(n[0]) for n in nodes.values()}
        assert {i % 1024 for i in ids} == numbers  # both shards got tasks
        # peek, bury, kick, delete, touch, release, ack: each on the task's own shard.
        assert conn.call(f"queue.tube.{tube}:peek", ids[1]).data[0][:2] == [ids[1], "r"]
        assert conn.call(f"queue.tube.{tube}:bury", ids[1]).data[0][1] == "!"
        assert conn.call(f"queue.tube.{tube}:bury", ids[2]).data[0][1] == "!"
        assert conn.call(f"queue.tube.{tube}:kick", 5).data[0] == 2
        assert conn.call(f"queue.tube.{tube}:delete", ids[0]).data[0][0] == ids[0]
        taken = [conn.call(f"queue.tube.{tube}:take", 1).data[0] for _ in range(5)]
        assert sorted(t[0] for t in taken) == sorted(ids[1:])
        assert conn.call(f"queue.tube.{tube}:touch", taken[0][0], 10).data[0][1] == "t"
        assert conn.call(f"queue.tube.{tube}:release", taken[1][0]).data[0][1] == "r"
        for task in taken[2:]:
            assert conn.call(f"queue.tube.{tube}:ack", task[0]).data[0][1] == "-"
        # statistics: the shards' counts summed.
        stats = conn.call("queue.statistics", tube).data[0]
        assert stats["tasks"]["taken"] == 1 and stats["tasks"]["ready"] == 1
        assert stats["calls"]["put"] == 6 and stats["calls"]["ack"] == 3
        # An id that names no shard; an id of a known shard that has no such task.
        assert (
            error_of(lambda: conn.call(f"queue.tube.{tube}:peek", 1000))[1] == "Task 1000 not found"
        )
        missing = 999 * 1024 + ids[0] % 1024
        assert error_of(lambda: conn.call(f"queue.tube.{tube}:peek", missing))[1] == (
            f"Task {missing} not found"
        )
        # A schedule lives on the shard its name hashes to; the list is every shard's.
        conn.call("queuebox.schedule", "nightly", tube, {"every": 3600})
        conn.call("queuebox.schedule", "hourly", tube, {"every": 60})
        names = sorted(s["name"] for s in conn.call("queuebox.schedules").data[0])
        assert names == ["hourly", "nightly"]
        # A put key has one home (the rule the self-routing client follows too), so a
        # second put of it answers the first task; a result is read on the task's shard.
        kept = unique("k")
        conn.call("queue.create_tube", kept, "fifo", {"result_ttl": 60})
        for n in range(8):
            first = conn.call(f"queue.tube.{kept}:put", n, {"key": f"key-{n}"}).data[0]
            again = conn.call(f"queue.tube.{kept}:put", n, {"key": f"key-{n}"}).data[0]
            assert again[0] == first[0] and first[0] % 1024 == owner(f"key-{n}", numbers)
        results = {}
        for _ in range(8):
            task = conn.call(f"queue.tube.{kept}:take", 1).data[0]
            conn.call(f"queue.tube.{kept}:ack", task[0], {"result": task[2] * 10})
            results[task[0]] = task[2] * 10
        assert {i % 1024 for i in results} == numbers  # both shards hold results
        for task_id, value in results.items():
            read = conn.call("queuebox.result", kept, task_id).data[0]
            assert read["status"] == "done" and read["result"] == value
        conn.close()  # what it held (the taken task) goes back on its shard
        with node_conn(nodes["a"][0]) as a, node_conn(nodes["b"][0]) as b:
            wait_for(
                lambda: (
                    sum(c.call("queue.statistics", tube).data[0]["tasks"]["taken"] for c in (a, b))
                    == 0
                ),
                what="the closed client's task back",
            )
    finally:
        cluster.stop_routers()


async def atnt(port: int) -> asynctnt.Connection:
    conn = asynctnt.Connection(host="127.0.0.1", port=port, username="tester", password="secret")
    await conn.connect()
    return conn


async def test_a_waiting_take_is_woken_by_a_put_on_either_shard_and_a_close_gives_back(
    start_server: StartServer, etcd: EtcdProc, tmp_path: Path
) -> None:
    cluster = Sharded(start_server, etcd, tmp_path)
    nodes = cluster.start()
    r1, r2 = cluster.router(), cluster.router()  # two routers side by side
    a, b = nodes["a"][0], nodes["b"][0]
    tube = unique("w")
    consumer, other, on_a, on_b = [await atnt(p) for p in (r1.port, r2.port, a.port, b.port)]
    try:
        await other.call("queue.create_tube", [tube, "fifottl", {}])  # through router 2
        for shard, node in ((on_b, b), (on_a, a)):  # a put on one shard wakes a take via r1
            waiting = asyncio.ensure_future(consumer.call(f"queue.tube.{tube}:take", [20]))
            await wait_for_waiting_takes_async(node.port, tube)
            task = (await shard.call(f"queue.tube.{tube}:put", ["job"])).body[0]
            assert (await waiting).body[0][0] == task[0]
        # Both taken tasks are the consumer's; a take that times out answers nothing.
        started = time.monotonic()
        assert (await consumer.call(f"queue.tube.{tube}:take", [0.2])).body == []
        assert time.monotonic() - started >= 0.2
        stats = (await other.call("queue.statistics", [tube])).body[0]["tasks"]
        assert stats["taken"] == 2
        await consumer.disconnect()  # its tasks go back on both shards
        for shard in (on_a, on_b):
            await wait_for_async_stat(shard, tube, "ready", 1)
        # Router 2 takes them both: fair over the shards, each once.
        got = [(await other.call(f"queue.tube.{tube}:take", [1])).body[0][0] for _ in range(2)]
        assert sorted(i % 1024 for i in got) == sorted([shard_number(a), shard_number(b)])
        assert (await other.call(f"queue.tube.{tube}:take", [0])).body == []
        assert metric(r2.metrics_port, "queuebox_router_etcd_ok") == 1
        assert metric(r2.metrics_port, "queuebox_router_upstreams") == 2
    finally:
        for conn in (consumer, other, on_a, on_b):
            await conn.disconnect()
        cluster.stop_routers()


async def wait_for_async_stat(conn: asynctnt.Connection, tube: str, key: str, want: int) -> None:
    async def value() -> bool:
        return int((await conn.call("queue.statistics", [tube])).body[0]["tasks"][key]) == want

    await wait_for_async(value, f"{key} of {tube} at {want}")


def test_a_shard_without_its_primary_is_a_retryable_error_until_its_failover(
    start_server: StartServer, etcd: EtcdProc, tmp_path: Path
) -> None:
    cluster = Sharded(start_server, etcd, tmp_path)
    nodes = cluster.start(nodes=2)  # each shard: a primary and a replica
    router = cluster.router()
    conn = via(router)
    try:
        tube = unique("f")
        conn.call("queue.create_tube", tube, "fifo", {})
        ids = [conn.call(f"queue.tube.{tube}:put", i).data[0][0] for i in range(4)]
        a_number = shard_number(nodes["a"][0])
        on_a = next(i for i in ids if i % 1024 == a_number)
        nodes["a"][0].stop(timeout=0.1)  # SIGTERM, then SIGKILL: the primary is gone
        started = time.monotonic()
        code, message = error_of(lambda: conn.call(f"queue.tube.{tube}:peek", on_a))
        assert "shard a" in message and "retried" in message, (code, message)
        assert time.monotonic() - started < 5
        # Shard b goes on meanwhile; after the failover a's calls work, no restart.
        assert conn.call(f"queue.tube.{tube}:put", "b-ok").data[0][2] == "b-ok"
        wait_state(nodes["a"][1], "RUNNING")

        def peeked() -> bool:
            try:
                return conn.call(f"queue.tube.{tube}:peek", on_a).data[0][0] == on_a
            except tarantool.DatabaseError as e:
                assert "retried" in e.args[1] or "not found" in e.args[1], e.args
                return False

        wait_for(peeked, what="shard a served by its new primary through the router")
    finally:
        conn.close()
        cluster.stop_routers()


def test_the_bundled_client_carries_on_through_another_router_with_its_session(
    start_server: StartServer, etcd: EtcdProc, tmp_path: Path
) -> None:
    from queuebox.clients.blocking import connect

    cluster = Sharded(start_server, etcd, tmp_path)
    nodes = cluster.start()
    r1, r2 = cluster.router(), cluster.router()
    tube = unique("s")
    client = connect(
        user="tester", password="secret", addresses=f"127.0.0.1:{r1.port},127.0.0.1:{r2.port}"
    )
    try:
        client.call("queue.cfg", {"ttr": 60})  # a session outlives its connection for 60 s
        client.call("queue.create_tube", tube, "fifottl", {})
        jobs = client.tube(tube)
        numbers = [shard_number(n[0]) for n in nodes.values()]
        # Every put of the bundled client has a key (a made-up one by default),
        # which names its shard: one key homed on each shard, one task on each.
        for number in numbers:
            key = next(k for k in map(str, range(1000)) if owner(k, numbers) == number)
            jobs.put(f"job{number}", key=key)
        taken = [jobs.take(5) for _ in range(2)]
        assert all(t is not None for t in taken)
        assert {t.id % 1024 for t in taken if t is not None} == set(numbers)
        r1.stop(kill=True)  # the router dies: the client goes on through r2, same session
        for task in taken:
            assert task is not None
            assert jobs.ack(task).status == "-"
        assert client.call("queue.statistics", tube)[0]["tasks"]["total"] == 0
    finally:
        client.close()
        cluster.stop_routers()


def test_a_router_killed_gives_its_clients_tasks_back_on_every_shard(
    start_server: StartServer, etcd: EtcdProc, tmp_path: Path
) -> None:
    """A router that crashes (SIGKILL: no goodbye to the shards) releases its clients'
    taken tasks as a disconnect would: its upstreams close, so each shard ends the
    sessions acting through them (no session ttr here), and the tasks are ready again."""
    cluster = Sharded(start_server, etcd, tmp_path)
    nodes = cluster.start()
    router = cluster.router()
    tube = unique("k")
    shards = [nodes["a"][0], nodes["b"][0]]
    client = via(router)
    try:
        client.call("queue.create_tube", [tube, "fifottl", {}])
        for i in range(4):  # round robin: two on each shard
            client.call(f"queue.tube.{tube}:put", [i])
        taken = [client.call(f"queue.tube.{tube}:take", [1]).data[0] for _ in range(4)]
        assert sorted(t[2] for t in taken) == [0, 1, 2, 3]
        assert {t[0] % 1024 for t in taken} == {shard_number(n) for n in shards}
        router.stop(kill=True)
        for node in shards:
            with node_conn(node) as direct:

                def back(direct: Any = direct) -> bool:
                    tasks = direct.call("queue.statistics", [tube]).data[0]["tasks"]
                    return bool(tasks["taken"] == 0 and tasks["ready"] == 2)

                wait_for(back, f"the tasks of shard {node.port} back to ready")
    finally:
        client.close()
        cluster.stop_routers()


def test_tubes_created_and_dropped_in_quick_turns_end_as_the_last_call_left_them(
    start_server: StartServer, etcd: EtcdProc, tmp_path: Path
) -> None:
    """The router's drop (every shard, then P/tubes) races each shard's own sync of
    P/tubes (shard_sync.py reads the whole map on every change): a create and a drop
    in quick turns must leave every shard with the tube after a create, without it
    after a drop, and the map agreeing, once the shards' syncs have settled."""
    from tests.e2e.test_shards import on_map, tubes_of

    cluster = Sharded(start_server, etcd, tmp_path)
    nodes = cluster.start()
    router = cluster.router()
    shards = [nodes["a"][0], nodes["b"][0]]
    kept, dropped = unique("kept"), unique("gone")
    client = via(router)

    def in_map() -> set[str]:
        async def names(m: Any) -> set[str]:
            return set(await m.tubes())

        return set(on_map(etcd, cluster.prefix, names))

    try:
        for turn in range(8):  # bounded: 8 turns of create + drop, no wait in between
            for tube in (kept, dropped):
                client.call("queue.create_tube", [tube, "fifottl", {"if_not_exists": True}])
                if turn < 7 or tube == dropped:
                    client.call(f"queue.tube.{tube}:drop", [])
        for node in shards:
            wait_for(lambda n=node: kept in tubes_of(n), f"{kept} on shard {node.port}")
        wait_for(lambda: kept in in_map() and dropped not in in_map(), "the map settled")
        for node in shards:
            wait_for(lambda n=node: dropped not in tubes_of(n), f"{dropped} gone")
        # One more change of the map: once every shard shows it, each has read the
        # whole map again after the drops, and a late sync did not bring a tube back.
        marker = unique("marker")
        client.call("queue.create_tube", [marker, "fifo", {}])
        for node in shards:
            wait_for(lambda n=node: marker in tubes_of(n), f"{marker} on shard {node.port}")
            assert dropped not in tubes_of(node) and kept in tubes_of(node)
        client.call(f"queue.tube.{kept}:put", ["still here"])
    finally:
        client.close()
        cluster.stop_routers()
