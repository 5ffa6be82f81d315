"""Waiting takes and puts (QUEUE.md §6 "Waiting"): Blocked, order, wakeups, closed waiters."""

from __future__ import annotations

import math
from typing import Any

import pytest

from queuebox.drivers.queue import Blocked
from queuebox.drivers.waiters import Waiters, wait_key
from tests.unit.drivers.queue_harness import SEC, T0, VARIANT_IDS, VARIANTS, Q, error_of, make_tube

MS = SEC // 1000


class Server:
    """The server's half of waiting, as the lead's code does it, synchronously."""

    def __init__(self, h: Q) -> None:
        self.h = h
        self.pending: dict[int, tuple[Blocked, int, Any]] = {}  # conn -> (blocked, deadline, w)
        self.answers: dict[int, Any] = {}
        self.woken: list[int] = []

    def call(self, conn: int, name: str, *args: Any) -> Any:
        answer = self.h.q.call(conn, name, list(args))
        if isinstance(answer, Blocked):
            self._wait(conn, answer)
        else:
            self.answers[conn] = answer
        return answer

    def _wait(self, conn: int, blocked: Blocked) -> None:
        now = self.h.clock.now
        deadline = math.inf if blocked.timeout_s is None else now + blocked.timeout_s * SEC
        waiter = self.h.q.waiters.add(
            blocked.tube,
            blocked.kind,
            conn,
            blocked.timeout_s,
            now,
            lambda: self.woken.append(conn),
        )
        self.pending[conn] = (blocked, deadline, waiter)

    def run(self) -> None:
        """Retry every woken waiter (the event loop's next turn)."""
        while self.woken:
            conn = self.woken.pop(0)
            self._retry(conn)

    def expire(self) -> None:
        """Time passed: waiters whose time is up make their last attempt."""
        for conn, (_, deadline, waiter) in list(self.pending.items()):
            if deadline <= self.h.clock.now:
                self.h.q.waiters.remove(waiter)
                self._retry(conn)

    def _retry(self, conn: int) -> None:
        blocked, deadline, _ = self.pending.pop(conn)
        remaining = None if deadline == math.inf else (deadline - self.h.clock.now) / SEC
        answer = self.h.q.call(conn, *blocked.retry(remaining))
        if isinstance(answer, Blocked):
            self._wait(conn, answer)  # a new key, with the remaining time
        else:
            self.answers[conn] = answer


@pytest.fixture(params=VARIANTS, ids=VARIANT_IDS)
def h(request: pytest.FixtureRequest) -> Q:
    harness = Q()
    make_tube(harness, "t", *request.param)
    return harness


TAKE = "queue.tube.t:take"
PUT = "queue.tube.t:put"


def test_blocked_describes_the_wait_and_how_to_retry(h: Q) -> None:
    answer = h.q.call(1, TAKE, [2.5])
    assert isinstance(answer, Blocked)
    assert (answer.tube, answer.kind, answer.timeout_s) == ("t", "take", 2.5)
    assert answer.retry(1.25) == (TAKE, [1.25])
    assert answer.retry(0) == (TAKE, [0])
    assert h.q.call(1, *answer.retry(0)) == []


@pytest.mark.parametrize("args", [[], [None], [4e9]])
def test_take_without_a_timeout_waits_forever(h: Q, args: list[Any]) -> None:
    answer = h.q.call(1, TAKE, args)
    assert isinstance(answer, Blocked)
    assert answer.timeout_s is None


def test_five_waiters_are_served_by_timeout_then_start_then_connection(h: Q) -> None:
    server = Server(h)
    # A(10 s), B(5 s), C(forever), D(5 s, after B), E(forever), connected in that order.
    for conn, timeout in ((1, 10), (2, 5), (3, None), (4, 5), (5, None)):
        server.call(conn, TAKE, timeout)
        h.clock.now += MS
    served = []
    for i in range(5):
        h.put("t", i, utube=str(i))
        assert len(server.woken) == 1
        served.append(server.woken[0])
        server.run()
    assert served == [2, 4, 1, 3, 5]  # B, D, A, C, E
    assert {conn: answer[0][2] for conn, answer in server.answers.items()} == {
        2: 0,
        4: 1,
        1: 2,
        3: 3,
        5: 4,
    }


