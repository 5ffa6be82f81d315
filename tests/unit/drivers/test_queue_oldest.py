"""When the ready task put first was put (/metrics: its age), on every driver."""

from __future__ import annotations

import pytest

from tests.unit.drivers.queue_harness import SEC, T0, Q, make_tube


def oldest(h: Q, tube: str = "t") -> int | None:
    return h.q.registry.tubes[tube].driver.oldest_ready_put()  # type: ignore[no-any-return]


@pytest.mark.parametrize("type_", ["fifo", "fifottl", "utube", "utubettl"])
def test_the_task_put_first_counts_whatever_its_priority(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_)
    assert oldest(h) is None
    for n in range(5):
        h.put("t", n, pri=9 - n, utube=str(n))  # the oldest has the worst priority
        h.advance(2)
    assert oldest(h) == T0
    h.one("t", "bury", 0)
    assert oldest(h) == T0 + 2 * SEC
    h.tcall("t", "truncate")
    assert oldest(h) is None


@pytest.mark.parametrize("type_", ["fifo", "utube"])
def test_without_a_time_of_their_own_puts_are_marked_once_a_second(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_)
    h.put("t", "a", utube="a")  # marked at T0
    h.advance(0.5)
    h.put("t", "b", utube="b")  # within the second: shares T0's mark
    h.advance(1)
    h.put("t", "c", utube="c")  # marked at T0 + 1.5
    h.take("t")
    assert oldest(h) == T0  # b: no earlier than T0, never later than its put
    h.take("t")
    assert oldest(h) == T0 + 1.5 * SEC
    h.one("t", "delete", 2)
    h.advance(0.1)
    h.put("t", "d", utube="d")  # id 2 again: the mark of the gone task 2 goes
    assert oldest(h) == T0 + 1.6 * SEC


def test_after_a_restart_a_fifo_task_counts_from_the_restart() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    h.put("t", "a")
    h.advance(30)
    h2 = h.restart(via_msgpack=True)
    assert oldest(h2) == T0 + 30 * SEC
