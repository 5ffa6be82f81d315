"""The queue glue (server/queue/queue_calls.py) without sockets: waiting calls and disconnects.

Requests are run the way server/core/dispatch.py runs them: the handler inline, and a
waiting one finishes in a task. Two lost wakeups are pinned here: a put read
in the same batch as the take that waits for it, and a woken waiter whose
client left before it could take its task. Also: the disconnects of a
graceful stop do not release taken tasks (the next start does, and counts it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from queuebox.server.core.app import App
from queuebox.server.core.session import Session
from queuebox.server.queue.queue_calls import QueueCalls
from queuebox.server.settings.config import Config
from queuebox.storage.catalog import Catalog


class Glue:
    def __init__(self) -> None:
        self.app = App(Config())
        self.queue = QueueCalls(self.app, Catalog())
        self.queue.install()
        self.closed: dict[int, asyncio.Future[None]] = {}

    def run(self, conn_id: int, name: str, *args: Any) -> list[Any] | asyncio.Task[list[Any]]:
        """The handler inline; a waiting call becomes a task, as the connection spawns it."""
        found = self.app.registry.resolve(name)
        assert found is not None, name
        loop = asyncio.get_running_loop()
        closed = self.closed.setdefault(conn_id, loop.create_future())
        result = found.call(Session(self.app, conn_id, closed), list(args))
        if isinstance(result, list):
            return result
        return asyncio.ensure_future(result)

    def close(self, conn_id: int) -> None:
        """What Connection.connection_lost does."""
        self.closed[conn_id].set_result(None)
        self.app.on_disconnect(conn_id)


async def test_a_put_in_the_same_batch_as_the_waiting_take_wakes_it() -> None:
    g = Glue()
    g.run(1, "queue.create_tube", "t", "fifo")
    take = g.run(1, "queue.tube.t:take", 30)
    # The put runs before the take's task has had a turn of the loop.
    assert g.run(1, "queue.tube.t:put", "x") == [[0, "r", "x"]]
    assert isinstance(take, asyncio.Task)
    assert await asyncio.wait_for(take, 2) == [[0, "t", "x"]]


async def test_a_woken_waiter_whose_client_left_passes_the_task_on() -> None:
    g = Glue()
    g.app.connections.update({1: None, 2: None})
    g.run(1, "queue.create_tube", "t", "fifo")
    first = g.run(1, "queue.tube.t:take", 30)
    second = g.run(2, "queue.tube.t:take", 30)
    await asyncio.sleep(0)
    # The put wakes the first waiter (lower connection id), whose client leaves
    # before the wakeup is handled: the second waiter must get the task.
    assert g.run(3, "queue.tube.t:put", "x") == [[0, "r", "x"]]
    g.close(1)
    assert isinstance(first, asyncio.Task) and isinstance(second, asyncio.Task)
    assert await asyncio.wait_for(first, 2) == []
    assert await asyncio.wait_for(second, 2) == [[0, "t", "x"]]


async def test_a_disconnect_during_a_graceful_stop_leaves_taken_tasks_to_the_next_start() -> None:
    g = Glue()
    g.app.connections.update({1: None, 2: None})
    g.run(1, "queue.create_tube", "t", "fifo")
    g.run(1, "queue.tube.t:put", "x")
    assert g.run(1, "queue.tube.t:take", 0) == [[0, "t", "x"]]
    g.app.shutting_down = True  # the listener closes every connection after this
    g.close(1)
    # Still taken on disk: the next start releases it and counts the release.
    assert g.run(2, "queue.tube.t:peek", 0) == [[0, "t", "x"]]


async def test_statistics_of_a_modern_tube_with_a_numeric_name() -> None:
    g = Glue()
    g.run(1, "queue.create_tube", "42", "fifo")
    g.run(1, "queue.tube.42:put", "x")
    (stats,) = g.run(1, "queue.statistics", "42")
    assert isinstance(stats, dict) and stats["tasks"]["ready"] == 1
    assert g.run(1, "queue.stats", "42") == [stats]
    # A number, or a numeric string naming no modern tube, is still the legacy form.
    assert g.run(1, "queue.statistics", 42) == [[]]
    assert g.run(1, "queue.statistics", "7") == [[]]


async def test_each_name_is_bound_by_the_core_that_owns_it_and_rebound_after_reload() -> None:
    g = Glue()
    g.run(1, "queue.create_tube", "t", "fifo")
    legacy, modern = g.queue.legacy, g.queue.modern
    assert g.queue.cores == (legacy, modern)
    assert g.run(1, "queue.tube.t:put", "m") == [[0, "r", "m"]]
    (task,) = g.run(1, "queue.put", 0, "t", 0, 0, 0, 0, "l")
    assert task[1:] == ["t", "ready", "l"]  # the legacy reply shape
    put = g.app.registry.resolve("queue.tube.t:put")
    assert put is not None and g.app.registry.resolve("queue.tube.t:put") == put
    g.queue.reload()
    # New core objects; the names bound to the old ones are gone.
    assert g.queue.cores == (g.queue.legacy, g.queue.modern)
    assert g.queue.legacy is not legacy and g.queue.modern is not modern
    assert g.app.registry.resolve("queue.tube.t:put") != put
    assert g.run(1, "queue.tube.t:put", "m2") == [[1, "r", "m2"]]
    assert g.run(1, "queue.peek", 0, task[0])[0][3] == "l"


def waiting_take(g: Glue, run: Callable[[int, list[Any]], Any]) -> asyncio.Future[list[Any]]:
    """A take(30) on the empty tube t that blocked, waiting, with `run` as the
    call its request bound (what QueueCalls hands WaitingCalls)."""
    binding = g.queue.modern.bind("queue.tube.t:take")
    assert binding is not None
    blocked = binding.call(1, [30])
    closed = asyncio.get_running_loop().create_future()
    session = Session(g.app, 1, closed)
    return asyncio.ensure_future(g.queue.waits.start(g.queue.modern, run, session, blocked))


async def test_a_woken_take_retries_through_the_call_its_request_bound() -> None:
    g = Glue()
    g.run(1, "queue.create_tube", "t", "fifo")
    binding = g.queue.modern.bind("queue.tube.t:take")
    assert binding is not None
    retried: list[list[Any]] = []

    def run(conn_id: int, args: list[Any]) -> Any:
        retried.append(args)
        return binding.call(conn_id, args)

    take = waiting_take(g, run)
    assert g.run(2, "queue.tube.t:put", "x") == [[0, "r", "x"]]
    assert await asyncio.wait_for(take, 2) == [[0, "t", "x"]]
    assert len(retried) == 1  # the kept call, not a name resolved again


async def test_a_waiting_take_binds_afresh_once_the_registry_forgot() -> None:
    g = Glue()
    g.run(1, "queue.create_tube", "t", "fifo")
    stale: list[list[Any]] = []
    take = waiting_take(g, lambda conn_id, args: stale.append(args))
    g.queue.reload()  # new cores; the registry forgets every binding
    assert g.run(2, "queue.tube.t:put", "x") == [[0, "r", "x"]]
    assert await asyncio.wait_for(take, 2) == [[0, "t", "x"]]
    assert stale == []  # the old core's call is never run again