def test_forever_waiters_go_in_connection_order_not_wait_order(h: Q) -> None:
    server = Server(h)
    server.call(2, TAKE)  # Y: connected second, waits first
    h.clock.now += SEC
    server.call(1, TAKE)  # X: connected first, waits second
    h.put("t", "x")
    assert server.woken == [1]


def test_wait_key() -> None:
    assert wait_key(None, T0, 3, 0) == (math.inf, 3, 0)
    assert wait_key(3153.7, T0, 3, 0) == (math.inf, 3, 0)
    assert wait_key(5, T0, 3, 0) == (5 * SEC * SEC + T0, 3, 0)
    assert wait_key(5, T0 + SEC, 1, 0) > wait_key(5, T0, 2, 0)
    assert wait_key(0.5, T0 + 10**6 * SEC, 1, 0) < wait_key(5, T0, 1, 0)


def test_each_put_wakes_at_most_one_waiter(h: Q) -> None:
    server = Server(h)
    server.call(1, TAKE, 5)
    server.call(2, TAKE, 5)
    h.put("t", "a")
    assert server.woken == [1]


def test_a_woken_waiter_that_loses_the_race_waits_again_with_its_remaining_time(h: Q) -> None:
    server = Server(h)
    server.call(1, TAKE, 5)
    h.clock.now += 2 * SEC
    h.put("t", "a")
    assert server.woken == [1]
    assert h.take("t", conn=9) is not None  # someone else is faster
    server.run()
    assert 1 not in server.answers
    blocked, deadline, waiter = server.pending[1]
    assert blocked.timeout_s == pytest.approx(3)
    assert waiter.key[0] == 3 * SEC * SEC + T0 + 2 * SEC
    h.clock.now += 3 * SEC
    server.expire()
    assert server.answers[1] == []


def test_the_last_attempt_at_timeout_can_still_get_a_task(h: Q) -> None:
    server = Server(h)
    server.call(1, TAKE, 1)
    h.clock.now += SEC
    h.put("t", "a")  # its wake is lost in the same instant as the timeout
    server.woken.clear()
    server.expire()
    assert server.answers[1] == [[0, "t", "a"]]


def test_a_closed_connections_waiter_takes_nothing(h: Q) -> None:
    server = Server(h)
    server.call(7, TAKE)
    server.call(8, TAKE)
    h.q.disconnected(7)
    h.put("t", "a")
    assert server.woken == [8]


def test_a_take_pending_on_a_closed_connection_does_not_get_its_released_task(h: Q) -> None:
    server = Server(h)
    h.put("t", "a")
    h.take("t", conn=7)
    server.call(7, TAKE)
    server.call(8, TAKE)
    h.q.disconnected(7)
    assert server.woken == [8]
    server.run()
    assert server.answers[8] == [[0, "t", "a"]]


def test_release_serves_a_waiter(h: Q) -> None:
    server = Server(h)
    h.put("t", "a")
    h.take("t", conn=1)
    server.call(2, TAKE, 1)
    h.tcall("t", "release", 0, conn=1)
    server.run()
    assert server.answers[2] == [[0, "t", "a"]]


def test_kick_of_three_wakes_three_waiters(h: Q) -> None:
    server = Server(h)
    for i in range(4):
        h.put("t", i, utube=str(i))
        h.take("t")
        h.tcall("t", "bury", i)
    for conn in (11, 12, 13, 14):
        server.call(conn, TAKE, 5)
    assert h.one("t", "kick", 3) == 3
    assert server.woken == [11, 12, 13]
    server.run()
    assert sorted(server.answers[c][0][0] for c in (11, 12, 13)) == [0, 1, 2]
    assert h.status("t", 3) == "!"


def test_session_end_wakes_a_waiter(h: Q) -> None:
    server = Server(h)
    h.put("t", "a")
    h.take("t", conn=5)
    server.call(6, TAKE)
    h.q.disconnected(5)
    assert server.woken == [6]


def test_five_waiting_takes_and_five_spread_puts_all_get_a_task(h: Q) -> None:
    server = Server(h)
    for conn in range(1, 6):
        server.call(conn, TAKE, 1)
    for i in range(5):
        h.clock.now += SEC // 10
        h.put("t", i, utube=str(i))
        server.run()
    assert sorted(answer[0][2] for answer in server.answers.values()) == [0, 1, 2, 3, 4]


