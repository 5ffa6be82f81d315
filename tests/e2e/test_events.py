"""Task-change events for remote clients: `queue.tube.<t>:events(since, opts)` over real sockets.

A subscriber gets every change of a put/take/touch/release/bury/kick/ack/
delete/delay/ttr/ttl script, in order, as pushes (IPROTO chunks) read by
tarantool-python (`on_push`), asynctnt (`PushIterator`), a raw socket and the
bundled client's `tube.events()`; it resumes after a broken connection, a
server restart or a kill without a gap, from the LSN of the last event or
beat. A position the WAL no longer holds, and a temporary tube's stream,
say so instead of skipping.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import asynctnt
import pytest
import tarantool

from queuebox.clients import EventsLost, aio
from tests.e2e.client_targets import free_port, unique
from tests.e2e.cluster import start_replica
from tests.e2e.serverproc import CALL, RawClient, ServerProc, StartServer, frame, login_tester
from tests.waiting import wait_for, wait_for_async


def script(conn: Any, tube: str) -> list[tuple[str, int, str]]:
    """Every kind of change on a fifottl tube; the (event, id, status) it makes, in order."""
    call = conn.call
    call(f"queue.tube.{tube}:put", "a")  # 0
    call(f"queue.tube.{tube}:take", 0)
    call(f"queue.tube.{tube}:touch", 0, 5)
    call(f"queue.tube.{tube}:release", 0)
    call(f"queue.tube.{tube}:bury", 0)
    call(f"queue.tube.{tube}:kick", 1)
    call(f"queue.tube.{tube}:take", 0)
    call(f"queue.tube.{tube}:ack", 0)
    call(f"queue.tube.{tube}:put", "b", {"delay": 0.2})  # 0
    wait_for(lambda: call(f"queue.tube.{tube}:peek", 0).data[0][1] == "r")
    call(f"queue.tube.{tube}:put", "c", {"ttr": 0.2})  # 1
    call(f"queue.tube.{tube}:take", 0)  # 0: b
    call(f"queue.tube.{tube}:take", 0)  # 1: c, back at its ttr
    call(f"queue.tube.{tube}:ack", 0)
    wait_for(lambda: call(f"queue.tube.{tube}:peek", 1).data[0][1] == "r")
    call(f"queue.tube.{tube}:put", "d", {"ttl": 0.2})  # 2
    wait_for(lambda: call("queue.statistics", tube).data[0]["calls"]["ttl"] == 1)
    call(f"queue.tube.{tube}:delete", 1)
    return [
        ("put", 0, "r"), ("take", 0, "t"), ("touch", 0, "t"), ("release", 0, "r"),
        ("bury", 0, "!"), ("kick", 0, "r"), ("take", 0, "t"), ("ack", 0, "-"),
        ("put", 0, "~"), ("delay", 0, "r"), ("put", 1, "r"), ("take", 0, "t"),
        ("take", 1, "t"), ("ack", 0, "-"), ("ttr", 1, "r"), ("put", 2, "r"),
        ("ttl", 2, "-"), ("delete", 1, "-"),
    ]  # fmt: skip


def changes(pushes: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    return [(p["event"], p["task"][0], p["task"][1]) for p in pushes if "task" in p]


class Subscriber(threading.Thread):
    """tarantool-python holding events(since, {timeout}) open in a thread of its own."""

    def __init__(self, port: int, tube: str, since: int | None, timeout: float) -> None:
        super().__init__(daemon=True)
        self.args = (port, tube, since, timeout)
        self.pushes: list[dict[str, Any]] = []
        self.answer: list[Any] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        port, tube, since, timeout = self.args
        try:
            conn = tarantool.Connection(
                "127.0.0.1", port, user="tester", password="secret", socket_timeout=timeout + 20
            )
        except BaseException as exc:
            self.error = exc
            return
        try:
            self.answer = conn.call(
                f"queue.tube.{tube}:events",
                since,
                {"timeout": timeout},
                on_push=lambda data, ctx: self.pushes.extend(data),
            ).data
        except BaseException as exc:
            self.error = exc
        finally:
            conn.close()

    def started(self) -> Subscriber:
        self.start()
        wait_for(lambda: bool(self.pushes) or self.error is not None)
        return self


@pytest.fixture
def server(start_server: StartServer) -> ServerProc:
    return start_server("--events-heartbeat-s", "0.2")


def test_a_subscriber_gets_every_change_in_order_with_tarantool_python(
    server: ServerProc,
) -> None:
    tube = unique("ev")
    conn = login_tester(server.port)
    conn.call("queue.create_tube", tube, "fifottl")
    subscriber = Subscriber(server.port, tube, None, timeout=30).started()
    assert subscriber.pushes[0] == {"event": "beat", "lsn": subscriber.pushes[0]["lsn"]}
    expected = script(conn, tube)
    wait_for(lambda: len(changes(subscriber.pushes)) == len(expected))
    assert changes(subscriber.pushes) == expected
    events = [p for p in subscriber.pushes if "task" in p]
    lsns = [p["lsn"] for p in events]
    assert lsns == sorted(lsns) and len(set(lsns)) == len(lsns)
    assert all(p["tube"] == tube and isinstance(p["ts"], float) for p in events)
    assert events[0]["task"] == [0, "r", "a"] and events[7]["task"] == [0, "-", "a"]
    # A second subscriber from the first one's start position reads the same back.
    replay = Subscriber(server.port, tube, subscriber.pushes[0]["lsn"], timeout=1).started()
    replay.join(15)
    assert changes(replay.pushes) == expected
    assert [p["lsn"] for p in replay.pushes if "task" in p] == lsns
    assert replay.answer is not None and replay.answer[0] >= lsns[-1]
    # Read back, the tasks that left carry their data too, though a delete record
    # holds only the key (format 4): the stream read their puts.
    assert [p["task"] for p in replay.pushes if "task" in p] == [p["task"] for p in events]
    # Resumed after a task's put, its ack has the id and status, and nil data.
    late = Subscriber(server.port, tube, lsns[6], timeout=1).started()
    late.join(15)
    assert [p["task"] for p in late.pushes if "task" in p][0] == [0, "-", None]
    conn.close()


def test_a_broken_connection_resumes_from_the_last_position_without_a_gap(
    server: ServerProc,
) -> None:
    tube = unique("ev")
    conn = login_tester(server.port)
    conn.call("queue.create_tube", tube, "fifo")
    witness = Subscriber(server.port, tube, None, timeout=30).started()
    raw = RawClient(server.port, timeout=10)
    raw.send(frame(CALL, 7, {0x22: f"queue.tube.{tube}:events", 0x21: [None]}))
    seen: list[dict[str, Any]] = []
    seen += raw.recv().data  # the start position
    for n in range(5):
        conn.call(f"queue.tube.{tube}:put", n)
    while len(changes(seen)) < 5:
        reply = raw.recv()
        assert reply.code == 0x80 and reply.sync == 7
        seen += reply.data
    raw.close()  # the client dies mid-stream
    for n in range(5, 9):
        conn.call(f"queue.tube.{tube}:put", n)
    conn.call(f"queue.tube.{tube}:take", 0)
    position = seen[-1]["lsn"]
    resumed = Subscriber(server.port, tube, position, timeout=1).started()
    resumed.join(15)
    wait_for(lambda: len(changes(witness.pushes)) == 10)
    assert changes(seen) + changes(resumed.pushes) == changes(witness.pushes)
    assert [p["task"][2] for p in seen + resumed.pushes if p["event"] == "put"] == list(range(9))
    conn.close()


async def test_asynctnt_reads_the_pushes(server: ServerProc) -> None:
    tube = unique("ev")
    conn = asynctnt.Connection(
        host="127.0.0.1", port=server.port, username="tester", password="secret"
    )
    await conn.connect()
    try:
        await conn.call("queue.create_tube", [tube, "utube"])
        stream = conn.call(f"queue.tube.{tube}:events", [None, {"timeout": 3}], push_subscribe=True)
        pushes = asynctnt.PushIterator(stream)
        (first,) = await pushes.__anext__()  # each push is its DATA: [event]
        assert first["event"] == "beat"
        await conn.call(f"queue.tube.{tube}:put", ["x", {"utube": "u1"}])
        await conn.call(f"queue.tube.{tube}:take", [0])
        got = [(await pushes.__anext__())[0], (await pushes.__anext__())[0]]
        assert [(p["event"], p["task"]) for p in got] == [
            ("put", [0, "r", "x"]),
            ("take", [0, "t", "x"]),
        ]
        await conn.call("queuebox.events.stop", [first_sync(stream)])
        answer = await stream
        assert answer.body == [got[-1]["lsn"]]
    finally:
        await conn.disconnect()


def first_sync(stream: Any) -> int:
    return int(stream._response.sync)  # asynctnt keeps the request's response there


async def test_the_bundled_client_iterates_across_restarts_and_a_kill(
    start_server: StartServer,
) -> None:
    port = free_port()
    server = start_server("--listen", f"127.0.0.1:{port}", "--events-heartbeat-s", "0.2")
    async with aio.connect(
        "127.0.0.1", port, "tester", "secret", backoff_initial=0.02, backoff_max=0.2
    ) as conn:
        tube = await conn.create_tube(unique("ev"), "fifottl")
        got: list[tuple[str, int, Any]] = []
        events = tube.events()

        async def read() -> None:
            async for event in events:
                got.append((event.event, event.task.id, event.task.data))

        reader = asyncio.ensure_future(read())
        await wait_for_async(lambda: events.position is not None)
        await tube.put("a")
        await wait_for_async(lambda: len(got) == 1)
        server.stop()  # a clean stop: the stream ends with its position
        await wait_for_async(lambda: not conn.connected)
        server.start()
        await tube.put("b")
        await wait_for_async(lambda: len(got) == 2)
        server.proc.kill()  # type: ignore[union-attr]
        server.proc.wait(10)  # type: ignore[union-attr]
        await wait_for_async(lambda: not conn.connected)
        server.start()
        task = await tube.take(0)
        assert task is not None
        await tube.ack(task)
        await wait_for_async(lambda: len(got) == 4)
        assert got == [("put", 0, "a"), ("put", 1, "b"), ("take", 0, "a"), ("ack", 0, "a")]
        await events.aclose()
        await asyncio.wait_for(reader, 5)
        # The server's stream ended too: a fresh iterator from the old position reads all.
        again = tube.events(since=0)
        replayed = [await again.__anext__() for _ in range(4)]
        assert [(e.event, e.task.id) for e in replayed] == [(g[0], g[1]) for g in got]
        await again.aclose()


async def test_a_temporary_tube_streams_live_and_says_it_cannot_resume(
    start_server: StartServer,
) -> None:
    port = free_port()
    server = start_server("--listen", f"127.0.0.1:{port}")
    async with aio.connect("127.0.0.1", port, "tester", "secret", backoff_max=0.2) as conn:
        tube = await conn.create_tube(unique("tmp"), "fifo", temporary=True)
        events = tube.events()
        first = asyncio.ensure_future(events.__anext__())
        await wait_for_async(lambda: events._sync is not None)
        await tube.put("x")
        event = await asyncio.wait_for(first, 10)
        assert (event.event, event.task.data, event.lsn) == ("put", "x", None)
        with pytest.raises(EventsLost, match="is temporary: its changes are never written"):
            await tube.events(since=1).__anext__()
        server.proc.kill()  # type: ignore[union-attr]
        server.proc.wait(10)  # type: ignore[union-attr]
        with pytest.raises(EventsLost, match="is temporary and the connection broke"):
            await asyncio.wait_for(events.__anext__(), 10)


def test_a_position_the_wal_no_longer_holds_is_an_error_not_a_gap(
    start_server: StartServer,
) -> None:
    server = start_server("--checkpoint-count", "1", "--wal-segment-size", "1")
    tube = unique("ev")
    conn = login_tester(server.port)
    conn.call("queue.create_tube", tube, "fifo")
    conn.call(f"queue.tube.{tube}:put", "a")
    conn.call("queuebox.snapshot")
    conn.call(f"queue.tube.{tube}:put", "b")
    conn.call("queuebox.snapshot")  # the WAL before it is gone
    with pytest.raises(tarantool.DatabaseError) as caught:
        conn.call(f"queue.tube.{tube}:events", 1, {"timeout": 1})
    assert caught.value.args[0] == 32
    assert caught.value.args[1].startswith("events lost: LSN 2 is no longer in the WAL")
    with pytest.raises(tarantool.DatabaseError, match="events lost: LSN 999999 is ahead"):
        conn.call(f"queue.tube.{tube}:events", 999999)
    with pytest.raises(tarantool.DatabaseError, match="since must be an LSN"):
        conn.call(f"queue.tube.{tube}:events", -1)
    with pytest.raises(tarantool.DatabaseError) as missing:
        conn.call("queue.tube.nosuch:events")
    assert missing.value.args[0] == 33
    conn.close()


def test_reading_events_needs_the_read_right_on_the_tube(start_server: StartServer) -> None:
    toml = (
        '[users.tester]\npassword = "secret"\nrights = "all"\n'
        '[users.watcher]\npassword = "w"\nrights = "none"\nread = ["jobs*"]\n'
    )
    server = start_server(toml=toml)
    conn = login_tester(server.port)
    for tube in ("jobs1", "secret"):
        conn.call("queue.create_tube", tube, "fifo")
    watcher = login_tester(server.port, user="watcher", password="w")
    answer = watcher.call("queue.tube.jobs1:events", None, {"timeout": 0.1}).data
    assert isinstance(answer[0], int)
    with pytest.raises(tarantool.DatabaseError) as caught:
        watcher.call("queue.tube.secret:events", None, {"timeout": 0.1})
    assert caught.value.args == (
        42,
        "Execute access to function 'queue.tube.secret:events' is denied for user 'watcher'",
    )
    raw = RawClient(server.port)
    raw.auth("watcher", "w")
    raw.send(frame(CALL, 1, {0x22: "queue.tube.jobs1:events", 0x21: [None, {"timeout": 0}]}))
    replies = [raw.recv(), raw.recv()]
    assert replies[0].code == 0x80 and replies[1].data == [replies[0].data[0]["lsn"]]
    raw.close()
    watcher.close()
    conn.close()


def test_a_replica_streams_the_changes_it_replicates(start_server: StartServer) -> None:
    primary = start_server()
    tube = unique("ev")
    conn = login_tester(primary.port)
    conn.call("queue.create_tube", tube, "fifo")
    replica = start_replica(start_server, primary, "--events-heartbeat-s", "0.2")
    wait_for(lambda: _has_tube(replica.port, tube))
    subscriber = Subscriber(replica.port, tube, 0, timeout=30).started()
    conn.call(f"queue.tube.{tube}:put", "x")
    conn.call(f"queue.tube.{tube}:take", 0)
    wait_for(lambda: len(changes(subscriber.pushes)) == 2)
    assert changes(subscriber.pushes) == [("put", 0, "r"), ("take", 0, "t")]
    conn.close()


def _has_tube(port: int, tube: str) -> bool:
    probe = login_tester(port)
    try:
        return tube in probe.call("queue.statistics").data[0]
    except tarantool.DatabaseError:
        return False
    finally:
        probe.close()
