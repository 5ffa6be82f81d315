"""Legacy ack, touch, done, bury, dig, kick, release, requeue, delete, truncate."""

from __future__ import annotations

import pytest

from tests.unit.drivers.legacy_harness import SEC, T0, Legacy


@pytest.fixture
def lq() -> Legacy:
    return Legacy()


def taken(lq: Legacy, *data: object, conn: int = 1, **opts: object) -> str:
    task_id = lq.put(*data, **opts)[0]
    assert lq.take_id(conn=conn) == task_id
    return str(task_id)


OWNED = {
    "ack": "ack",
    "touch": "touch",
    "done": "done",
    "bury": "done",  # sic, as 1.5 had it
    "release": "release",
    "requeue": "release",
}


@pytest.mark.parametrize("name", sorted(OWNED))
def test_owner_checks_of_every_consumer_call(lq: Legacy, name: str) -> None:
    tid = taken(lq, "t", conn=1)
    ready = lq.put("r")[0]
    assert lq.error(name, 0, "0" * 32) == "Task not found"
    assert lq.error(name, 0, ready) == "Task is not taken"
    assert (
        lq.error(name, 0, tid, conn=2) == f"Only consumer that took the task can it {OWNED[name]}"
    )
    assert lq.status(tid) == "taken"  # a refused call changes nothing


def test_ack_deletes_and_answers_the_task_as_taken(lq: Legacy) -> None:
    tid = taken(lq, "a", "b")
    assert lq.task("ack", "0", tid) == [tid, "t", "taken", "a", "b"]
    assert lq.error("peek", 0, tid) == "Task not found"
    assert lq.error("ack", 0, tid) == "Task not found"


def test_touch_restarts_the_ttr_window(lq: Legacy) -> None:
    tid = taken(lq, "x", ttr=10)
    lq.advance(8)
    assert lq.task("touch", 0, tid) == [tid, "t", "taken", "x"]
    assert lq.task("meta", 0, tid)[3] == T0 + 18 * SEC
    lq.advance(8)  # past the original ttr: still taken
    assert lq.status(tid) == "taken"
    lq.advance(3)
    assert lq.status(tid) == "ready"


def test_touch_never_extends_past_ttl(lq: Legacy) -> None:
    tid = taken(lq, "x", ttl=12, ttr=10)
    lq.advance(8)
    lq.task("touch", 0, tid)
    assert lq.task("meta", 0, tid)[3] == T0 + 12 * SEC


def test_done_replaces_the_data_and_keeps_the_task_until_its_ttl(lq: Legacy) -> None:
    tid = taken(lq, "in", 1, ttl=30)
    assert lq.task("done", 0, tid, "out", {"ok": True}) == [tid, "t", "done", "out", {"ok": True}]
    assert lq.task("peek", 0, tid) == [tid, "t", "done", "out", {"ok": True}]
    meta = lq.task("meta", 0, tid)
    assert meta[3] == T0 + 30 * SEC and meta[6] == 0
    assert lq.error("ack", 0, tid) == "Task is not taken"
    assert lq.take_id() is None
    lq.advance(29)
    assert lq.status(tid) == "done"
    lq.advance(1)
    assert lq.error("peek", 0, tid) == "Task not found"
    stats = lq.stats(0, "t")
    assert stats["space0.t.ttl.done"] == "1" and stats["space0.t.done"] == "1"


def test_done_without_data_leaves_no_data_fields(lq: Legacy) -> None:
    tid = taken(lq, "in")
    assert lq.task("done", 0, tid) == [tid, "t", "done"]


def test_bury_dig_and_unbury(lq: Legacy) -> None:
    tid = taken(lq, "x")
    assert lq.task("bury", 0, tid) == [tid, "t", "buried", "x"]
    meta = lq.task("meta", 0, tid)
    assert meta[10] == 1 and meta[6] == 0
    assert lq.take_id() is None
    assert lq.error("bury", 0, tid) == "Task is not taken"
    assert lq.task("dig", 0, tid) == [tid, "t", "ready", "x"]
    assert lq.error("dig", 0, tid) == "Task is not buried"
    assert lq.error("unbury", "0", tid) == "Task is not buried"
    assert lq.take_id() == tid
    lq.task("bury", 0, tid)
    assert lq.task("unbury", "0", tid)[2] == "ready"
    assert lq.task("meta", 0, tid)[10] == 2


