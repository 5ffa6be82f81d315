"""The asyncio client against a real queue server (queuebox; plus Tarantool + queue when
QUEUEBOX_TEST_TARANTOOL names one): every tube method, errors, pipelining, the take
context manager, the consumer, identify and reconnects that keep taken tasks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from queuebox.clients import Status, Task, aio
from queuebox.clients.aio import Consumer, Tube
from queuebox.clients.calls import modern
from queuebox.clients.errors import (
    QueueError,
    QueueFull,
    TaskNotFound,
    TaskNotTaken,
    TubeBusy,
    TubeExists,
    TubeNotFound,
)
from tests.e2e import client_targets
from tests.e2e.client_targets import Target, unique
from tests.proxy import FaultProxy
from tests.waiting import wait_for_async, wait_for_waiting_takes_async

target = client_targets.target
proxy_to = client_targets.proxy_to


@pytest.fixture
async def conn(target: Target) -> AsyncIterator[aio.Connection]:
    async with aio.connect(**target.kwargs(), call_timeout=10) as connection:
        yield connection


@pytest.fixture
async def other(target: Target) -> AsyncIterator[aio.Connection]:
    """A second connection: another consumer, another session."""
    async with aio.connect(**target.kwargs(), call_timeout=10) as connection:
        yield connection


async def fresh_tube(conn: aio.Connection, kind: str = "fifottl", **opts: object) -> Tube:
    return await conn.create_tube(unique(kind), kind, **opts)


@pytest.fixture
async def tube(conn: aio.Connection) -> AsyncIterator[Tube]:
    made = await fresh_tube(conn)
    yield made
    await dispose(made)


async def takes_waiting(target: Target, tube: Tube, count: int = 1) -> None:
    """Until `count` takes wait on `tube` in the target server."""
    await wait_for_waiting_takes_async(target.port, tube.name, count, target.user, target.password)


async def dispose(tube: Tube) -> None:
    """Drop a test's tube; takes a consumer left waiting on the server expire first."""

    async def dropped() -> bool:
        await tube.release_all()
        try:
            await tube.drop()
        except TubeBusy:
            return False
        return True

    await wait_for_async(dropped, f"{tube.name} no longer busy", timeout=5)


# --- tubes --------------------------------------------------------------------------------


async def test_create_list_check_and_drop_tubes(conn: aio.Connection) -> None:
    name = unique("fifo")
    made = await conn.create_tube(name, "fifo")
    assert made.name == name
    assert await conn.tube_exists(name) is True
    assert name in await conn.tubes()
    with pytest.raises(TubeExists):
        await conn.create_tube(name, "fifo")
    await conn.create_tube(name, "fifo", if_not_exists=True)
    assert await made.drop() is True
    assert await conn.tube_exists(name) is False
    with pytest.raises(QueueError, match="Unknown tube type nosuch"):
        await conn.create_tube(unique("bad"), "nosuch")


async def test_a_missing_tube_raises_tube_not_found(conn: aio.Connection) -> None:
    name = unique("missing")
    with pytest.raises(TubeNotFound) as info:
        await conn.tube(name).put("x")
    assert info.value.tube == name and info.value.code == 33


async def test_state_and_statistics(conn: aio.Connection, tube: Tube) -> None:
    assert await conn.state() == "RUNNING"
    await tube.put("a")
    stats = await tube.statistics()
    assert stats["tasks"]["ready"] == 1 and stats["calls"]["put"] == 1
    everything = await conn.statistics()
    assert everything[tube.name] == stats
    assert await conn.statistics(tube.name) == stats


# --- tasks --------------------------------------------------------------------------------


async def test_put_take_ack(tube: Tube) -> None:
    put = await tube.put({"n": 1, "list": [1, "two"]})
    assert put.status is Status.READY and put.data == {"n": 1, "list": [1, "two"]}
    taken = await tube.take(1)
    assert taken == Task(put.id, Status.TAKEN, put.data)
    done = await tube.ack(taken)
    assert done.status is Status.DONE and done.id == put.id
    assert await tube.take(0) is None
    with pytest.raises(TaskNotFound):
        await tube.peek(put.id)


async def test_an_ack_with_a_result_and_a_posted_ack(conn: aio.Connection, tube: Tube) -> None:
    first, second = await tube.put_many(["a", "b"])
    taken = await tube.take(1)
    assert taken is not None and taken.id == first.id
    # ack(id, {result = ...}): a server that keeps no results ignores the argument.
    done = await tube.ack(taken, result={"rows": 2})
    assert (done.id, done.status) == (first.id, Status.DONE)
    taken = await tube.take(1)
    assert taken is not None and taken.id == second.id
    # post: sent at once, the reply read into the call's result (or its error) later.
    posted = conn.post(modern.ack(tube.name, taken.id, "ok"))
    wrong = conn.post(modern.ack(tube.name, taken.id))
    assert (await posted).status is Status.DONE
    with pytest.raises(TaskNotTaken):
        await wrong  # the same task again: done already


