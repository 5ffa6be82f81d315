"""The blocking client shared by threads (docs/client.md): every thread gets its own
answers, a take waiting in one thread holds up no other, and any thread may settle a
task another took (one queue session for every socket)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from queuebox.clients import Status, blocking
from queuebox.clients.errors import TaskNotTaken
from tests.e2e.serverproc import ServerProc, unique
from tests.waiting import wait_for_waiting_takes


@pytest.fixture
def conn(server: ServerProc) -> Iterator[blocking.Connection]:
    with blocking.connect(
        "127.0.0.1", server.port, "tester", "secret", call_timeout=20, pool_size=8
    ) as connection:
        yield connection


def in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(work, range(count)))


def test_threads_sharing_a_connection_each_get_their_own_answers(
    conn: blocking.Connection,
) -> None:
    tube = conn.create_tube(unique("shared"), "fifottl")
    start = threading.Barrier(8)

    def work(n: int) -> list[Any]:
        start.wait()
        seen = []
        for i in range(40):
            put = tube.put({"thread": n, "i": i})
            assert conn.call("queuebox.echo", n, i) == [n, i]
            assert tube.peek(put.id).data == {"thread": n, "i": i}
            seen.append(put.id)
        return seen

    ids = in_threads(8, work)
    assert sorted(i for batch in ids for i in batch) == list(range(320))
    # Every task taken exactly once by 8 threads taking at the same time.
    taken: list[int] = []
    lock = threading.Lock()

    def drain(n: int) -> None:
        while (task := tube.take(0.2)) is not None:
            assert tube.ack(task).status is Status.DONE
            with lock:
                taken.append(task.data["thread"] * 1000 + task.data["i"])

    in_threads(8, drain)
    assert sorted(taken) == sorted(t * 1000 + i for t in range(8) for i in range(40))
    assert 1 < conn.sockets <= 8


def test_a_waiting_take_holds_up_no_other_thread(conn: blocking.Connection) -> None:
    tube = conn.create_tube(unique("waits"), "fifo")
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(tube.take(15)))
    waiter.start()
    wait_for_waiting_takes(conn.port, tube.name)
    # A connection that ran one call at a time would hold this put until the take gave up.
    put = tube.put("for the waiter")
    waiter.join(20)
    assert [task.id for task in got] == [put.id]


def test_any_thread_may_settle_a_task_another_took(
    conn: blocking.Connection, server: ServerProc
) -> None:
    tube = conn.create_tube(unique("handoff"), "fifo")
    for n in range(4):
        tube.put(n)
    taken = in_threads(4, lambda n: tube.take(5))  # four threads: four sockets at most
    acked = in_threads(4, lambda n: tube.ack(taken[3 - n]).id)
    assert sorted(acked) == [0, 1, 2, 3]
    with blocking.connect("127.0.0.1", server.port, "tester", "secret") as stranger:
        tube.put("x")
        task = tube.take(1)
        assert task is not None
        with pytest.raises(TaskNotTaken):  # another connection is another session
            stranger.tube(tube.name).ack(task)
        tube.ack(task)