def test_wakes_run_after_the_call_so_the_server_may_call_back_at_once(h: Q) -> None:
    got: list[Any] = []
    h.q.waiters.add("t", "take", 2, None, h.clock.now, lambda: got.append(h.take("t", conn=2)))
    assert h.put("t", "a") == [0, "r", "a"]
    assert got == [[0, "t", "a"]]


def test_waiters_remove_is_idempotent() -> None:
    waiters = Waiters()
    woken: list[int] = []
    w = waiters.add("t", "take", 1, None, T0, lambda: woken.append(1))
    waiters.remove(w)
    waiters.remove(w)
    assert not waiters.wake_one("t", "take")
    assert not waiters.has("t", "take")
    assert woken == []


# -- limfifottl: waiting puts --


@pytest.fixture
def lim() -> Q:
    harness = Q()
    make_tube(harness, "t", "limfifottl", capacity=3)
    return harness


def test_capacity_counts_every_task_and_a_full_put_answers_nil(lim: Q) -> None:
    lim.put("t", "a")
    lim.put("t", "b", delay=10)
    lim.put("t", "c")
    lim.take("t")
    lim.tcall("t", "bury", 2)
    assert lim.tcall("t", "put", "d") == [None]
    assert lim.tcall("t", "put", "d", {"timeout": 0}) == [None]
    assert lim.stats("t")["calls"]["put"] == 3


def test_a_full_put_with_a_timeout_waits_and_ends_with_nil(lim: Q) -> None:
    server = Server(lim)
    for i in range(3):
        lim.put("t", i)
    answer = server.call(1, PUT, "d", {"timeout": 0.1})
    assert isinstance(answer, Blocked)
    assert (answer.kind, answer.timeout_s) == ("put", 0.1)
    assert answer.retry(0.05) == (PUT, ["d", {"timeout": 0.05}])
    lim.clock.now += SEC // 10
    server.expire()
    assert server.answers[1] == [None]


def test_a_waiting_put_succeeds_after_an_ack(lim: Q) -> None:
    server = Server(lim)
    for i in range(3):
        lim.put("t", i)
    lim.take("t")
    server.call(1, PUT, "d", {"timeout": 5})
    server.call(2, PUT, "e", {"timeout": 5})
    lim.tcall("t", "ack", 0)
    assert server.woken == [1]
    server.run()
    assert server.answers[1] == [[3, "r", "d"]]
    assert 2 in server.pending


def test_ttl_expiry_and_delete_make_room_too(lim: Q) -> None:
    server = Server(lim)
    lim.put("t", 0, ttl=1)
    lim.put("t", 1)
    lim.put("t", 2)
    server.call(1, PUT, "d", {"timeout": 5})
    server.call(2, PUT, "e", {"timeout": 5})
    lim.advance(1)
    lim.tcall("t", "delete", 1)
    assert server.woken == [1, 2]


def test_truncate_and_drop_wake_waiting_puts(lim: Q) -> None:
    server = Server(lim)
    for i in range(3):
        lim.put("t", i)
    server.call(1, PUT, "d", {"timeout": 5})
    lim.tcall("t", "truncate")
    assert server.woken == [1]
    server.run()
    lim.put("t", "x")
    lim.put("t", "y")
    server.call(2, PUT, "e", {"timeout": 5})
    lim.tcall("t", "drop")
    assert server.woken == [2]
    assert error_of(server.run) == (33, "Procedure 'queue.tube.t:put' is not defined")


def test_waiting_puts_do_not_block_drop(lim: Q) -> None:
    server = Server(lim)
    for i in range(3):
        lim.put("t", i)
    server.call(1, PUT, "d", {"timeout": 5})
    assert lim.tcall("t", "drop") == [True]


def test_capacity_zero_is_unlimited() -> None:
    h = Q()
    make_tube(h, "t", "limfifottl", capacity=0)
    for i in range(10):
        assert h.put("t", i)[1] == "r"


def test_a_full_put_timeout_of_a_string_is_a_compare_error(lim: Q) -> None:
    for i in range(3):
        lim.put("t", i)
    assert error_of(lim.tcall, "t", "put", "d", {"timeout": "1"}) == (
        32,
        "attempt to compare string with number",
    )