async def test_take_timeout_waits_then_gives_none(tube: Tube) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await tube.take(0.2) is None
    assert loop.time() - started >= 0.19


async def test_a_waiting_take_is_served_by_a_later_put(
    target: Target, tube: Tube, other: aio.Connection
) -> None:
    waiting = asyncio.ensure_future(tube.take(5))
    await takes_waiting(target, tube)
    await other.tube(tube.name).put("late")
    task = await asyncio.wait_for(waiting, 5)
    assert task is not None and task.data == "late"


async def test_priorities_and_delay(tube: Tube) -> None:
    for pri in (5, 1, 0):
        await tube.put(f"pri{pri}", pri=pri)
    delayed = await tube.put("later", delay=0.3)
    assert delayed.status is Status.DELAYED
    order = [(await tube.take(0)) for _ in range(3)]
    assert [t.data for t in order if t] == ["pri0", "pri1", "pri5"]
    assert await tube.take(0) is None
    later = await tube.take(3)
    assert later is not None and later.data == "later"


async def test_touch_release_bury_kick_delete(tube: Tube) -> None:
    put = await tube.put("x", ttr=30)
    await tube.take(0)
    touched = await tube.touch(put.id, 10)
    assert touched is not None and touched.status is Status.TAKEN
    released = await tube.release(put.id, delay=5)
    assert released.status is Status.DELAYED
    assert (await tube.peek(put.id)).status is Status.DELAYED
    assert (await tube.bury(put.id)).status is Status.BURIED
    assert await tube.kick(5) == 1
    assert (await tube.peek(put.id)).status is Status.READY
    assert (await tube.delete(put.id)).status is Status.DONE
    with pytest.raises(TaskNotFound):
        await tube.delete(put.id)


async def test_release_puts_the_task_back_at_the_head(tube: Tube) -> None:
    first = await tube.put("first")
    await tube.put("second")
    taken = await tube.take(0)
    assert taken is not None and taken.id == first.id
    assert (await tube.release(taken)).status is Status.READY
    again = await tube.take(0)
    assert again is not None and again.id == first.id


async def test_ack_of_a_task_not_taken(tube: Tube, other: aio.Connection) -> None:
    put = await tube.put("x")
    with pytest.raises(TaskNotTaken) as info:
        await tube.ack(put.id)
    assert info.value.text == "Task was not taken"
    await tube.take(0)
    with pytest.raises(TaskNotTaken):
        await other.tube(tube.name).ack(put.id)  # another session's task


async def test_truncate_and_release_all(tube: Tube, other: aio.Connection) -> None:
    await tube.put_many(["a", "b", "c"])
    await other.tube(tube.name).take(0)
    await tube.release_all()
    stats = await tube.statistics()
    assert stats["tasks"]["taken"] == 0 and stats["tasks"]["ready"] == 3
    await tube.truncate()
    assert (await tube.statistics())["tasks"]["total"] == 0


async def test_drop_with_taken_tasks_is_refused(conn: aio.Connection) -> None:
    tube = await fresh_tube(conn, "fifo")
    await tube.put("x")
    await tube.take(0)
    with pytest.raises(TubeBusy):
        await tube.drop()
    await tube.release_all()
    assert await tube.drop() is True


async def test_drivers_and_their_options(conn: aio.Connection) -> None:
    fifo = await fresh_tube(conn, "fifo")
    assert (await fifo.put(None)).data is None
    utube = await fresh_tube(conn, "utube")
    await utube.put("a1", utube="a")
    await utube.put("a2", utube="a")
    await utube.put("b1", utube="b")
    first = await utube.take(0)
    second = await utube.take(0)
    assert first is not None and second is not None
    assert (first.data, second.data) == ("a1", "b1")  # a2 waits while a1 is taken
    assert await utube.take(0) is None
    await utube.release_all()
    limited = await fresh_tube(conn, "limfifottl", capacity=1)
    await limited.put("one")
    with pytest.raises(QueueFull):
        await limited.put("two", timeout=0.1)
    for made in (fifo, utube, limited):
        await made.drop()


# --- pipelining ---------------------------------------------------------------------------


async def test_1000_concurrent_calls_on_one_connection(tube: Tube) -> None:
    puts = await asyncio.gather(*(tube.put(i) for i in range(1000)))
    assert [task.data for task in puts] == list(range(1000))
    assert len({task.id for task in puts}) == 1000
    peeks = await asyncio.gather(*(tube.peek(task.id) for task in puts))
    assert peeks == puts


