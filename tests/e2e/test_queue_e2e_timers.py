"""Timed events fired by the server's one deadline timer, seen over the network
(QUEUE.md §4 "Delay", "ttl", "ttr", "Timers"; §11 "Timers").

Times are a few tenths of a second; checks poll with a bound instead of
sleeping for a guessed time, and the spec's "is not yet" checks sleep only
as long as they must. Every call first runs the events already due, so a
poll cannot tell whether the timer fired by itself: the tests that prove the
timer does are those where a waiting call is woken while nothing else runs.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import pytest
import tarantool
from tarantool.error import DatabaseError

from tests.e2e.serverproc import CALL, PING, RawClient, ServerProc, unique
from tests.waiting import wait_for


class Tube:
    def __init__(self, conn: tarantool.Connection, type_: str, opts: dict[str, Any] | None = None):
        self.conn = conn
        self.name = unique(type_)
        conn.call("queue.create_tube", self.name, type_, opts or {})

    def __getattr__(self, method: str) -> Callable[..., Any]:
        return lambda *args: self.conn.call(f"queue.tube.{self.name}:{method}", *args).data

    def error(self, method: str, *args: Any) -> str:
        with pytest.raises(DatabaseError) as info:
            self.conn.call(f"queue.tube.{self.name}:{method}", *args)
        return str(info.value.message)

    def status(self, task_id: int) -> str | None:
        """The task's status, or None once it is gone."""
        try:
            return self.peek(task_id)[0][1]  # type: ignore[no-any-return]
        except DatabaseError as exc:
            assert exc.message == f"Task {task_id} not found"
            return None

    def stats(self) -> dict[str, Any]:
        return self.conn.call("queue.statistics", self.name).data[0]  # type: ignore[no-any-return]


def wait_for_status(tube: Tube, task_id: int, status: str | None, timeout: float = 3.0) -> float:
    """Poll until the task has `status` (None: gone); the seconds it took."""
    started = time.monotonic()
    wait_for(lambda: tube.status(task_id) == status, f"task {task_id} {status!r}", timeout)
    return time.monotonic() - started


def wait_past_a_ttr(conn: tarantool.Connection, ttr: float) -> None:
    """Until the server's clock has passed a ttr of `ttr` begun now: a marker
    task taken now, in a tube of its own, is given back by its ttr. The one
    timer fires every deadline due, so deadlines before it have fired too."""
    marker = Tube(conn, "fifottl")
    marker.put("marker", {"ttr": ttr})
    marker.take(0)
    wait_for_status(marker, 0, "r")


def test_a_delay_ends_and_wakes_a_waiting_take(
    server: ServerProc, conn: tarantool.Connection
) -> None:
    t = Tube(conn, "fifottl")
    # The delay runs from the server's put, which comes after this: a take
    # served less than 0.3 s after it (less the loop timers' millisecond) was
    # woken before the delay's end. A clock started later, after the put and
    # the connect, would measure the machine's load instead.
    sent = time.monotonic()
    assert t.put("later", {"delay": 0.3}) == [[0, "~", "later"]]
    assert t.take(0) == []
    with RawClient(server.port) as consumer:
        assert consumer.call(f"queue.tube.{t.name}:take", 3).data == [[0, "t", "later"]]
        assert time.monotonic() - sent >= 0.29
    calls = t.stats()["calls"]
    assert (calls["delay"], calls["take"]) == (1, 1)


def test_utubettl_counts_a_delay_end_as_delayed(conn: tarantool.Connection) -> None:
    t = Tube(conn, "utubettl")
    t.put("later", {"delay": 0.1, "utube": "u"})
    wait_for_status(t, 0, "r")
    calls = t.stats()["calls"]
    assert (calls["delay"], calls["delayed"]) == (0, 1)


def test_ttr_expiry_makes_the_task_ready_and_wakes_a_waiter(
    server: ServerProc, conn: tarantool.Connection
) -> None:
    t = Tube(conn, "fifottl")
    t.put("work", {"ttr": 0.3})
    assert t.take(0) == [[0, "t", "work"]]
    with RawClient(server.port) as other:
        assert other.call(f"queue.tube.{t.name}:take", 3).data == [[0, "t", "work"]]
    # The first owner lost it at its ttr.
    assert t.error("ack", 0) == "Task was not taken"
    assert t.stats()["calls"]["ttr"] == 1


def test_ttl_expiry_deletes_a_ready_task(conn: tarantool.Connection) -> None:
    t = Tube(conn, "fifottl")
    t.put("short", {"ttl": 0.2})
    t.put("long")
    assert 0.15 <= wait_for_status(t, 0, None) < 3
    stats = t.stats()
    assert stats["tasks"] == {
        "ready": 1, "taken": 0, "buried": 0, "delayed": 0, "done": 1, "total": 1
    }  # fmt: skip
    assert (stats["calls"]["ttl"], stats["calls"]["delete"]) == (1, 1)
    assert t.take(0) == [[1, "t", "long"]]