def test_buried_tasks_are_not_released_by_ttr_but_die_at_ttl(lq: Legacy) -> None:
    tid = taken(lq, "x", ttl=10, ttr=2)
    lq.task("bury", 0, tid)
    lq.advance(5)
    assert lq.status(tid) == "buried"
    lq.advance(5)
    assert lq.error("peek", 0, tid) == "Task not found"
    assert lq.stats(0, "t")["space0.t.ttl.buried"] == "1"


def test_kick_unburies_up_to_count_in_take_order(lq: Legacy) -> None:
    low = taken(lq, "low", pri=-5)
    lq.task("bury", 0, low)
    ids = [taken(lq, n) for n in range(3)]
    for tid in ids:
        lq.task("bury", 0, tid)
    high = taken(lq, "high", pri=5)
    lq.task("bury", 0, high)
    assert lq.call("kick", 0, "t") == [1]  # count defaults to 1
    assert lq.status(high) == "ready"
    assert lq.call("kick", "0", "t", "2") == [2]
    assert [lq.status(t) for t in ids] == ["ready", "ready", "buried"]
    assert lq.call("kick", 0, "t", 100) == [2]
    assert lq.status(low) == "ready"
    assert lq.call("kick", 0, "t", 5) == [0]
    assert lq.stats(0, "t")["space0.t.dig"] == "5"


@pytest.mark.parametrize("count", [0, -3, "0", "-1"])
def test_kick_with_count_at_most_zero_kicks_nothing(lq: Legacy, count: object) -> None:
    lq.task("bury", 0, taken(lq, "x"))
    assert lq.call("kick", 0, "t", count) == [0]


@pytest.mark.parametrize(("count", "kicked"), [("1.5", 1), (2.9, 2), ("0.5", 0), ("2e0", 2)])
def test_kick_never_kicks_more_than_count(lq: Legacy, count: object, kicked: int) -> None:
    # Up to count means at most count: a fractional count kicks its whole part.
    for n in range(3):
        lq.task("bury", 0, taken(lq, n))
    assert lq.call("kick", 0, "t", count) == [kicked]
    assert lq.stats(0, "t")["space0.t.tasks.buried"] == str(3 - kicked)


def test_release_returns_the_task_to_ready_in_its_old_place(lq: Legacy) -> None:
    first = lq.put("first")[0]
    lq.put("second")
    assert lq.take_id() == first
    assert lq.task("release", 0, first) == [first, "t", "ready", "first"]
    assert lq.take_id() == first
    assert lq.stats(0, "t")["space0.t.release"] == "1"


def test_release_with_delay_delays_it(lq: Legacy) -> None:
    tid = taken(lq, "x", ttl=100)
    lq.advance(10)
    assert lq.task("release", 0, tid, "5")[2] == "delayed"
    meta = lq.task("meta", 0, tid)
    assert meta[3] == T0 + 15 * SEC and meta[8] == 100 * SEC  # ttl unchanged
    lq.advance(4)
    assert lq.take_id() is None
    lq.advance(1)
    assert lq.take_id() == tid


def test_release_delay_is_capped_by_ttl(lq: Legacy) -> None:
    tid = taken(lq, "x", ttl=10)
    lq.task("release", 0, tid, 60)
    assert lq.task("meta", 0, tid)[3] == T0 + 10 * SEC
    lq.advance(10)
    assert lq.error("peek", 0, tid) == "Task not found"
    assert lq.stats(0, "t")["space0.t.ttl.delayed"] == "1"