async def test_put_many_keeps_order_within_a_window(tube: Tube) -> None:
    tasks = await tube.put_many(({"i": i} for i in range(1000)), window=64, pri=3)
    assert [task.data["i"] for task in tasks] == list(range(1000))
    assert (await tube.statistics())["tasks"]["ready"] == 1000
    first = await tube.take(0)
    assert first is not None and first.id == tasks[0].id


async def test_put_many_stops_at_the_first_error(conn: aio.Connection) -> None:
    with pytest.raises(TubeNotFound):
        await conn.tube(unique("missing")).put_many(range(100), window=8)


# --- the take context manager ---------------------------------------------------------


async def test_take_context_acks_on_success(tube: Tube) -> None:
    put = await tube.put("work")
    async with tube.taking(1) as task:
        assert task is not None and task.id == put.id
    with pytest.raises(TaskNotFound):
        await tube.peek(put.id)


async def test_take_context_releases_on_error(tube: Tube) -> None:
    put = await tube.put("work")
    with pytest.raises(RuntimeError, match="handler failed"):
        async with tube.taking(1):
            raise RuntimeError("handler failed")
    assert (await tube.peek(put.id)).status is Status.READY


async def test_take_context_releases_with_delay(tube: Tube) -> None:
    put = await tube.put("work")
    with pytest.raises(ValueError):
        async with tube.taking(1, release_delay=30):
            raise ValueError
    assert (await tube.peek(put.id)).status is Status.DELAYED


async def test_take_context_buries_on_error(tube: Tube) -> None:
    put = await tube.put("work")
    with pytest.raises(KeyError):
        async with tube.taking(1, on_error="bury"):
            raise KeyError("x")
    assert (await tube.peek(put.id)).status is Status.BURIED


async def test_take_context_timeout_gives_none(tube: Tube) -> None:
    async with tube.taking(0.05) as task:
        assert task is None


async def test_take_context_leaves_a_task_settled_inside_alone(tube: Tube) -> None:
    put = await tube.put("work")
    async with tube.taking(1) as task:
        assert task is not None
        await tube.bury(task)
    assert (await tube.peek(put.id)).status is Status.BURIED


async def test_a_cancelled_take_does_not_keep_a_late_task(
    target: Target, tube: Tube, other: aio.Connection
) -> None:
    waiting = asyncio.ensure_future(tube.take(5))
    await takes_waiting(target, tube)
    waiting.cancel()
    await other.tube(tube.name).put("for someone else")
    # The take already waiting on the server may get the task; the client gives it back.
    task = await other.tube(tube.name).take(3)
    assert task is not None and task.data == "for someone else"


# --- the consumer -------------------------------------------------------------------------


async def test_consumer_handles_every_task_and_stops(tube: Tube) -> None:
    await tube.put_many(range(20))
    seen: list[int] = []

    async def handle(task: Task) -> None:
        await asyncio.sleep(0.01)  # the load: a handler that works a while
        seen.append(task.data)
        if len(seen) == 20:
            consumer.stop()

    consumer = Consumer(tube, handle, concurrency=4, take_timeout=0.2)
    await asyncio.wait_for(consumer.run(), 10)
    assert sorted(seen) == list(range(20)) and consumer.handled == 20
    stats = await tube.statistics()
    assert stats["tasks"]["total"] == 0 and stats["calls"]["ack"] == 20


async def test_consumer_stop_lets_running_handlers_finish(target: Target, tube: Tube) -> None:
    await tube.put_many(range(3))
    started = asyncio.Semaphore(0)
    release = asyncio.Event()

    async def handle(task: Task) -> None:
        started.release()
        await release.wait()

    async with aio.connect(**target.kwargs()) as own:
        consumer = Consumer(own.tube(tube.name), handle, concurrency=5, take_timeout=60)
        runner = asyncio.ensure_future(consumer.run())
        for _ in range(3):
            await asyncio.wait_for(started.acquire(), 5)
        assert consumer.in_flight == 3
        consumer.stop()  # the two workers waiting in take(60) stop now, not in 60 s
        await wait_for_async(lambda: not consumer._waiting, "the waiting takes cancelled")
        assert not runner.done()  # the running handlers hold it
        release.set()
        await asyncio.wait_for(runner, 5)
    stats = await tube.statistics()
    assert stats["calls"]["ack"] == 3 and stats["tasks"]["total"] == 0


async def test_a_stop_before_run_holds(tube: Tube) -> None:
    await tube.put("left alone")

    async def handle(task: Task) -> None:
        raise AssertionError("a stopped consumer takes nothing")

    consumer = Consumer(tube, handle, concurrency=2, take_timeout=60)
    runner = asyncio.ensure_future(consumer.run())
    consumer.stop()  # before the run task has started
    await asyncio.wait_for(runner, 5)  # without the fix: the workers wait in take(60)
    assert consumer.handled == 0 and not consumer.stopping  # cleared: it can run again
    assert (await tube.statistics())["tasks"]["ready"] == 1