def test_a_taken_fifottl_task_is_deleted_at_its_ttl(conn: tarantool.Connection) -> None:
    t = Tube(conn, "fifottl")
    t.put("x", {"ttl": 0.2, "ttr": 10})
    t.take(0)
    wait_for_status(t, 0, None)
    calls = t.stats()["calls"]
    assert (calls["ttr"], calls["ttl"], calls["delete"]) == (1, 1, 1)
    assert t.error("ack", 0) == "Task was not taken"


def test_a_taken_utubettl_task_lives_past_its_ttl_until_its_ttr(
    conn: tarantool.Connection,
) -> None:
    t = Tube(conn, "utubettl")
    t.put("x", {"ttl": 0.2, "ttr": 0.5})
    t.take(0)
    # Past its ttl on the server's clock, before its ttr: that the ttl passes and
    # nothing happens is the behaviour, so the test lets the time pass.
    time.sleep(0.3)
    assert t.status(0) == "t"
    wait_for_status(t, 0, None)


def test_a_buried_task_is_not_released_at_ttr_and_is_deleted_at_ttl(
    conn: tarantool.Connection,
) -> None:
    t = Tube(conn, "fifottl")
    t.put("x", {"ttl": 0.5, "ttr": 0.1})
    t.take(0)
    assert t.bury(0) == [[0, "!", "x"]]
    wait_past_a_ttr(conn, 0.1)  # past its ttr, when nothing must happen
    assert t.status(0) == "!"
    wait_for_status(t, 0, None)
    assert t.stats()["calls"]["ttr"] == 0


def test_touch_extends_the_ttr(conn: tarantool.Connection) -> None:
    t = Tube(conn, "fifottl")
    t.put("x", {"ttr": 0.3})
    t.take(0)
    assert t.touch(0, 0.5) == [[0, "t", "x"]]
    wait_past_a_ttr(conn, 0.3)  # past the first ttr, when nothing must happen
    assert t.status(0) == "t"
    assert t.ack(0) == [[0, "-", "x"]]
    assert t.stats()["calls"]["touch"] == 2


def test_release_with_a_delay(server: ServerProc, conn: tarantool.Connection) -> None:
    t = Tube(conn, "fifottl")
    t.put("x")
    t.take(0)
    assert t.release(0, {"delay": 0.2}) == [[0, "~", "x"]]
    with RawClient(server.port) as other:
        other.request(CALL, {0x22: f"queue.tube.{t.name}:take", 0x21: [3]})
        assert other.roundtrip(PING).code == 0
        started = time.monotonic()
        assert other.recv().data == [[0, "t", "x"]]
        assert time.monotonic() - started >= 0.1


def test_a_limfifottl_ttl_expiry_makes_room_for_a_waiting_put(
    server: ServerProc, conn: tarantool.Connection
) -> None:
    t = Tube(conn, "limfifottl", {"capacity": 1})
    t.put("expires", {"ttl": 0.3})
    with RawClient(server.port) as producer:
        reply = producer.call(f"queue.tube.{t.name}:put", "next", {"timeout": 3})
    assert reply.data == [[0, "r", "next"]]  # id 0 again: the expired task is gone


def test_one_timer_serves_every_tube_in_deadline_order(
    server: ServerProc, conn: tarantool.Connection
) -> None:
    # No call runs while the delays end: only the server's timer can wake these takes.
    # Each delay is counted back from one deadline, so however slowly a loaded
    # machine sets the tubes up, the tasks come due 0.3 s apart, the last put first.
    tubes = [Tube(conn, "fifottl") for _ in range(3)]
    due = time.monotonic() + 1.5
    with ExitStack() as stack:
        consumers = [stack.enter_context(RawClient(server.port)) for _ in tubes]
        for n, (t, consumer) in enumerate(zip(tubes, consumers, strict=True)):
            delay = due + 0.3 * (2 - n) - time.monotonic()
            assert delay > 0.1, "setting up took longer than the deadlines allow"
            t.put(n, {"delay": delay})
            consumer.request(CALL, {0x22: f"queue.tube.{t.name}:take", 0x21: [3]})
            assert consumer.roundtrip(PING).code == 0
        order: list[int] = []
        while len(order) < 3:
            readable, _, _ = select.select([c.sock for c in consumers], [], [], 3)
            assert readable, "no take was woken"
            for n, consumer in enumerate(consumers):
                if consumer.sock in readable:
                    assert consumer.recv().data == [[0, "t", n]]
                    order.append(n)
    assert order == [2, 1, 0]
