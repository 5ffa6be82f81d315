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
