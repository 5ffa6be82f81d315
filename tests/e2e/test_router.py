"""A router in front of two shards, with real processes: etcd, two shard
primaries (`serve --shard`), routers (`queuebox router`), and tarantool-python
and asynctnt as clients (docs/cluster.md "Router").

One cluster serves the module (its start is most of the time); a test that
kills something starts its own.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import asynctnt
import pytest
import tarantool

from queuebox.protocol import ResponseDecoder, encode_auth, encode_call, encode_ping, scramble
from queuebox.protocol.greeting import parse_greeting
from queuebox.protocol.placement import owner
from tests.e2e.cluster import connect as node_conn
from tests.e2e.cluster import wait_state
from tests.e2e.routing import Sharded
from tests.e2e.serverproc import ServerProc, unique
from tests.waiting import (
    metric,
    metric_types,
    wait_for,
    wait_for_async,
    wait_for_waiting_takes_async,
)


def shard_number(node: ServerProc) -> int:
    with node_conn(node) as c:
        return int(c.call("queuebox.shard").data[0]["number"])


def error_of(call: Any) -> tuple[int, str]:
    with pytest.raises(tarantool.DatabaseError) as failed:
        call()
    return failed.value.args[0], failed.value.args[1]


def test_calls_on_tasks_go_to_their_shard_and_puts_spread(
    sharded: Sharded,
) -> None:
    nodes = sharded.start()
    router = sharded.router()
    conn = sharded.login(router)
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
    assert error_of(lambda: conn.call(f"queue.tube.{tube}:peek", 1000))[1] == "Task 1000 not found"
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
                sum(c.call("queue.statistics", tube).data[0]["tasks"]["taken"] for c in (a, b)) == 0
            ),
            what="the closed client's task back",
        )


async def atnt(port: int) -> asynctnt.Connection:
    conn = asynctnt.Connection(host="127.0.0.1", port=port, username="tester", password="secret")
    await conn.connect()
    return conn


async def test_a_waiting_take_is_woken_by_a_put_on_either_shard_and_a_close_gives_back(
    sharded: Sharded,
) -> None:
    nodes = sharded.start()
    r1, r2 = sharded.router(), sharded.router()  # two routers side by side
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
        # What only grows is a counter (rate() reads it right), what goes both ways a gauge.
        types = metric_types(r2.metrics_port)
        for family in ("forwarded", "own_calls", "shard_pings", "shard_silent"):
            assert types[f"queuebox_router_{family}"] == "counter", family
        assert types["queuebox_router_upstreams"] == "gauge"
    finally:
        for conn in (consumer, other, on_a, on_b):
            await conn.disconnect()


async def wait_for_async_stat(conn: asynctnt.Connection, tube: str, key: str, want: int) -> None:
    async def value() -> bool:
        return int((await conn.call("queue.statistics", [tube])).body[0]["tasks"][key]) == want

    await wait_for_async(value, f"{key} of {tube} at {want}")


def test_a_shard_without_its_primary_is_a_retryable_error_until_its_failover(
    sharded: Sharded,
) -> None:
    nodes = sharded.start(nodes=2)  # each shard: a primary and a replica
    router = sharded.router()
    conn = sharded.login(router)
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


def test_the_bundled_client_carries_on_through_another_router_with_its_session(
    sharded: Sharded,
) -> None:
    from queuebox.clients.blocking import connect

    nodes = sharded.start()
    r1, r2 = sharded.router(), sharded.router()
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


class RawConn:
    """A logged-in socket that sends bytes as given and reads replies by sync."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = ResponseDecoder()
        self.replies: dict[int, Any] = {}
        salt = parse_greeting(self._exactly(128)).salt
        self.sock.sendall(encode_auth(1, "tester", scramble(salt, "secret")))
        assert self.wait([1])[1].ok

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            data += self.sock.recv(n - len(data))
        return data

    def wait(self, syncs: list[int]) -> dict[int, Any]:
        while not set(syncs) <= set(self.replies):
            for reply in self.decoder.feed(self.sock.recv(65536)):
                self.replies[reply.sync] = reply
        return {s: self.replies.pop(s) for s in syncs}