@pytest.mark.parametrize(
    ("on_error", "status"), [("release", Status.READY), ("bury", Status.BURIED)]
)
async def test_consumer_releases_or_buries_failed_tasks(
    tube: Tube, on_error: str, status: Status
) -> None:
    put = await tube.put("bad")

    async def handle(task: Task) -> None:
        consumer.stop()
        raise RuntimeError("cannot handle")

    consumer = Consumer(tube, handle, on_error=on_error, take_timeout=1)  # type: ignore[arg-type]
    await asyncio.wait_for(consumer.run(), 5)
    assert consumer.failed == 1
    assert (await tube.peek(put.id)).status is status


async def test_consumer_keeps_working_across_a_cut(
    target: Target, proxy_to: FaultProxy, tube: Tube
) -> None:
    seen: list[int] = []

    async def handle(task: Task) -> None:
        seen.append(task.data)

    async with aio.connect(
        "127.0.0.1", proxy_to.port, target.user, target.password, backoff_initial=0.01
    ) as worker:
        consumer = Consumer(
            worker.tube(tube.name), handle, concurrency=2, take_timeout=0.5, retry_delay=0.05
        )
        runner = asyncio.ensure_future(consumer.run())
        await tube.put_many(range(5))
        # Acked, not only handled: an ack cut in flight would hand its task out again.
        await wait_for_async(lambda: _acked(tube, 5), "5 tasks acked")
        proxy_to.cut_all()
        await wait_for_async(lambda: _reconnected(worker))
        await tube.put_many(range(5, 10))
        await wait_for_async(lambda: _handled(seen, 10))
        consumer.stop()
        await asyncio.wait_for(runner, 5)
    assert sorted(seen) == list(range(10))


async def _acked(tube: Tube, count: int) -> bool:
    return int((await tube.statistics())["calls"]["ack"]) >= count


async def _handled(seen: list[int], count: int) -> bool:
    return len(seen) >= count


async def test_consumer_on_a_missing_tube_raises(conn: aio.Connection) -> None:
    async def handle(task: Task) -> None:
        raise AssertionError("no task expected")

    consumer = Consumer(conn.tube(unique("missing")), handle, concurrency=2)
    with pytest.raises(TubeNotFound):
        await asyncio.wait_for(consumer.run(), 5)


# --- sessions and reconnects --------------------------------------------------------------


async def test_identify_shares_a_session(tube: Tube, other: aio.Connection) -> None:
    uuid = await tube.connection.identify()
    assert isinstance(uuid, bytes) and len(uuid) == 16
    put = await tube.put("shared")
    await tube.take(0)
    assert await other.identify(uuid) == uuid
    assert (await other.tube(tube.name).ack(put.id)).status is Status.DONE


async def test_reconnect_after_a_cut_keeps_taken_tasks_with_cfg_ttr(
    target: Target, conn: aio.Connection, proxy_to: FaultProxy, tube: Tube
) -> None:
    await conn.cfg(ttr=30)
    try:
        async with aio.connect(
            "127.0.0.1", proxy_to.port, target.user, target.password, backoff_initial=0.01
        ) as worker:
            put = await tube.put("mine")
            taken = await worker.tube(tube.name).take(1)
            assert taken is not None and taken.id == put.id
            proxy_to.cut_all()
            await wait_for_async(lambda: _reconnected(worker))
            assert (await tube.peek(put.id)).status is Status.TAKEN
            assert (await worker.tube(tube.name).ack(put.id)).status is Status.DONE
    finally:
        await conn.cfg(ttr=0)


async def test_without_cfg_ttr_a_cut_gives_the_task_back(
    target: Target, proxy_to: FaultProxy, tube: Tube
) -> None:
    async with aio.connect(
        "127.0.0.1", proxy_to.port, target.user, target.password, backoff_initial=0.01
    ) as worker:
        put = await tube.put("mine")
        assert await worker.tube(tube.name).take(1) is not None
        proxy_to.cut_all()
        await wait_for_async(lambda: _reconnected(worker))
        await wait_for_async(lambda: _status_is(tube, put.id, Status.READY))
        with pytest.raises(TaskNotTaken):
            await worker.tube(tube.name).ack(put.id)


async def _reconnected(conn: aio.Connection) -> bool:
    return conn.reconnects >= 1 and conn.connected


async def _status_is(tube: Tube, task_id: int, status: Status) -> bool:
    return (await tube.peek(task_id)).status is status
