"""Rate limits (QUEUE.md §14): at most max takes in any interval, across connections;
a take over the limit waits and is woken as the window frees; the window survives a
restart; tubes without the option answer as before."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.drivers.queue import Blocked
from queuebox.drivers.ratelimit import TAKES_SPACE
from tests.unit.drivers.queue_harness import SEC, VARIANT_IDS, VARIANTS, Q, error_of, make_tube

LIMIT = {"max": 2, "interval": 1}


@pytest.fixture(params=VARIANTS, ids=VARIANT_IDS)
def h(request: pytest.FixtureRequest) -> Q:
    harness = Q()
    type_, mode = request.param
    make_tube(harness, "t", type_, mode, rate_limit=LIMIT)
    for n in range(6):  # distinct utubes: a utube gives one task at a time
        harness.put("t", n, utube=f"u{n}")
    return harness


def test_takes_over_the_limit_answer_nil_until_the_window_frees(h: Q) -> None:
    assert h.take("t", conn=1)[2] == 0
    h.advance(0.5)
    assert h.take("t", conn=2)[2] == 1  # another connection counts against the same window
    assert h.take("t", conn=3) is None
    h.advance(0.499)
    assert h.take("t") is None
    h.advance(0.001)  # the first take left the window
    assert h.take("t")[2] == 2
    assert h.take("t") is None
    h.advance(0.5)
    assert h.take("t")[2] == 3
    stats = h.stats("t")
    assert stats["rate_limit"] == {"max": 2, "interval": 1.0, "delayed": 3}
    assert stats["calls"]["take"] == 4


def test_a_waiting_take_is_woken_when_the_window_frees(h: Q) -> None:
    h.take("t")
    h.take("t")
    blocked = h.take("t", timeout=5, conn=2)
    assert isinstance(blocked, Blocked)
    h.wait("t", 2, 5)
    h.wait("t", 3, 5)
    h.wait("t", 4, 5)
    assert h.q.next_deadline() == h.clock.now + SEC
    h.advance(0.999)
    assert h.woken == []
    h.advance(0.001)
    assert h.woken == ["take:2", "take:3"]  # the window has room for two
    assert h.take("t", conn=2)[2] == 2
    assert h.take("t", conn=3)[2] == 3
    # The window is full again and conn 4 still waits: woken when it frees.
    assert h.q.next_deadline() == h.clock.now + SEC
    h.advance(1)
    assert h.woken[-1] == "take:4"


def test_the_window_survives_a_restart(h: Q) -> None:
    h.take("t")
    h.take("t")
    h2 = h.restart(via_msgpack=True)
    assert h2.take("t") is None
    h2.advance(1)
    assert h2.take("t") is not None
    assert len(list(h2.catalog.get(TAKES_SPACE))) == 2  # only the last max takes are kept


def test_tube_options_set_change_and_remove_the_limit() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    for n in range(5):
        h.put("t", n)
    answer = h.q.tube_options("t", {"rate_limit": {"max": 1, "interval": 10}})
    assert answer == {"rate_limit": {"max": 1, "interval": 10.0}}
    assert h.take("t") is not None
    assert h.take("t") is None
    h.wait("t", 2, None)
    assert h.q.tube_options("t", {"rate_limit": {"max": 3, "interval": 10}})
    assert h.woken == ["take:2"]  # a larger limit lets a waiting take look again
    assert h.take("t") is not None
    assert h.take("t") is not None
    assert h.take("t") is None
    assert h.q.tube_options("t", {"rate_limit": False}) == {}
    assert h.take("t") is not None
    assert "rate_limit" not in h.stats("t")
    assert list(h.catalog.get(TAKES_SPACE)) == []
    h.restart(via_msgpack=True)  # the options live in the tube's _queue row


def test_a_tube_without_the_option_keeps_the_modules_answers() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    h.put("t", 1)
    h.take("t")
    assert set(h.stats("t")) == {"tasks", "calls"}
    assert h.catalog.get(TAKES_SPACE) is None


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"max": 0, "interval": 1}, "Invalid value of rate_limit.max: 0"),
        ({"max": 1.5, "interval": 1}, "Invalid value of rate_limit.max: 1.5"),
        ({"max": 1, "interval": 0}, "Invalid value of rate_limit.interval: 0"),
        ({"max": 1}, "Invalid value of rate_limit.interval: nil"),
        ({"max": 1, "interval": 1, "per": 2}, "Unknown option rate_limit.per"),
        (5, "Invalid value of rate_limit: 5"),
    ],
)
def test_bad_limits_are_refused(value: Any, text: str) -> None:
    h = Q()
    assert error_of(h.create, "t", "fifo", rate_limit=value)[1] == text
    assert h.call("queue.tube", "t") == [False]
    make_tube(h, "t", "fifo")
    assert error_of(h.q.tube_options, "t", {"rate_limit": value})[1] == text


@pytest.mark.parametrize(("type_", "mode"), [("utube", None), ("utubettl", "ready_buffer")])
def test_per_utube_holds_a_busy_utube_and_the_others_go_on(type_: str, mode: str | None) -> None:
    h = Q()
    make_tube(h, "t", type_, mode, rate_limit={"max": 1, "interval": 1, "per_utube": True})
    for data, utube in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        h.put("t", data, utube=utube)
    assert h.take("t")[2] == "a1"
    h.one("t", "ack", 0)
    assert h.take("t")[2] == "b1"  # a2 is ready, but a is held for a second
    h.one("t", "ack", 2)
    assert h.take("t") is None
    h.wait("t", 2, 5)
    assert h.stats("t")["rate_limit"] == {
        "max": 1, "interval": 1.0, "per_utube": True, "delayed": 2
    }  # fmt: skip
    h2 = h.restart(via_msgpack=True)  # the held utube stays held
    assert h2.take("t") is None
    h2.wait("t", 2, 5)
    h2.advance(1)
    assert h2.woken == ["take:2"]
    assert h2.take("t")[2] == "a2"


def test_per_utube_is_refused_where_there_are_no_utubes() -> None:
    h = Q()
    limit = {"max": 1, "interval": 1, "per_utube": True}
    text = error_of(h.create, "t", "fifottl", rate_limit=limit)[1]
    assert text.startswith("Invalid value of rate_limit.per_utube: true")


def test_per_utube_forgets_utubes_idle_for_an_interval() -> None:
    h = Q()
    make_tube(h, "t", "utube", rate_limit={"max": 2, "interval": 1, "per_utube": True})
    for n, utube in enumerate(("a", "b", "c", "a")):
        h.put("t", n, utube=utube)
    for task_id in range(3):
        assert h.take("t")[0] == task_id
        h.one("t", "ack", task_id)
    assert len(list(h.catalog.get(TAKES_SPACE))) == 3
    h.advance(1)
    assert h.take("t")[0] == 3
    assert [row[3] for row in h.catalog.get(TAKES_SPACE)] == ["a", "a"]  # b and c went
    # Off again: every row goes, and the tube answers as the module's.
    assert h.q.tube_options("t", {"rate_limit": False}) == {}
    assert list(h.catalog.get(TAKES_SPACE)) == []
