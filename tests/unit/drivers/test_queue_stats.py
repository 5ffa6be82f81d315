"""Statistics (QUEUE.md §7): format, counting rules, resets."""

from __future__ import annotations

import pytest

from tests.unit.drivers.queue_harness import (
    TTL_DRIVERS,
    VARIANT_IDS,
    VARIANTS,
    Q,
    error_of,
    make_tube,
)

CALL_KEYS = {"ack", "bury", "delete", "kick", "put", "release", "take", "touch", "ttl", "ttr"}
CALL_KEYS |= {"delay"}


def scenario(h: Q, type_: str) -> None:
    """The reference scenario: 5 puts, delete(4), take, release(0), take, ack(0),
    bury 1, bury 2, kick(1), take (and one delayed put on ttl drivers)."""
    for i in range(5):
        h.put("t", i)
    h.tcall("t", "delete", 4)
    assert h.take("t")[0] == 0
    h.tcall("t", "release", 0)
    assert h.take("t")[0] == 0
    h.tcall("t", "ack", 0)
    h.tcall("t", "bury", 1)
    h.tcall("t", "bury", 2)
    assert h.one("t", "kick", 1) == 1
    assert h.take("t")[0] == 1
    if type_ in TTL_DRIVERS:
        h.put("t", "later", delay=100)


@pytest.mark.parametrize(("type_", "mode"), VARIANTS, ids=VARIANT_IDS)
def test_reference_scenario(type_: str, mode: str | None) -> None:
    h = Q()
    make_tube(h, "t", type_, mode)
    scenario(h, type_)
    stats = h.stats("t")
    ttl = type_ in TTL_DRIVERS
    assert stats["tasks"] == {
        "ready": 1,
        "taken": 1,
        "buried": 1,
        "delayed": 1 if ttl else 0,
        "done": 2,
        "total": 4 if ttl else 3,
    }
    assert stats["calls"] == {
        "ack": 1,
        "bury": 2,
        "delete": 1,
        "kick": 1,
        "put": 6 if ttl else 5,
        "release": 1,
        "take": 3,
        "touch": 0,
        "ttl": 0,
        "ttr": 0,
        "delay": 0,
    }


@pytest.mark.parametrize(("type_", "mode"), VARIANTS, ids=VARIANT_IDS)
def test_all_call_keys_are_always_present(type_: str, mode: str | None) -> None:
    h = Q()
    make_tube(h, "t", type_, mode)
    stats = h.stats("t")
    assert set(stats["calls"]) == CALL_KEYS
    assert set(stats["tasks"]) == {"ready", "taken", "buried", "delayed", "done", "total"}


def test_delay_counting_differs_between_fifottl_and_utubettl() -> None:
    h = Q()
    make_tube(h, "f", "fifottl")
    make_tube(h, "u", "utubettl")
    h.put("f", "a", delay=1)
    h.put("u", "a", delay=1)
    assert "delayed" not in h.stats("u")["calls"]
    h.advance(1)
    assert h.stats("f")["calls"]["delay"] == 1
    assert h.stats("u")["calls"]["delay"] == 0
    assert h.stats("u")["calls"]["delayed"] == 1
    assert "delayed" not in h.stats("f")["calls"]


def test_ttl_expiry_counts_ttl_delete_and_done() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    h.put("t", "a", ttl=1)
    h.advance(1)
    stats = h.stats("t")
    assert (stats["calls"]["ttl"], stats["calls"]["delete"], stats["tasks"]["done"]) == (1, 1, 1)


def test_put_counts_only_successful_puts() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    error_of(h.tcall, "t", "put", "x", {"pri": -1})
    assert h.stats("t")["calls"]["put"] == 0


def test_failed_calls_do_not_count() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    error_of(h.tcall, "t", "ack", 0)
    error_of(h.tcall, "t", "bury", 0)
    error_of(h.tcall, "t", "delete", 0)
    assert h.take("t") is None
    assert set(h.stats("t")["calls"].values()) == {0}


def test_release_counts_every_way_back_to_ready() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    for i in range(4):
        h.put("t", i)
    h.take("t", conn=1)
    h.tcall("t", "release", 0, conn=1)  # release()
    h.take("t", conn=2)
    h.q.disconnected(2)  # session end
    h.take("t", conn=3)
    h.tcall("t", "release_all")  # release_all
    assert h.stats("t")["calls"]["release"] == 3
    h.take("t", conn=4)
    h2 = h.restart()  # restart: counted in the fresh stats
    assert h2.stats("t")["calls"]["release"] == 1


def test_statistics_of_every_tube_and_of_none() -> None:
    h = Q()
    assert h.call("queue.statistics") == [[]]
    assert h.call("queue.stats") == [[]]
    make_tube(h, "a", "fifo")
    make_tube(h, "b", "utubettl")
    h.put("a", "x")
    every = h.call("queue.statistics")[0]
    assert set(every) == {"a", "b"}
    assert every["a"] == h.stats("a")
    assert h.call("queue.stats", "a") == h.call("queue.statistics", "a")
    assert h.call("queue.statistics", None) == [every]


def test_statistics_of_an_unknown_tube() -> None:
    h = Q()
    assert error_of(h.call, "queue.statistics", "nosuch") == (32, "attempt to index a nil value")


def test_drop_resets_statistics_and_truncate_does_not() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    h.put("t", "a")
    h.tcall("t", "truncate")
    assert h.stats("t")["calls"]["put"] == 1
    assert h.stats("t")["tasks"]["total"] == 0
    h.tcall("t", "drop")
    make_tube(h, "t", "fifo")
    assert h.stats("t")["calls"]["put"] == 0


def test_restart_resets_statistics() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    h.put("t", "a")
    h.tcall("t", "delete", 0)
    h2 = h.restart()
    stats = h2.stats("t")
    assert stats["calls"]["put"] == 0
    assert stats["tasks"]["done"] == 0


@pytest.mark.parametrize("type_", TTL_DRIVERS)
def test_touch_counts_two_per_touch(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_)
    h.put("t", "a")
    h.take("t")
    h.tcall("t", "touch", 0, 1)
    h.tcall("t", "touch", 0, 1)
    assert h.stats("t")["calls"]["touch"] == 4


def test_kick_counts_per_task() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    for i in range(3):
        h.put("t", i)
        h.tcall("t", "bury", i)
    h.tcall("t", "kick", 10)
    assert h.stats("t")["calls"]["kick"] == 3


def test_task_counts_follow_every_transition() -> None:
    h = Q()
    make_tube(h, "t", "utubettl")
    h.put("t", "a", utube="1")
    h.put("t", "b", utube="1")
    h.put("t", "c", delay=1, utube="2")
    h.take("t")
    h.tcall("t", "bury", 1)
    assert h.stats("t")["tasks"] == {
        "ready": 0,
        "taken": 1,
        "buried": 1,
        "delayed": 1,
        "done": 0,
        "total": 3,
    }
    h.advance(1)
    h.tcall("t", "ack", 0)
    tasks = h.stats("t")["tasks"]
    assert (tasks["ready"], tasks["taken"], tasks["delayed"], tasks["done"]) == (1, 0, 0, 1)
