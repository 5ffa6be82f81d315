"""Schedules in the queue core (drivers/schedules.py) with a fake clock: ticks fire
from the queue's deadlines, a restart fires no tick twice, missed ticks are
skipped or caught up once, pause/resume/delete, bad specs refused."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.drivers.schedules import SCHEDULES_SPACE
from tests.unit.drivers.queue_harness import SEC, T0, Q, error_of, make_tube

ER_PROC_LUA = 32


def sched(h: Q, run: Any) -> Any:
    return h.q.with_schedules(run)


def define(h: Q, name: str, tube: str, **spec: Any) -> dict[str, Any]:
    return sched(h, lambda s, now: s.define(name, tube, spec, now))  # type: ignore[no-any-return]


def listed(h: Q, name: str) -> dict[str, Any]:
    return sched(h, lambda s, now: s.describe_one(name))  # type: ignore[no-any-return]


def ticks_put(h: Q, tube: str) -> list[dict[str, Any]]:
    """The data of every task in `tube`, taken and acked, oldest first."""
    found = []
    while (task := h.take(tube)) is not None:
        found.append(task[2])
        h.tcall(tube, "ack", task[0])
    return found


@pytest.fixture
def h() -> Q:
    q = Q()
    q.clock.now = T0 + SEC // 2  # half a second past a whole second
    make_tube(q, "jobs", "fifottl")
    return q


def test_an_interval_puts_one_task_per_tick_with_its_tick_and_data(h: Q) -> None:
    shown = define(h, "beat", "jobs", every=2, data={"to": "ops"}, opts={"pri": 3})
    assert shown["next_tick"] == (T0 + 2 * SEC) / SEC and shown["state"] == "active"
    assert h.q.next_deadline() == T0 + 2 * SEC
    h.advance(1.4)  # T0 + 1.9 s: nothing yet
    assert ticks_put(h, "jobs") == []
    h.advance(0.1)
    h.advance(2.0)
    assert ticks_put(h, "jobs") == [
        {"schedule": "beat", "tick": (T0 + 2 * SEC) / SEC, "ticks": 1, "data": {"to": "ops"}},
        {"schedule": "beat", "tick": (T0 + 4 * SEC) / SEC, "ticks": 1, "data": {"to": "ops"}},
    ]
    shown = listed(h, "beat")
    counts = (shown["fired"], shown["missed_ticks"], shown["last_tick"])
    assert counts == (2, 0, (T0 + 4 * SEC) / SEC)


@pytest.mark.parametrize("via_msgpack", [False, True], ids=["same-catalog", "msgpack"])
def test_a_restart_right_after_a_tick_does_not_fire_it_again(h: Q, via_msgpack: bool) -> None:
    define(h, "beat", "jobs", every=1)
    h.advance(0.5)  # T0 + 1 s: fired
    h2 = h.restart(via_msgpack)
    assert h2.stats("jobs")["tasks"]["total"] == 1
    assert listed(h2, "beat")["fired"] == 1
    h2.advance(0.999)
    assert h2.stats("jobs")["tasks"]["total"] == 1
    h2.advance(0.001)
    assert [t["tick"] for t in ticks_put(h2, "jobs")] == [(T0 + SEC) / SEC, (T0 + 2 * SEC) / SEC]


def test_skip_drops_the_ticks_missed_while_down(h: Q) -> None:
    define(h, "beat", "jobs", every=1, missed="skip")
    h.advance(0.5)
    h.clock.now += 10 * SEC  # down 10 s: ticks T0+2 .. T0+11 fell due
    h2 = h.restart(via_msgpack=True)
    assert [t["tick"] for t in ticks_put(h2, "jobs")] == [(T0 + SEC) / SEC]
    shown = listed(h2, "beat")
    assert (shown["fired"], shown["missed_ticks"]) == (1, 10)
    assert shown["next_tick"] == (T0 + 12 * SEC) / SEC
    h2.advance(1)
    assert [t["ticks"] for t in ticks_put(h2, "jobs")] == [1]


def test_catch_up_puts_one_task_for_every_missed_tick(h: Q) -> None:
    define(h, "beat", "jobs", every=1, missed="catch_up")
    h.advance(0.5)
    h.clock.now += 10 * SEC
    h2 = h.restart(via_msgpack=True)
    found = ticks_put(h2, "jobs")
    assert [(t["tick"], t["ticks"]) for t in found] == [
        ((T0 + SEC) / SEC, 1),
        ((T0 + 11 * SEC) / SEC, 10),
    ]
    assert (listed(h2, "beat")["fired"], listed(h2, "beat")["missed_ticks"]) == (2, 0)


def test_a_late_timer_fires_the_last_due_tick_once_under_skip(h: Q) -> None:
    define(h, "beat", "jobs", every=1)
    h.advance(3.6)  # T0 + 4.1 s: four ticks due at one timer call
    assert [t["tick"] for t in ticks_put(h, "jobs")] == [(T0 + 4 * SEC) / SEC]
    assert listed(h, "beat")["missed_ticks"] == 3


def test_pause_resume_and_delete(h: Q) -> None:
    define(h, "beat", "jobs", every=1)
    assert sched(h, lambda s, now: s.pause("beat"))["next_tick"] is None
    assert h.q.next_deadline() is None
    h.advance(5)
    assert ticks_put(h, "jobs") == []
    resumed = sched(h, lambda s, now: s.resume("beat", now))
    assert resumed["state"] == "active" and resumed["next_tick"] == (T0 + 6 * SEC) / SEC
    h.advance(0.5)
    assert len(ticks_put(h, "jobs")) == 1
    assert sched(h, lambda s, now: s.delete("beat"))["name"] == "beat"
    h.advance(5)
    assert ticks_put(h, "jobs") == []
    assert error_of(sched, h, lambda s, now: s.pause("beat")) == (
        ER_PROC_LUA,
        "Schedule 'beat' not found",
    )


def test_a_replace_with_the_same_timing_keeps_its_place_and_counts(h: Q) -> None:
    define(h, "beat", "jobs", every=1, data=1)
    h.advance(0.5)
    define(h, "beat", "jobs", every=1, data=2)
    h.advance(1)
    assert [t["data"] for t in ticks_put(h, "jobs")] == [1, 2]
    assert listed(h, "beat")["fired"] == 2


def test_a_put_that_fails_counts_the_tick_missed_and_keeps_why(h: Q) -> None:
    define(h, "beat", "gone", every=1)
    h.advance(0.5)
    shown = listed(h, "beat")
    assert (shown["fired"], shown["missed_ticks"]) == (0, 1)
    assert shown["error"] == "Tube 'gone' not found"
    make_tube(h, "gone", "fifo")
    h.advance(1)
    shown = listed(h, "beat")
    assert (shown["fired"], shown["missed_ticks"], shown["error"]) == (1, 1, None)


def test_a_full_tube_misses_the_tick_and_says_so(h: Q) -> None:
    make_tube(h, "small", "limfifottl", capacity=1)
    define(h, "beat", "small", every=1, opts={"ttl": 60})
    h.advance(0.5)  # the first tick fills the tube
    h.advance(1)  # the second finds no room
    shown = listed(h, "beat")
    assert (shown["fired"], shown["missed_ticks"], shown["error"]) == (1, 1, "the tube is full")
    assert h.stats("small")["tasks"]["total"] == 1


def test_a_cron_schedule_in_a_zone(h: Q) -> None:
    h.clock.now = 1_767_225_600 * SEC  # 2026-01-01T00:00:00Z
    define(h, "nine", "jobs", cron="0 9 * * *", tz="Europe/Berlin")
    assert h.q.next_deadline() == (1_767_225_600 + 8 * 3600) * SEC


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({}, "a schedule needs either cron or every (not both)"),
        ({"cron": "* * * * *", "every": 1}, "a schedule needs either cron or every (not both)"),
        ({"every": 0}, "Invalid schedule: every must be from 0.1 to 31622400 seconds"),
        ({"cron": "61 * * * *"}, "Invalid schedule: bad minute '61' (from 0 to 59)"),
        ({"every": 1, "tz": "Nowhere"}, "Invalid schedule: unknown time zone 'Nowhere'"),
        ({"every": 1, "missed": "all"}, "missed must be 'skip' or 'catch_up'"),
        ({"every": 1, "color": 1}, "Unknown schedule option color"),
        ({"every": 1, "opts": {"timeout": 1}}, "Unknown put option timeout"),
        ({"every": 1, "opts": {"pri": "high"}}, "Invalid value of pri: high"),
        ({"every": 1, "opts": {"utube": 1}}, "Invalid value of utube: 1"),
        ({"every": 1, "opts": [1]}, "opts are a put's options"),
    ],
)
def test_bad_specs_are_refused(h: Q, spec: dict[str, Any], why: str) -> None:
    code, text = error_of(define, h, "bad", "jobs", **spec)
    assert code == ER_PROC_LUA and text.startswith(why)
    assert sched(h, lambda s, now: [r for r in s.rows]) == []


def test_a_row_that_no_longer_parses_waits_and_says_why(h: Q) -> None:
    """A time zone the next machine's tz database lacks must not stop the start."""
    define(h, "beat", "jobs", every=1)
    space = h.catalog.space(SCHEDULES_SPACE)
    row = space.get(("beat",))
    space.replace((*row[:2], {**row[2], "tz": "Gone/Zone"}, *row[3:]))
    h2 = h.restart(via_msgpack=True)
    shown = listed(h2, "beat")
    assert shown["next_tick"] is None and "no longer parses" in shown["error"]
    h2.advance(5)
    assert ticks_put(h2, "jobs") == []
    assert define(h2, "beat", "jobs", every=1)["error"] is None  # replaced: it fires again
    h2.advance(1)
    assert len(ticks_put(h2, "jobs")) == 1
