"""Delay, ttl, ttr and touch (QUEUE.md §4, §11 "Timers"), driven by a fake clock."""

from __future__ import annotations

import pytest

from queuebox.drivers.queue import Queue
from tests.unit.drivers.queue_harness import SEC, T0, TTL_DRIVERS, Q, error_of, make_tube, variant

TTL_VARIANTS = [("fifottl", None), ("limfifottl", None), ("utubettl", None)]
TTL_VARIANTS += [("utubettl", "ready_buffer")]
TTL_IDS = ["fifottl", "limfifottl", "utubettl", "utubettl-ready_buffer"]


@pytest.fixture(params=TTL_VARIANTS, ids=TTL_IDS)
def h(request: pytest.FixtureRequest) -> Q:
    return variant(request)


def test_delayed_task_is_not_taken_during_its_delay_and_is_after(h: Q) -> None:
    assert h.put("t", "later", delay=1) == [0, "~", "later"]
    assert h.take("t") is None
    assert h.q.next_deadline() == T0 + SEC
    h.advance(1)
    assert h.take("t") == [0, "t", "later"]


def test_delay_end_wakes_one_waiter(h: Q) -> None:
    h.put("t", "later", delay=1)
    h.wait("t", conn=2, timeout=3)
    h.wait("t", conn=3, timeout=3)
    h.advance(1)
    assert h.woken == ["take:2"]


def test_ready_task_expires_at_its_ttl(h: Q) -> None:
    h.put("t", "a", ttl=1)
    h.advance(0.999)
    assert h.status("t", 0) == "r"
    h.advance(0.001)
    assert h.status("t", 0) is None
    calls = h.stats("t")["calls"]
    assert (calls["ttl"], calls["delete"]) == (1, 1)
    assert h.stats("t")["tasks"]["done"] == 1


def test_buried_task_expires_at_its_ttl(h: Q) -> None:
    h.put("t", "a", ttl=1)
    h.one("t", "bury", 0)
    h.advance(1)
    assert h.status("t", 0) is None


def test_ttl_counts_from_creation_plus_delay(h: Q) -> None:
    h.put("t", "a", delay=2, ttl=1)
    h.advance(2)
    assert h.status("t", 0) == "r"
    h.advance(0.999)
    assert h.status("t", 0) == "r"
    h.advance(0.001)
    assert h.status("t", 0) is None


def test_expired_ready_tasks_are_never_taken_even_before_the_timer_runs(h: Q) -> None:
    h.put("t", "a", ttl=0.1, utube="u1")
    h.put("t", "b", ttl=0.1, utube="u2")
    h.clock.now += SEC // 5  # no tick: the call itself sees the time
    assert h.take("t") is None
    assert h.stats("t")["calls"]["ttl"] == 2


def test_ttr_returns_the_task_to_ready_and_wakes_a_waiter(h: Q) -> None:
    h.put("t", "a", ttr=0.5)
    h.take("t", conn=1)
    h.wait("t", conn=2, timeout=None)
    h.advance(0.8)
    assert h.woken == ["take:2"]
    assert h.status("t", 0) == "r"
    assert error_of(h.tcall, "t", "ack", 0, conn=1) == (32, "Task was not taken")
    assert h.take("t", conn=2) == [0, "t", "a"]
    assert h.stats("t")["calls"]["ttr"] == 1


def test_tube_ttr_defaults_to_the_tube_ttl_and_per_put_ttl_leaves_ttr(h: Q) -> None:
    type_ = h.type  # type: ignore[attr-defined]
    make_tube(h, "u", type_, ttl=5)
    h.put("u", "a", ttl=100)
    h.take("u")
    h.advance(5)
    assert h.status("u", 0) == "r"


def test_ttr_zero_requeues_at_once(h: Q) -> None:
    h.put("t", "a", ttr=0)
    h.take("t")
    assert h.status("t", 0) == "r"


def test_touch_extends_ttl_and_ttr(h: Q) -> None:
    h.put("t", "a", ttl=5, ttr=1)
    h.take("t")
    assert h.one("t", "touch", 0, 2) == [0, "t", "a"]
    task = h.catalog.space("t").get((0,))
    assert (task[3], task[4]) == (7 * SEC, 3 * SEC)
    assert task[2] == T0 + 3 * SEC
    h.advance(2.5)
    assert h.one("t", "ack", 0) == [0, "-", "a"]
    assert h.stats("t")["calls"]["touch"] == 2


def test_release_with_delay_adds_the_delay_to_ttl_and_leaves_ttr(h: Q) -> None:
    h.put("t", "a", ttl=10, ttr=20)
    h.take("t")
    assert h.one("t", "release", 0, {"delay": 5}) == [0, "~", "a"]
    task = h.catalog.space("t").get((0,))
    assert (task[3], task[4]) == (15 * SEC, 20 * SEC)
    assert h.take("t") is None
    h.advance(5)
    assert h.take("t") == [0, "t", "a"]


def test_release_delay_of_a_string_is_refused_and_keeps_the_task_owned(h: Q) -> None:
    h.put("t", "a")
    h.take("t")
    assert error_of(h.tcall, "t", "release", 0, {"delay": "1"}) == (
        32,
        "attempt to compare number with string",
    )
    assert h.one("t", "release", 0) == [0, "r", "a"]


def test_buried_task_is_not_released_at_ttr_and_is_deleted_at_ttl(h: Q) -> None:
    h.put("t", "a", ttl=3, ttr=1)
    h.take("t")
    h.one("t", "bury", 0)
    h.advance(1.5)
    assert h.status("t", 0) == "!"
    h.advance(1.5)
    assert h.status("t", 0) is None
    assert h.stats("t")["calls"]["ttr"] == 0