def test_release_with_a_new_ttl_counts_it_from_now(lq: Legacy) -> None:
    tid = taken(lq, "x", ttl=10)
    lq.advance(6)
    lq.task("release", 0, tid, 0, 20)
    meta = lq.task("meta", 0, tid)
    assert meta[8] == 26 * SEC and meta[3] == T0 + 26 * SEC
    lq.advance(19)
    assert lq.status(tid) == "ready"
    lq.advance(1)
    assert lq.error("peek", 0, tid) == "Task not found"


def test_release_with_delay_and_new_ttl_adds_the_delay(lq: Legacy) -> None:
    tid = taken(lq, "x", ttl=10)
    lq.advance(2)
    lq.task("release", 0, tid, "3", "20")
    meta = lq.task("meta", 0, tid)
    assert meta[2] == "delayed" and meta[8] == 25 * SEC and meta[3] == T0 + 5 * SEC


@pytest.mark.parametrize(("delay", "ttl"), [(0, 0), (-4, -4), (None, None), ("0", "-1")])
def test_release_without_positive_delay_or_ttl_keeps_them(
    lq: Legacy, delay: object, ttl: object
) -> None:
    tid = taken(lq, "x", ttl=10)
    lq.advance(3)
    assert lq.task("release", 0, tid, delay, ttl)[2] == "ready"
    meta = lq.task("meta", 0, tid)
    assert meta[8] == 10 * SEC and meta[3] == T0 + 10 * SEC


def test_requeue_puts_the_task_at_the_tail(lq: Legacy) -> None:
    first = lq.put("first")[0]
    others = [lq.put(n)[0] for n in range(2)]
    lq.take_id()
    assert lq.task("requeue", 0, first) == [first, "t", "ready", "first"]
    assert lq.task("meta", 0, first)[4] == "128"  # last ready ipri 127 + 1
    assert [lq.take_id() for _ in range(3)] == [*others, first]
    assert lq.stats(0, "t")["space0.t.requeue"] == "1"


def test_requeue_alone_gets_the_default_ipri(lq: Legacy) -> None:
    tid = taken(lq, "x")
    lq.task("requeue", 0, tid)
    assert lq.task("meta", 0, tid)[4] == "127"


def test_requeue_still_goes_to_the_tail_once_ipri_is_capped_at_255(lq: Legacy) -> None:
    pair = {lq.put("a")[0], lq.put("b")[0]}
    for _ in range(300):  # each requeue lands one ipri step behind the other task
        lq.task("requeue", 0, lq.take_id())
    assert {lq.task("meta", 0, tid)[4] for tid in pair} == {"255"}
    first = lq.take_id()
    lq.task("requeue", 0, first)
    (second,) = pair - {first}
    assert lq.take_id() == second
    assert lq.take_id() == first


def test_delete_works_in_any_state_and_answers_the_task_as_it_was(lq: Legacy) -> None:
    tid = taken(lq, "t", conn=5)
    ready = lq.put("r")[0]
    delayed = lq.put("d", delay=5)[0]
    assert lq.task("delete", 0, ready)[2] == "ready"
    assert lq.task("delete", 0, tid, conn=9)[2] == "taken"
    assert lq.task("delete", "0", delayed) == [delayed, "t", "delayed", "d"]
    assert lq.error("delete", 0, delayed) == "Task not found"
    assert lq.stats(0, "t")["space0.t.delete"] == "3"
    lq.q.disconnected(5)  # the deleted task is no longer owned by anyone
    assert lq.stats(0, "t").get("space0.t.ready_by_disconnect") is None


def test_truncate_removes_every_task_of_the_tube_only(lq: Legacy) -> None:
    taken(lq, "b")
    lq.put("a")
    lq.put("c", delay=3)
    keep = lq.put("other", tube="u")[0]
    assert lq.call("truncate", "0", "t") == [3]
    assert lq.call("truncate", 0, "t") == [0]
    assert lq.take_id() is None
    assert lq.status(keep) == "ready"
    stats = lq.stats(0, "t")
    assert stats["space0.t.tasks.total"] == "0" and stats["space0.t.tasks.taken"] == "0"
    assert "space0.t.truncate" not in stats
