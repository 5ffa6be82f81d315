"""Legacy waiting takes, disconnects, restarts, statistics, and the legacy/modern boundary."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.drivers.legacy import LegacyQueue, is_reserved_name
from queuebox.drivers.legacy.base import Blocked
from queuebox.storage.catalog import Catalog
from tests.unit.drivers.legacy_harness import SEC, T0, Legacy


@pytest.fixture
def lq() -> Legacy:
    return Legacy()


class Server:
    """What the server glue does with a Blocked take: file a waiter, retry on wake."""

    def __init__(self, lq: Legacy) -> None:
        self.lq = lq
        self.woken: list[int] = []

    def take(self, conn: int, tube: str = "t", timeout: Any = None) -> Blocked:
        blocked = self.lq.call("take", 0, tube, *([] if timeout is None else [timeout]), conn=conn)
        assert isinstance(blocked, Blocked), blocked
        self.lq.q.waiters.add(
            blocked.tube, blocked.kind, conn, blocked.timeout_s, self.lq.clock.now,
            wake=lambda: self.woken.append(conn),
        )  # fmt: skip
        return blocked


# --- waiting ---


def test_take_with_no_timeout_blocks_for_365_days(lq: Legacy) -> None:
    blocked = lq.call("take", 0, "t")
    assert isinstance(blocked, Blocked)  # the modern core's type: the glue treats both alike
    assert (blocked.tube, blocked.kind, blocked.timeout_s) == ("0:t", "take", 365 * 86400)


def test_a_blocked_take_retries_as_a_legacy_take_with_the_time_left(lq: Legacy) -> None:
    blocked = lq.call("take", "0", "t", "10")
    assert blocked.retry(2.5) == ("queue.take", ["0", "t", 2.5])
    assert blocked.retry(-0.001) == ("queue.take", ["0", "t", 0.0])  # never negative
    assert blocked.retry(None) == ("queue.take", ["0", "t", None])


def test_the_whole_wait_woken_by_a_put_then_retried(lq: Legacy) -> None:
    server = Server(lq)
    blocked = server.take(conn=2, timeout=10)
    lq.clock.now += 3 * SEC
    tid = lq.put("x")[0]
    assert server.woken == [2]
    answer = lq.q.call(2, *blocked.retry(7.0))
    assert answer == [[tid, "t", "taken", "x"]]
    assert lq.task("meta", 0, tid)[6] == 2


def test_the_whole_wait_ending_in_a_timeout(lq: Legacy) -> None:
    server = Server(lq)
    blocked = server.take(conn=2, timeout=1)
    lq.clock.now += SEC
    assert lq.q.call(2, *blocked.retry(0.0)) == []  # the last attempt, counted
    assert lq.stats(0, "t")["space0.t.take_timeout"] == "1"


def test_take_with_a_timeout_blocks_for_that_long(lq: Legacy) -> None:
    assert lq.call("take", "2", "t", "1.5").timeout_s == 1.5
    assert lq.call("take", 2, "t", 0.25).timeout_s == 0.25


def test_put_wakes_one_waiter_of_that_space_and_tube(lq: Legacy) -> None:
    server = Server(lq)
    server.take(conn=1, timeout=10)
    server.take(conn=2, timeout=5)
    lq.put("other tube", tube="u")
    lq.put("other space", space=1)
    lq.put("delayed", delay=1)
    assert server.woken == []
    lq.put("x")
    assert server.woken == [2]  # shortest timeout first (QUEUE.md §6)
    assert lq.task("take", 0, "t", 0, conn=2)[3] == "x"


@pytest.mark.parametrize(
    "make_ready",
    [
        pytest.param(lambda lq, tid: lq.task("release", 0, tid), id="release"),
        pytest.param(lambda lq, tid: lq.task("requeue", 0, tid), id="requeue"),
        pytest.param(lambda lq, tid: lq.advance(61), id="ttr"),
        pytest.param(lambda lq, tid: lq.q.disconnected(1), id="disconnect"),
        pytest.param(lambda lq, tid: (lq.task("bury", 0, tid), lq.task("dig", 0, tid)), id="dig"),
        pytest.param(
            lambda lq, tid: (lq.task("bury", 0, tid), lq.call("kick", 0, "t", 5)), id="kick"
        ),
        pytest.param(
            lambda lq, tid: (lq.task("release", 0, tid, 3), lq.advance(3)), id="delay-end"
        ),
    ],
)
def test_every_return_to_ready_wakes_a_waiter(lq: Legacy, make_ready: Any) -> None:
    tid = lq.put("x")[0]
    assert lq.take_id(conn=1) == tid
    server = Server(lq)
    server.take(conn=2)
    server.take(conn=3)
    make_ready(lq, tid)
    assert server.woken == [2]


def test_wakes_run_after_the_call_has_finished(lq: Legacy) -> None:
    seen: list[str] = []
    blocked = lq.call("take", 0, "t", conn=2)
    # The callback reads the queue: it must see the put complete, counter included.
    lq.q.waiters.add(
        blocked.tube, blocked.kind, 2, blocked.timeout_s, T0,
        wake=lambda: seen.append(lq.stats(0, "t")["space0.t.put"]),
    )  # fmt: skip
    lq.put("x")
    assert seen == ["1"]


def test_a_disconnected_waiter_is_never_woken(lq: Legacy) -> None:
    server = Server(lq)
    server.take(conn=1)
    server.take(conn=2)
    lq.q.disconnected(1)
    lq.put("x")
    assert server.woken == [2]


def test_waiting_is_separate_from_modern_tubes_of_the_same_name(lq: Legacy) -> None:
    server = Server(lq)
    server.take(conn=1, tube="jobs")
    assert lq.q.waiters.count("jobs", "take") == 0
    assert lq.q.waiters.count("0:jobs", "take") == 1


# --- disconnect ---


def test_disconnect_returns_every_task_the_connection_took(lq: Legacy) -> None:
    a = lq.put("a", tube="one")[0]
    b = lq.put("b", space=3, tube="two")[0]
    mine = lq.put("c", tube="one")[0]
    assert lq.take_id("one", conn=7) == a
    assert lq.take_id("two", space=3, conn=7) == b
    assert lq.take_id("one", conn=8) == mine
    lq.q.connected(7)
    lq.q.disconnected(7)
    assert lq.status(a) == "ready" and lq.status(b, space=3) == "ready"
    assert lq.status(mine) == "taken"
    assert lq.task("meta", 0, a)[6] == 0
    assert lq.stats(0, "one")["space0.one.ready_by_disconnect"] == "1"
    assert lq.stats(3, "two")["space3.two.ready_by_disconnect"] == "1"
    lq.q.disconnected(7)  # twice is harmless
    assert lq.stats(0, "one")["space0.one.ready_by_disconnect"] == "1"


def test_disconnect_leaves_buried_and_done_tasks_alone(lq: Legacy) -> None:
    buried = lq.put("b")[0]
    done = lq.put("d")[0]
    lq.take_id(conn=5)
    lq.take_id(conn=5)
    lq.task("bury", 0, buried, conn=5)
    lq.task("done", 0, done, conn=5)
    lq.q.disconnected(5)
    assert (lq.status(buried), lq.status(done)) == ("buried", "done")


# --- restart ---


@pytest.mark.parametrize("how", ["restart", "recover"])
def test_restart_keeps_every_status_data_and_deadline(lq: Legacy, how: str) -> None:
    taken = lq.put("t", ttr=5)[0]
    buried = lq.put("b", ttl=50)[0]
    done = lq.put("x", ttl=40)[0]
    assert [lq.take_id(conn=9) for _ in range(3)] == [taken, buried, done]
    lq.task("bury", 0, buried, conn=9)
    lq.task("done", 0, done, "result", conn=9)
    delayed = lq.put("d", delay=30)[0]
    ready = lq.put("r", "more", {"k": 1}, pri=3)[0]
    before = {t: lq.task("meta", 0, t) for t in (ready, buried, delayed, done)}
    lq2 = getattr(lq, how)()
    assert lq2.task("peek", 0, ready) == [ready, "t", "ready", "r", "more", {"k": 1}]
    assert lq2.task("peek", 0, done) == [done, "t", "done", "result"]
    for t, meta in before.items():
        assert lq2.task("meta", 0, t)[:12] == meta[:12]  # all but "now"
    assert lq2.status(taken) == "ready"


@pytest.mark.parametrize("how", ["restart", "recover"])
def test_tasks_taken_at_restart_come_back_ready_and_counted(lq: Legacy, how: str) -> None:
    tid = lq.put("x", ttl=100, ttr=5)[0]
    done = lq.put("y", ttl=100)[0]
    lq.take_id(conn=4)
    lq.take_id(conn=4)
    lq.task("done", 0, done, "result", conn=4)
    lq.put("z", tube="quiet")
    lq2 = getattr(lq, how)()
    meta = lq2.task("meta", 0, tid)
    assert meta[2:4] == ["ready", T0 + 100 * SEC] and meta[6] == 0 and meta[11] == 1
    assert lq2.task("peek", 0, done) == [done, "t", "done", "result"]
    stats = lq2.stats()
    assert stats["space0.t.ready_by_restart"] == "1"
    assert stats["space0.t.tasks.ready"] == "1" and stats["space0.t.tasks.done"] == "1"
    assert not any(k.startswith("space0.quiet.") for k in stats)  # no activity since start
    assert lq2.take_id(conn=1) == tid


def test_deadlines_survive_a_restart(lq: Legacy) -> None:
    delayed = lq.put("d", delay=5)[0]
    dies = lq.put("x", ttl=8)[0]
    lq2 = lq.recover()
    assert lq2.q.next_deadline() == T0 + 5 * SEC
    lq2.advance(5)
    assert lq2.status(delayed) == "ready"
    lq2.advance(3)
    assert lq2.error("peek", 0, dies) == "Task not found"


def test_order_and_put_unique_survive_a_restart(lq: Legacy) -> None:
    ids = [lq.put(n)[0] for n in range(3)]
    urgent = lq.task("urgent", 0, "t", 0, 0, 0, 0, "u")[0]
    key = lq.task("put_unique", 0, "t", 0, 0, 0, 0, "key")[0]
    lq2 = lq.recover()
    assert lq2.task("put_unique", 0, "t", 0, 0, 0, 0, "key")[0] == key
    late = lq2.put("late")[0]
    head = lq2.task("urgent", 0, "t", 0, 0, 0, 0, "head")[0]
    order = [lq2.take_id() for _ in range(7)]
    assert order == [head, urgent, *ids, key, late]


# --- statistics ---


def test_statistics_pairs_counters_then_task_counts_as_strings(lq: Legacy) -> None:
    tid = lq.put("a")[0]
    lq.put("b", delay=10)
    lq.take_id()
    lq.task("peek", 0, tid)
    flat = lq.q.statistics([0, "t"])
    assert flat == [
        "space0.t.put", "2",
        "space0.t.take", "1",
        "space0.t.peek", "1",
        "space0.t.tasks.total", "2",
        "space0.t.tasks.ready", "0",
        "space0.t.tasks.delayed", "1",
        "space0.t.tasks.taken", "1",
        "space0.t.tasks.buried", "0",
        "space0.t.tasks.done", "0",
    ]  # fmt: skip


def test_statistics_selects_by_space_and_tube(lq: Legacy) -> None:
    lq.put("a", space=1, tube="x")
    lq.put("b", space=1, tube="y")
    lq.put("c", space=2, tube="x")
    assert {k.split(".")[0] + "." + k.split(".")[1] for k in lq.stats()} == {
        "space1.x", "space1.y", "space2.x",
    }  # fmt: skip
    assert {k.split(".")[1] for k in lq.stats("1")} == {"x", "y"}
    assert set(lq.stats(2, "x")) >= {"space2.x.put", "space2.x.tasks.total"}
    assert lq.stats(1, "nothing") == {} and lq.stats(9) == {}


def test_statistics_counts_each_call_by_its_counter_name(lq: Legacy) -> None:
    lq.put("a")
    lq.task("urgent", 0, "t", 0, 0, 0, 0, "u")
    lq.task("put_unique", 0, "t", 0, 0, 0, 0, "p")  # counted as put
    steps = ["touch", "release", "requeue", "bury", "done", "ack"]
    for name in steps:
        tid = lq.take_id()
        lq.task(name, 0, tid)
        if name == "bury":
            lq.task("dig", 0, tid)
        lq.task("meta", 0, tid) if name != "ack" else None
        lq.put(name)
    lq.call("kick", 0, "t", 1)  # nothing buried: no dig counted
    lq.call("truncate", 0, "t")  # not counted
    lq.call("take", 0, "t", 0)
    stats = lq.stats(0, "t")
    counters = {k.removeprefix("space0.t."): int(v) for k, v in stats.items() if ".tasks." not in k}
    assert counters == {
        "put": 8, "urgent": 1, "take": 6, "touch": 1, "release": 1, "requeue": 1,
        "bury": 1, "dig": 1, "done": 1, "ack": 1, "meta": 5, "take_timeout": 1,
    }  # fmt: skip


def test_statistics_rejects_bad_arguments(lq: Legacy) -> None:
    with pytest.raises(Exception, match="Invalid value of space: 'x'"):
        lq.q.statistics(["x"])
    with pytest.raises(Exception, match="Invalid value of tube: 5"):
        lq.q.statistics([0, 5])


# --- legacy and modern side by side ---


def test_legacy_spaces_use_the_reserved_prefix() -> None:
    assert is_reserved_name("_legacy_0") and is_reserved_name("_legacy_whatever")
    assert not is_reserved_name("jobs") and not is_reserved_name("legacy_0")


def test_a_foreign_space_with_a_reserved_name_is_refused_not_used() -> None:
    from queuebox.storage.space import IndexDef

    catalog = Catalog()
    catalog.create_space("_legacy_0", [IndexDef("pk", (0,))])
    catalog.create_space("t", [IndexDef("pk", (0,))])  # a modern tube named like the legacy one
    lq = Legacy(catalog)
    assert lq.error("put", 0, "t", 0, 0, 0, 0, "x") == (
        "Space '_legacy_0' is not a legacy queue space"
    )
    assert lq.put("x", space=1, tube="t")[1:] == ["t", "ready", "x"]
    assert len(catalog.space("t")) == 0 and len(catalog.space("_legacy_0")) == 0
    assert len(catalog.space("_legacy_1")) == 1
    assert isinstance(lq.q, LegacyQueue)