def test_kicked_task_keeps_its_ttl(h: Q) -> None:
    h.put("t", "a", ttl=2)
    h.one("t", "bury", 0)
    h.advance(1)
    h.one("t", "kick", 1)
    h.advance(1)
    assert h.status("t", 0) is None


def test_ttl_beyond_100_years_never_fires(h: Q) -> None:
    h.put("t", "a", ttl=4e9)
    assert h.q.next_deadline() is None


@pytest.mark.parametrize("type_", ["fifottl", "limfifottl"])
def test_fifottl_caps_the_take_at_the_ttl(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_)
    h.put("t", "a", ttl=1, ttr=10)
    h.take("t")
    h.advance(1.4)
    assert error_of(h.tcall, "t", "peek", 0) == (32, "Task 0 not found")
    calls = h.stats("t")["calls"]
    assert (calls["ttr"], calls["ttl"], calls["delete"]) == (1, 1, 1)
    assert h.stats("t")["tasks"]["done"] == 1


@pytest.mark.parametrize("mode", [None, "ready_buffer"])
def test_utubettl_keeps_the_task_taken_past_its_ttl_until_ttr(mode: str | None) -> None:
    h = Q()
    make_tube(h, "t", "utubettl", mode)
    h.put("t", "a", ttl=1, ttr=2)
    h.take("t")
    h.advance(1.4)
    assert h.status("t", 0) == "t"
    h.advance(1.0)
    assert h.status("t", 0) is None
    calls = h.stats("t")["calls"]
    assert (calls["ttr"], calls["ttl"]) == (1, 1)


def test_utubettl_ttr_one_makes_the_task_ready_again() -> None:
    h = Q()
    make_tube(h, "t", "utubettl")
    h.put("t", "a", ttr=1)
    h.take("t")
    h.advance(1.1)
    assert h.take("t") == [0, "t", "a"]


def test_delayed_task_then_ttr_then_ttl_then_ack_says_not_taken() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    h.put("t", "a", delay=0.5, ttl=1, ttr=0.3)
    h.advance(0.5)
    assert h.take("t") == [0, "t", "a"]
    h.advance(0.3)
    assert h.take("t") == [0, "t", "a"]
    h.advance(1)
    assert error_of(h.tcall, "t", "ack", 0) == (32, "Task was not taken")


def test_tick_runs_events_of_all_tubes_in_deadline_order() -> None:
    h = Q()
    make_tube(h, "a", "fifottl")
    make_tube(h, "b", "utubettl")
    h.put("a", "a0", delay=3)
    h.put("b", "b0", delay=1)
    h.put("a", "a1", delay=2)
    order: list[str] = []
    h.q.waiters.add("a", "take", 1, None, h.clock.now, lambda: order.append("a"))
    h.q.waiters.add("a", "take", 2, None, h.clock.now, lambda: order.append("a"))
    h.q.waiters.add("b", "take", 3, None, h.clock.now, lambda: order.append("b"))
    assert h.q.next_deadline() == T0 + SEC
    h.advance(5)
    assert order == ["b", "a", "a"]
    assert h.q.next_deadline() is not None  # the ttls of the three tasks
    assert h.q.next_deadline() > T0 + 1000 * SEC


def test_next_deadline_follows_the_earliest_task() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    assert h.q.next_deadline() is None
    h.put("t", "a", ttl=10)
    h.put("t", "b", ttl=5)
    assert h.q.next_deadline() == T0 + 5 * SEC
    h.tcall("t", "delete", 1)
    assert h.q.next_deadline() == T0 + 10 * SEC
    h.tcall("t", "truncate")
    assert h.q.next_deadline() is None


def test_plain_drivers_have_no_deadlines_but_a_release_delay() -> None:
    h = Q()
    for type_ in ("fifo", "utube"):
        make_tube(h, type_, type_)
        h.put(type_, "a", delay=1, ttl=1)  # put ignores both, as in the module
        h.take(type_)
        h.tcall(type_, "release", 0)
    assert h.q.next_deadline() is None
    for type_ in ("fifo", "utube"):
        h.take(type_)
        h.tcall(type_, "release", 0, {"delay": 1})
    assert h.q.next_deadline() == T0 + SEC
    h.advance(1)
    assert h.q.next_deadline() is None
    assert [h.status(t, 0) for t in ("fifo", "utube")] == ["r", "r"]


@pytest.mark.parametrize("type_", TTL_DRIVERS)
def test_tube_ttl_option_applies_to_puts(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_, ttl=2)
    h.put("t", "a")
    h.advance(2)
    assert h.status("t", 0) is None


def test_task_deadlines_cost_one_entry_per_tube_in_the_queue_wide_set() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    for i in range(200):
        h.put("t", i, ttl=1000 - i)
    assert len(h.q.deadlines) == 1  # the tube keeps its order in its own index
    assert h.q.next_deadline() == T0 + 801 * SEC


def test_the_server_hears_when_the_earliest_deadline_moves_and_only_then() -> None:
    """The server's one timer is rearmed when the earliest deadline moves: a put
    to an untimed tube, or one with a later event, reports nothing."""
    heard: list[int | None] = []
    h = Q()
    h.q = Queue(h.catalog, h.clock, on_deadline=heard.append)
    make_tube(h, "plain", "fifo")
    make_tube(h, "t", "fifottl")
    h.put("plain", "a")
    assert heard == []
    h.put("t", "b", ttl=10)
    h.put("t", "c", ttl=20)
    h.put("plain", "d")
    assert heard == [T0 + 10 * SEC]
    h.tcall("t", "truncate")
    assert heard == [T0 + 10 * SEC, None]
