"""The blocking client against a real queue server (queuebox; plus Tarantool + queue when
QUEUEBOX_TEST_TARANTOOL names one): the same API as the asyncio client, without await."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from queuebox.clients import Status, Task, blocking
from queuebox.clients.blocking import Tube
from queuebox.clients.errors import (
    QueueFull,
    TaskNotFound,
    TaskNotTaken,
    TubeBusy,
    TubeExists,
    TubeNotFound,
)
from tests.e2e import client_targets
from tests.e2e.client_targets import Target, cut_seen, unique
from tests.proxy import FaultProxy
from tests.waiting import wait_for

target = client_targets.target
proxy_to = client_targets.proxy_to


@pytest.fixture
def conn(target: Target) -> Iterator[blocking.Connection]:
    with blocking.connect(**target.kwargs(), call_timeout=10) as connection:
        yield connection


@pytest.fixture
def other(target: Target) -> Iterator[blocking.Connection]:
    with blocking.connect(**target.kwargs(), call_timeout=10) as connection:
        yield connection


@pytest.fixture
def tube(conn: blocking.Connection) -> Iterator[Tube]:
    made = conn.create_tube(unique("fifottl"), "fifottl")
    yield made
    made.release_all()
    made.drop()


def test_tubes_and_module_calls(conn: blocking.Connection) -> None:
    conn.ping()
    assert conn.state() == "RUNNING"
    name = unique("fifo")
    made = conn.create_tube(name, "fifo")
    assert conn.tube_exists(name) and name in conn.tubes()
    with pytest.raises(TubeExists):
        conn.create_tube(name, "fifo")
    made.put("x")
    assert conn.statistics()[name]["tasks"]["ready"] == 1
    assert conn.statistics(name) == made.statistics()
    assert made.drop() is True
    assert not conn.tube_exists(name)
    with pytest.raises(TubeNotFound):
        made.put("x")


def test_task_life(tube: Tube, other: blocking.Connection) -> None:
    put = tube.put({"k": "v"}, pri=1, ttl=60, ttr=30)
    assert put.status is Status.READY
    with pytest.raises(TaskNotTaken):
        tube.ack(put)
    taken = tube.take(1)
    assert taken == Task(put.id, Status.TAKEN, {"k": "v"})
    with pytest.raises(TaskNotTaken):
        other.tube(tube.name).ack(put)
    touched = tube.touch(put, 5)
    assert touched is not None and touched.status is Status.TAKEN
    assert tube.release(put, delay=10).status is Status.DELAYED
    assert tube.bury(put).status is Status.BURIED
    assert tube.kick(3) == 1
    assert tube.peek(put).status is Status.READY
    assert tube.take(0) is not None
    assert tube.ack(put).status is Status.DONE
    with pytest.raises(TaskNotFound):
        tube.delete(put)
    assert tube.take(0.05) is None


def test_delete_truncate_release_all(tube: Tube, other: blocking.Connection) -> None:
    first, *_ = tube.put_many(["a", "b", "c"])
    assert tube.delete(first).status is Status.DONE
    assert other.tube(tube.name).take(0) is not None
    tube.release_all()
    tasks = tube.statistics()["tasks"]
    assert (tasks["ready"], tasks["taken"]) == (2, 0)
    tube.truncate()
    assert tube.statistics()["tasks"]["total"] == 0


def test_drop_busy_and_queue_full(conn: blocking.Connection) -> None:
    limited = conn.create_tube(unique("limfifottl"), "limfifottl", capacity=1)
    limited.put("one")
    with pytest.raises(QueueFull):
        limited.put("two", timeout=0.1)
    assert limited.take(0) is not None
    with pytest.raises(TubeBusy):
        limited.drop()
    limited.release_all()
    assert limited.drop()


def test_put_many_pipelines_1000_puts(tube: Tube) -> None:
    tasks = tube.put_many(range(1000), window=100)
    assert [task.data for task in tasks] == list(range(1000))
    assert len({task.id for task in tasks}) == 1000
    assert tube.statistics()["tasks"]["ready"] == 1000


def test_put_many_raises_the_first_error(conn: blocking.Connection) -> None:
    with pytest.raises(TubeNotFound):
        conn.tube(unique("missing")).put_many(range(50), window=10)
    conn.ping()  # every reply was read: the connection is still in step


def test_taking_acks_releases_and_buries(tube: Tube) -> None:
    put = tube.put("job")
    with tube.taking(1) as task:
        assert task is not None and task.id == put.id
    with pytest.raises(TaskNotFound):
        tube.peek(put)

    put = tube.put("job")
    with pytest.raises(RuntimeError), tube.taking(1):
        raise RuntimeError("fail")
    assert tube.peek(put).status is Status.READY

    with pytest.raises(RuntimeError), tube.taking(1, release_delay=30):
        raise RuntimeError("fail")
    assert tube.peek(put).status is Status.DELAYED

    put = tube.put("job")
    with pytest.raises(RuntimeError), tube.taking(1, on_error="bury"):
        raise RuntimeError("fail")
    assert tube.peek(put).status is Status.BURIED

    with tube.taking(0.05) as nothing:
        assert nothing is None


def test_identify_shares_the_session(tube: Tube, other: blocking.Connection) -> None:
    uuid = tube.connection.identify()
    assert isinstance(uuid, bytes) and len(uuid) == 16
    put = tube.put("x")
    tube.take(0)
    other.identify(uuid)
    assert other.tube(tube.name).ack(put).status is Status.DONE


def test_reconnect_after_a_cut_keeps_taken_tasks_with_cfg_ttr(
    target: Target, conn: blocking.Connection, proxy_to: FaultProxy, tube: Tube
) -> None:
    conn.cfg(ttr=30)
    try:
        with blocking.connect(
            "127.0.0.1", proxy_to.port, target.user, target.password, backoff_initial=0.01
        ) as worker:
            put = tube.put("mine")
            assert worker.tube(tube.name).take(1) is not None
            proxy_to.cut_all()
            wait_for(lambda: cut_seen(worker), "the cut seen")
            assert tube.peek(put).status is Status.TAKEN
            assert worker.tube(tube.name).ack(put).status is Status.DONE
            assert worker.reconnects == 1
    finally:
        conn.cfg(ttr=0)


def test_without_cfg_ttr_a_cut_gives_the_task_back(
    target: Target, proxy_to: FaultProxy, tube: Tube
) -> None:
    with blocking.connect(
        "127.0.0.1", proxy_to.port, target.user, target.password, backoff_initial=0.01
    ) as worker:
        put = tube.put("mine")
        assert worker.tube(tube.name).take(1) is not None
        proxy_to.cut_all()
        wait_for(lambda: tube.peek(put).status is Status.READY, "the task ready again")
        with pytest.raises(TaskNotTaken):
            worker.tube(tube.name).ack(put)
        assert worker.reconnects == 1
