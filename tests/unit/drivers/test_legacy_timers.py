"""Legacy timers: delay, ttr, ttl (in every status) and the deadline the server sleeps until."""

from __future__ import annotations

import pytest

from queuebox.drivers.legacy import LegacyQueue
from tests.unit.drivers.legacy_harness import SEC, T0, Legacy


@pytest.fixture
def lq() -> Legacy:
    return Legacy()


def test_no_tasks_no_deadline(lq: Legacy) -> None:
    assert lq.q.next_deadline() is None
    lq.q.tick(T0 + 10**12)  # nothing to do, nothing breaks


def test_next_deadline_is_the_earliest_event_of_every_space(lq: Legacy) -> None:
    lq.put("x", space=1, ttl=50)
    assert lq.q.next_deadline() == T0 + 50 * SEC
    lq.put("y", space=2, delay=3)
    assert lq.q.next_deadline() == T0 + 3 * SEC
    lq.put("z", space=1, ttl=2)
    assert lq.q.next_deadline() == T0 + 2 * SEC


def test_a_tick_before_the_deadline_changes_nothing(lq: Legacy) -> None:
    tid = lq.put("x", delay=5)[0]
    lq.q.tick(T0 + 5 * SEC - 1)
    assert lq.status(tid) == "delayed"
    lq.q.tick(T0 + 5 * SEC)
    assert lq.status(tid) == "ready"


def test_delayed_task_becomes_ready_then_lives_until_ttl_plus_delay(lq: Legacy) -> None:
    tid = lq.put("x", delay=2, ttl=3)[0]
    assert lq.take_id() is None
    lq.advance(2)
    assert lq.status(tid) == "ready"
    assert lq.task("meta", 0, tid)[3] == T0 + 5 * SEC
    lq.advance(2.5)
    assert lq.status(tid) == "ready"
    lq.advance(0.5)
    assert lq.error("peek", 0, tid) == "Task not found"
    stats = lq.stats(0, "t")
    assert stats["space0.t.ttl.total"] == stats["space0.t.ttl.ready"] == "1"


def test_ttr_returns_a_taken_task_to_ready_and_drops_the_owner(lq: Legacy) -> None:
    tid = lq.put("x", ttr=2)[0]
    lq.take_id(conn=3)
    lq.advance(2)
    meta = lq.task("meta", 0, tid)
    assert meta[2] == "ready" and meta[6] == 0
    assert lq.error("ack", 0, tid, conn=3) == "Task is not taken"
    assert lq.take_id(conn=4) == tid
    lq.q.disconnected(3)  # the old owner leaving does not touch the new owner's task
    assert lq.status(tid) == "taken"


def test_ttl_passing_while_taken_deletes_the_task(lq: Legacy) -> None:
    tid = lq.put("x", ttl=1, ttr=10)[0]
    lq.take_id()
    lq.advance(1)
    assert lq.error("peek", 0, tid) == "Task not found"
    assert lq.error("ack", 0, tid) == "Task not found"
    stats = lq.stats(0, "t")
    assert stats["space0.t.ttl.taken"] == "1" and stats["space0.t.tasks.taken"] == "0"


def test_every_call_first_runs_the_timers_that_are_due(lq: Legacy) -> None:
    # No tick yet (the server's timer may be late): the call itself catches up,
    # so take never hands out a dead task and never misses one whose delay ended.
    lq.put("dies", ttl=1, pri=10)
    lq.put("lives", ttl=100)
    lq.put("was delayed", delay=1, pri=5)
    lq.clock.now += 2 * SEC
    assert lq.task("take", 0, "t", 0)[3] == "was delayed"
    assert lq.task("take", 0, "t", 0)[3] == "lives"
    assert lq.stats(0, "t")["space0.t.ttl.ready"] == "1"


def test_many_events_due_at_once_are_all_handled_in_one_tick(lq: Legacy) -> None:
    delayed = [lq.put(n, delay=1)[0] for n in range(5)]
    doomed = [lq.put(n, ttl=1)[0] for n in range(5)]
    lq.advance(1)
    assert [lq.status(t) for t in delayed] == ["ready"] * 5
    assert all(lq.error("peek", 0, t) == "Task not found" for t in doomed)
    assert lq.q.next_deadline() == T0 + (1 + 2_160_000) * SEC  # default ttl after the delay


def test_every_status_dies_at_ttl_and_is_counted_by_status(lq: Legacy) -> None:
    lq.put("ready", ttl=5)
    lq.put("delayed", ttl=5, delay=100)  # ttl += delay: survives
    taken_id = lq.put("taken", ttl=5)[0]
    buried_id = lq.put("buried", ttl=5)[0]
    done_id = lq.put("done", ttl=5)[0]
    lq.take_id()  # the "ready" task: taken too, so two die taken
    assert lq.take_id() == taken_id
    assert lq.take_id() == buried_id
    lq.task("bury", 0, buried_id)
    assert lq.take_id() == done_id
    lq.task("done", 0, done_id)
    lq.advance(5)
    stats = lq.stats(0, "t")
    assert stats["space0.t.ttl.total"] == "4"
    assert [stats[f"space0.t.ttl.{s}"] for s in ("taken", "buried", "done")] == ["2", "1", "1"]
    assert stats["space0.t.tasks.total"] == stats["space0.t.tasks.delayed"] == "1"


def test_the_server_hears_when_the_earliest_deadline_moves_and_only_then() -> None:
    """The legacy core reports its earliest deadline when it moves, so the server
    never asks the legacy spaces on a request that changed none of them."""
    heard: list[int | None] = []
    lq = Legacy()
    lq.q = LegacyQueue(lq.catalog, lq.clock, heard.append)
    lq.put("x", ttl=50)
    assert heard == [T0 + 50 * SEC]
    lq.put("y", ttl=80)  # a later event: the earliest stays
    lq.take_id()
    assert heard == [T0 + 50 * SEC]
    lq.put("z", delay=3)
    assert heard == [T0 + 50 * SEC, T0 + 3 * SEC] and lq.q.next_deadline() == T0 + 3 * SEC
    lq.q.tick(T0 + 3 * SEC)  # z is ready: its ttl is what stays of it
    assert heard[-1] == lq.q.next_deadline() == T0 + 50 * SEC
