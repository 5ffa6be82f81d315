"""The legacy (1.5) API through both clients against queuebox (Tarantool's queue module has
no legacy API, so these run against queuebox only)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from queuebox.clients import LegacyTask, Status, aio, blocking
from queuebox.clients.errors import QueueError, TaskNotFound, TaskNotTaken
from tests.e2e.client_targets import unique
from tests.e2e.serverproc import ServerProc

SPACE = 7


@pytest.fixture
async def conn(server: ServerProc) -> AsyncIterator[aio.Connection]:
    async with aio.connect("127.0.0.1", server.port, "tester", "secret") as connection:
        yield connection


@pytest.fixture
def sync_conn(server: ServerProc) -> Iterator[blocking.Connection]:
    with blocking.connect("127.0.0.1", server.port, "tester", "secret") as connection:
        yield connection


async def test_legacy_put_take_ack(conn: aio.Connection) -> None:
    queue, tube = conn.legacy(SPACE), unique("lt")
    put = await queue.put(tube, "a", 2, {"k": 1}, ttl=60, ttr=30, pri=5)
    assert isinstance(put, LegacyTask) and len(put.id) == 32
    assert (put.tube, put.status, put.data) == (tube, Status.READY, ("a", 2, {"k": 1}))
    taken = await queue.take(tube, timeout=1)
    assert taken is not None and (taken.id, taken.status) == (put.id, Status.TAKEN)
    acked = await queue.ack(put.id)
    assert acked.status is Status.TAKEN  # ack answers the task as it was
    with pytest.raises(TaskNotFound):
        await queue.peek(put.id)
    assert await queue.take(tube, timeout=0) is None


async def test_legacy_states(conn: aio.Connection, server: ServerProc) -> None:
    queue, tube = conn.legacy(SPACE), unique("lt")
    delayed = await queue.put(tube, "later", delay=30)
    assert delayed.status is Status.DELAYED
    put = await queue.put(tube, "x")
    with pytest.raises(TaskNotTaken):
        await queue.ack(put.id)
    await queue.take(tube, 0)
    assert (await queue.touch(put.id)).status is Status.TAKEN
    assert (await queue.bury(put.id)).status is Status.BURIED
    assert (await queue.dig(put.id)).status is Status.READY
    await queue.take(tube, 0)
    await queue.bury(put.id)
    assert (await queue.unbury(put.id)).status is Status.READY
    await queue.take(tube, 0)
    await queue.bury(put.id)
    assert await queue.kick(tube, 5) == 1
    await queue.take(tube, 0)
    assert (await queue.release(put.id, delay=30)).status is Status.DELAYED
    assert (await queue.delete(put.id)).id == put.id
    assert await queue.truncate(tube) == 1  # the delayed one


async def test_legacy_done_requeue_urgent_unique(conn: aio.Connection) -> None:
    queue, tube = conn.legacy(SPACE), unique("lt")
    first = await queue.put(tube, "first")
    await queue.put(tube, "second")
    urgent = await queue.urgent(tube, "urgent")
    taken = await queue.take(tube, 0)
    assert taken is not None and taken.id == urgent.id
    requeued = await queue.requeue(urgent.id)
    assert requeued.status is Status.READY
    again = await queue.take(tube, 0)
    assert again is not None and again.id == first.id
    done = await queue.done(first.id, "result", 42)
    assert (done.status, done.data) == (Status.DONE, ("result", 42))
    twin = await queue.put_unique(tube, "second")
    assert twin.data == ("second",)
    assert (await queue.peek(twin.id)).data == ("second",)


async def test_legacy_meta_and_statistics(conn: aio.Connection) -> None:
    queue, tube = conn.legacy(SPACE), unique("lt")
    put = await queue.put(tube, "x", ttr=9)
    meta = await queue.meta(put.id)
    assert meta["id"] == put.id and meta["tube"] == tube and meta["ttr"] == 9_000_000  # µs
    stats = await queue.statistics(tube)
    assert stats[f"space{SPACE}.{tube}.put"] == 1
    assert stats[f"space{SPACE}.{tube}.tasks.ready"] == 1
    assert f"space{SPACE}.{tube}.put" in await queue.statistics()


async def test_legacy_errors(conn: aio.Connection) -> None:
    queue = conn.legacy(SPACE)
    with pytest.raises(TaskNotFound):
        await queue.peek("0" * 32)
    with pytest.raises(QueueError, match="Timeout can't be less then 0"):
        await queue.take(unique("lt"), -1)


def test_blocking_legacy_round_trip(sync_conn: blocking.Connection) -> None:
    queue, tube = sync_conn.legacy(SPACE), unique("lt")
    put = queue.put(tube, "a", "b", pri=3)
    assert put.data == ("a", "b")
    assert queue.urgent(tube, "u").status is Status.READY
    assert queue.put_unique(tube, "a").id == put.id
    taken = queue.take(tube, 0)
    assert taken is not None
    assert queue.touch(taken.id).status is Status.TAKEN
    assert queue.release(taken.id).status is Status.READY
    taken = queue.take(tube, 0)
    assert taken is not None
    assert queue.requeue(taken.id).status is Status.READY
    taken = queue.take(tube, 0)
    assert taken is not None
    assert queue.bury(taken.id).status is Status.BURIED
    assert queue.dig(taken.id).status is Status.READY
    taken = queue.take(tube, 0)
    assert taken is not None
    assert queue.bury(taken.id).status is Status.BURIED
    assert queue.unbury(taken.id).status is Status.READY
    assert queue.kick(tube) == 0
    taken = queue.take(tube, 0)
    assert taken is not None
    assert queue.done(taken.id, "ok").data == ("ok",)
    second = queue.take(tube, 0)
    assert second is not None and queue.ack(second.id).id == second.id
    assert queue.meta(put.id)["tube"] == tube
    assert queue.peek(put.id).tube == tube
    assert queue.delete(put.id).id == put.id
    assert queue.statistics(tube)[f"space{SPACE}.{tube}.take"] >= 5
    assert queue.truncate(tube) >= 0