def test_pipelined_frames_of_every_shape_are_answered_and_a_frame_cut_anywhere_waits(
    sharded: Sharded,
) -> None:
    """The router reads a put, a take and a call on a task from a few bytes of
    their frames and hands the rest to its decoder: one write of both, and a
    frame cut in two, get every answer a node gives."""
    nodes = sharded.start()
    router = sharded.router()
    tube = unique("p")
    raw = RawConn(router.port)
    try:
        put = f"queue.tube.{tube}:put"
        raw.sock.sendall(encode_call(2, "queue.create_tube", [tube, "fifo"]))
        assert raw.wait([2])[2].ok
        stream = [
            encode_call(10, put, ["a"]),
            encode_call(11, put, ["b", {}]),
            encode_call(12, put, ["c", {"key": unique("k")}]),
            encode_ping(13),  # no call: the decoder's way, the order kept
            encode_call(14, put, ["d"], call16=True),
            encode_call(15, put, ["e", "not options"]),
        ]
        raw.sock.sendall(b"".join(stream))
        put_replies = raw.wait([10, 11, 12, 13, 14, 15])
        assert [r.data[0][2] for s, r in put_replies.items() if s in (10, 11, 12, 15)] == list(
            "abce"
        )
        assert put_replies[13].ok and put_replies[14].data == [
            [put_replies[14].data[0][0], "r", "d"]
        ]
        ids = [put_replies[s].data[0][0] for s in (10, 11, 12, 14, 15)]
        # round robin moves on per read: one write's puts may all be on one shard
        assert {i % 1024 for i in ids} <= {shard_number(n[0]) for n in nodes.values()}
        # Calls on tasks by id, a take, an id of no shard and one that is not an id;
        # the fourth frame cut in two: its first half waits for the rest.
        stream = [
            encode_call(20, f"queue.tube.{tube}:peek", [ids[0]]),
            encode_call(21, f"queue.tube.{tube}:delete", [ids[1]]),
            encode_call(22, f"queue.tube.{tube}:peek", [1000]),
            encode_call(23, f"queue.tube.{tube}:peek", [ids[2] + 0.5]),
            encode_call(24, f"queue.tube.{tube}:take", [1]),
            encode_call(25, f"queue.tube.{tube}:bury", [ids[3]]),
        ]
        whole = b"".join(stream)
        cut = len(b"".join(stream[:3])) + 7
        raw.sock.sendall(whole[:cut])
        first = raw.wait([20, 21, 22])
        raw.sock.sendall(whole[cut:])
        later = raw.wait([23, 24, 25])
        assert first[20].data[0][:3] == [ids[0], "r", "a"]
        assert first[21].data[0][:2] == [ids[1], "-"]
        assert first[22].error_message == "Task 1000 not found"
        assert later[23].error_code != 0  # what a node says of a float id
        assert later[24].data[0][0] in ids and later[24].data[0][1] == "t"
        assert later[25].data[0][:2] == [ids[3], "!"]
    finally:
        raw.sock.close()


def test_a_router_killed_gives_its_clients_tasks_back_on_every_shard(
    sharded: Sharded,
) -> None:
    """A router that crashes (SIGKILL: no goodbye to the shards) releases its clients'
    taken tasks as a disconnect would: its upstreams close, so each shard ends the
    sessions acting through them (no session ttr here), and the tasks are ready again."""
    nodes = sharded.start()
    router = sharded.router()
    tube = unique("k")
    shards = [nodes["a"][0], nodes["b"][0]]
    client = sharded.login(router)
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


def test_tubes_created_and_dropped_in_quick_turns_end_as_the_last_call_left_them(
    sharded: Sharded,
) -> None:
    """The router's drop (every shard, then P/tubes) races each shard's own sync of
    P/tubes (shard_sync.py reads the whole map on every change): a create and a drop
    in quick turns must leave every shard with the tube after a create, without it
    after a drop, and the map agreeing, once the shards' syncs have settled."""
    from tests.e2e.test_shards import on_map, tubes_of

    nodes = sharded.start()
    router = sharded.router()
    shards = [nodes["a"][0], nodes["b"][0]]
    kept, dropped = unique("kept"), unique("gone")
    client = sharded.login(router)

    def in_map() -> set[str]:
        async def names(m: Any) -> set[str]:
            return set(await m.tubes())

        return set(on_map(sharded.etcd, sharded.prefix, names))

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
