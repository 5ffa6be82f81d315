"""asynctnt-queue, a real third-party queue client, against queuebox through its own API.

It builds `queue.tube.<name>:<method>` names itself, reads tasks from the
reply body and kick/statistics from `body[0]`, so these tests prove the
shapes a client library written for Tarantool depends on. asynctnt sends
requests pipelined on one connection, which also shows a waiting take does
not hold up the requests behind it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asynctnt
import asynctnt_queue
import pytest
from asynctnt.exceptions import TarantoolDatabaseError
from asynctnt_queue.task import Status

from tests.e2e.serverproc import ServerProc, unique
from tests.waiting import wait_for_waiting_takes_async

ALSO_BEHIND_A_ROUTER = True  # but for conftest.NOT_BEHIND_A_ROUTER


async def connect(port: int) -> asynctnt.Connection:
    conn = asynctnt.Connection(
        host="127.0.0.1", port=port, username="tester", password="secret", connect_timeout=5
    )
    await conn.connect()
    return conn


@pytest.fixture
async def conn(server: ServerProc) -> AsyncIterator[asynctnt.Connection]:
    c = await connect(server.port)
    try:
        yield c
    finally:
        await c.disconnect()


async def new_tube(
    conn: asynctnt.Connection, type_: str, opts: dict[str, object] | None = None
) -> asynctnt_queue.Tube:
    name = unique(type_)
    await conn.call("queue.create_tube", [name, type_, opts or {}])
    return asynctnt_queue.Queue(conn).tube(name)


async def test_the_whole_task_api(conn: asynctnt.Connection) -> None:
    tube = await new_tube(conn, "fifottl")
    first = await tube.put({"job": 1}, pri=1, ttl=60, ttr=30)
    assert (first.task_id, first.status, first.data) == (0, Status.READY, {"job": 1})
    later = await tube.put("later", delay=60)
    assert (later.task_id, later.status) == (1, Status.DELAYED)
    second = await tube.put("second", pri=0)
    assert second.status is Status.READY

    taken = await tube.take(0.1)
    assert taken is not None and (taken.task_id, taken.status) == (2, Status.TAKEN)  # pri 0
    touched = await taken.touch(5)
    assert touched.status is Status.TAKEN
    released = await taken.release()
    assert (released.task_id, released.status) == (2, Status.READY)
    taken = await tube.take()
    assert taken is not None and taken.task_id == 2
    acked = await taken.ack()
    assert (acked.task_id, acked.status, acked.data) == (2, Status.EXECUTED, "second")

    buried = await tube.bury(0)
    assert buried.status is Status.BURIED
    assert (await tube.peek(0)).status is Status.BURIED
    assert await tube.kick(10) == 1
    assert (await tube.peek(0)).status is Status.READY
    taken = await tube.take(0)
    assert taken is not None and taken.task_id == 0
    delayed = await taken.release(delay=60)
    assert delayed.status is Status.DELAYED
    deleted = await tube.delete(1)
    assert (deleted.task_id, deleted.status, deleted.data) == (1, Status.EXECUTED, "later")
    assert await tube.take(0) is None

    stats = await tube.statistics()
    assert stats["tasks"] == {
        "ready": 0, "taken": 0, "buried": 0, "delayed": 1, "done": 2, "total": 1
    }  # fmt: skip
    calls = stats["calls"]
    assert (calls["put"], calls["take"], calls["ack"], calls["release"]) == (3, 3, 1, 2)
    assert (calls["bury"], calls["kick"], calls["delete"], calls["touch"]) == (1, 1, 1, 2)
    every = await asynctnt_queue.Queue(conn).statistics()
    assert every[tube.name] == stats


async def test_errors_reach_the_client_with_their_codes(conn: asynctnt.Connection) -> None:
    tube = await new_tube(conn, "fifo")
    with pytest.raises(TarantoolDatabaseError) as info:
        await tube.peek(5)
    assert (info.value.code, info.value.message) == (32, "Task 5 not found")
    with pytest.raises(TarantoolDatabaseError) as info:
        await tube.ack(5)
    assert info.value.message == "Task was not taken"
    missing = asynctnt_queue.Queue(conn).tube(unique("missing"))
    with pytest.raises(TarantoolDatabaseError) as info:
        await missing.put("x")
    assert info.value.code == 33
    assert info.value.message == f"Procedure 'queue.tube.{missing.name}:put' is not defined"
    await tube.put("still works")


async def test_a_waiting_take_does_not_hold_up_the_next_requests(
    server: ServerProc, conn: asynctnt.Connection
) -> None:
    tube = await new_tube(conn, "fifo")
    waiting = asyncio.ensure_future(tube.take(30))
    await wait_for_waiting_takes_async(server.port, tube.name)
    assert not waiting.done()
    put = await asyncio.wait_for(tube.put("x"), 2)  # same connection, answered at once
    assert put.status is Status.READY
    taken = await asyncio.wait_for(waiting, 2)  # woken by that put, not by its timeout
    assert taken is not None and (taken.task_id, taken.status) == (0, Status.TAKEN)


async def test_pipelined_puts_and_takes_on_one_connection(conn: asynctnt.Connection) -> None:
    tube = await new_tube(conn, "fifottl")
    takes = [asyncio.ensure_future(tube.take(5)) for _ in range(10)]
    puts = await asyncio.gather(*(tube.put(n) for n in range(10)))
    assert sorted(p.task_id for p in puts) == list(range(10))
    got = await asyncio.wait_for(asyncio.gather(*takes), 5)
    assert sorted(t.data for t in got if t is not None) == list(range(10))
    await asyncio.gather(*(t.ack() for t in got if t is not None))
    assert (await tube.statistics())["tasks"]["total"] == 0


async def test_two_consumers_share_the_tasks(server: ServerProc, conn: asynctnt.Connection) -> None:
    tube = await new_tube(conn, "fifottl")
    other = await connect(server.port)
    try:
        theirs = asynctnt_queue.Queue(other).tube(tube.name)
        mine_take = asyncio.ensure_future(tube.take(5))
        their_take = asyncio.ensure_future(theirs.take(5))
        await wait_for_waiting_takes_async(server.port, tube.name, 2)
        await tube.put("a")
        await tube.put("b")
        mine, their = await asyncio.wait_for(asyncio.gather(mine_take, their_take), 5)
        assert mine is not None and their is not None
        assert {mine.data, their.data} == {"a", "b"}
        with pytest.raises(TarantoolDatabaseError):
            await tube.ack(their.task_id)  # not this connection's session
        await their.ack()
    finally:
        await other.disconnect()
    stats = (await tube.statistics())["tasks"]
    assert (stats["taken"], stats["done"]) == (1, 1)
