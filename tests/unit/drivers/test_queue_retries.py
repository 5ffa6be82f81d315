"""Retries (QUEUE.md §14): attempts counted at take, backoff, burial with a reason, the
journal that carries them through a restart, and tubes without the options untouched."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.drivers.retries import JOURNAL_SPACE
from tests.unit.drivers.queue_harness import (
    SEC,
    TTL_DRIVERS,
    Q,
    error_of,
    make_tube,
    variants,
)

h = variants(max_attempts=3, backoff=1)


def info(h: Q, task_id: int, tube: str = "t") -> dict[str, Any]:
    tasks = h.q.list_tasks(tube, {"id": task_id})["tasks"]
    assert len(tasks) == 1
    return tasks[0]  # type: ignore[no-any-return]


def journal(h: Q) -> list[tuple[Any, ...]]:
    space = h.catalog.get(JOURNAL_SPACE)
    return [] if space is None else list(space)


def fail_once(h: Q, task_id: int = 0) -> list[Any]:
    assert h.take("t")[0] == task_id
    return h.one("t", "release", task_id)  # type: ignore[no-any-return]


def test_each_failure_waits_twice_as_long_and_the_last_one_buries(h: Q) -> None:
    h.put("t", "a")
    assert fail_once(h) == [0, "~", "a"]
    assert info(h, 0)["attempts"] == 1
    h.advance(0.999)
    assert h.take("t") is None
    h.advance(0.001)
    assert fail_once(h) == [0, "~", "a"]  # second attempt: waits 2 s
    h.advance(1.999)
    assert h.take("t") is None
    h.advance(0.001)
    assert fail_once(h) == [0, "!", "a"]  # third and last
    task = info(h, 0)
    assert (task["state"], task["attempts"]) == ("buried", 3)
    assert task["reason"] == "3 attempts, the last one was released"
    assert h.stats("t")["calls"]["release"] == 3
    assert h.stats("t")["calls"]["bury"] == 1


def test_an_ack_ends_the_count_and_leaves_no_row(h: Q) -> None:
    h.put("t", "a")
    fail_once(h)
    h.advance(1)
    h.take("t")
    assert journal(h) != []
    assert h.one("t", "ack", 0)[1] == "-"
    assert journal(h) == []


def test_a_lost_session_counts_as_an_attempt(h: Q) -> None:
    h.put("t", "a")
    for _ in range(3):
        assert h.take("t", conn=7)[0] == 0
        h.q.disconnected(7)
        h.advance(60)
    assert info(h, 0)["reason"] == "3 attempts, the last one lost its consumer (session ended)"


def test_explicit_delay_replaces_the_backoff_but_not_the_limit(h: Q) -> None:
    h.put("t", "a")
    h.take("t")
    assert h.one("t", "release", 0, {"delay": 10})[1] == "~"
    h.advance(9)
    assert h.take("t") is None
    h.advance(1)
    h.take("t")
    assert h.one("t", "release", 0, {"delay": 0})[1] == "r"  # asked: no backoff
    for _ in range(1):
        h.take("t")
        h.one("t", "release", 0, {"delay": 0.5})
        h.advance(0.5)
    assert h.status("t", 0) == "!"


def test_kick_gives_a_fresh_start(h: Q) -> None:
    h.put("t", "a")
    for _ in range(3):
        fail_once(h)
        h.advance(60)
    assert h.one("t", "kick", 1) == 1
    task = info(h, 0)
    assert (task["state"], task["attempts"], "reason" in task) == ("ready", 0, False)
    assert journal(h) == []


def test_counts_and_delays_survive_a_restart(h: Q) -> None:
    h.put("t", "a", utube="a")  # a utube each: the utube drivers behave as plain queues
    h.put("t", "b", utube="b")
    fail_once(h, 0)  # delayed until +1 s, 1 attempt
    h.take("t")  # b taken when the server stops: that attempt counts
    h2 = h.restart(via_msgpack=True)
    assert info(h2, 0)["attempts"] == 1
    assert (info(h2, 1)["state"], info(h2, 1)["attempts"]) == ("delayed", 1)
    assert h2.take("t") is None
    h2.advance(1)
    assert h2.take("t")[0] == 0
    h2.advance(1)
    assert h2.take("t")[0] == 1
    assert info(h2, 1)["attempts"] == 2


def test_a_restart_with_the_last_attempt_taken_buries_it(h: Q) -> None:
    h.put("t", "a")
    for _ in range(2):
        fail_once(h)
        h.advance(60)
    h.take("t")
    h2 = h.restart(via_msgpack=True)
    assert info(h2, 0)["reason"] == "3 attempts, the last one was cut short by a server restart"


def test_truncate_and_drop_leave_no_rows(h: Q) -> None:
    h.put("t", "a")
    fail_once(h)
    h.tcall("t", "truncate")
    assert journal(h) == []
    h.put("t", "b")
    fail_once(h)
    h.tcall("t", "drop")
    assert journal(h) == []


@pytest.mark.parametrize("type_", TTL_DRIVERS)
def test_ttr_expiry_counts_and_the_backoff_keeps_the_ttl(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_, max_attempts=2, backoff=5)
    h.put("t", "a", ttr=1, ttl=100)
    h.take("t")
    h.advance(1)
    task = info(h, 0)
    assert (task["state"], task["ready_at"]) == ("delayed", (h.clock.now + 5 * SEC) / SEC)
    assert task["ttl"] == 100  # a backoff does not grow the ttl; release{delay} would
    h.advance(5)
    h.take("t")
    h.advance(1)
    assert info(h, 0)["reason"] == "2 attempts, the last one ran out of its ttr"
    h.advance(100)
    assert h.status("t", 0) is None  # deleted at its ttl, buried or not


@pytest.mark.parametrize("type_", ["fifo", "fifottl", "utube", "utubettl"])
def test_a_tube_without_the_options_writes_no_row(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_)
    h.put("t", "a", ttr=1)
    h.take("t")
    h.one("t", "release", 0)
    for _ in range(3):
        h.take("t", conn=2)
        h.q.disconnected(2)
    h.take("t")
    h.one("t", "bury", 0)
    h.one("t", "kick", 1)
    assert h.catalog.get(JOURNAL_SPACE) is None
    assert "attempts" not in info(h, 0)
    assert h.q.list_tasks("t", {})["retries"] == {}


def test_bury_keeps_a_reason_of_the_callers() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    h.put("t", "a")
    assert h.one("t", "bury", 0, {"reason": "bad input " * 200})[1] == "!"
    assert info(h, 0)["reason"] == ("bad input " * 200)[:1000]
    assert error_of(h.tcall, "t", "bury", 0, {"reason": 5}) == (32, "Invalid value of reason: 5")
    h.one("t", "delete", 0)
    assert h.catalog.get(JOURNAL_SPACE) is not None and journal(h) == []


def test_tube_options_change_an_existing_tube() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    h.put("t", "a")
    answer = h.q.tube_options("t", {"max_attempts": 2})
    assert answer == {"max_attempts": 2, "backoff": 1.0, "backoff_max": 60.0}
    fail_once(h)
    h.advance(1)
    fail_once(h)
    assert h.status("t", 0) == "!"
    h.one("t", "kick", 1)
    fail_once(h)
    assert h.q.tube_options("t", {"max_attempts": 0, "backoff": 0}) == {}
    assert "attempts" not in info(h, 0)
    # The options live in the tube's _queue row: a restart keeps them.
    h2 = h.restart(via_msgpack=True)
    assert h2.q.list_tasks("t", {})["retries"] == {}
    h2.q.tube_options("t", {"backoff": 3})
    h3 = h2.restart(via_msgpack=True)
    assert h3.q.list_tasks("t", {})["retries"]["backoff"] == 3


@pytest.mark.parametrize(
    ("opts", "text"),
    [
        ({"max_attempts": -1}, "Invalid value of max_attempts: -1"),
        ({"max_attempts": 1.5}, "Invalid value of max_attempts: 1.5"),
        ({"backoff": "x"}, "Invalid value of backoff: x"),
        ({"backoff": 5, "backoff_max": 1}, "Invalid value of backoff_max: 1 < backoff"),
        ({"ttl": 5}, "Unknown option ttl"),
    ],
)
def test_bad_retry_options_are_refused_before_any_change(opts: dict[str, Any], text: str) -> None:
    h = Q()
    if "ttl" not in opts:
        assert error_of(h.create, "t", "fifo", **opts) == (32, text)
        assert h.call("queue.tube", "t") == [False]
    make_tube(h, "t", "fifo")
    assert error_of(h.q.tube_options, "t", opts) == (32, text)
    assert h.q.list_tasks("t", {})["retries"] == {}
    assert error_of(h.q.tube_options, "nosuch", {}) == (32, "Tube 'nosuch' not found")


def test_backoff_doubles_up_to_its_cap() -> None:
    h = Q()
    make_tube(h, "t", "fifo", backoff=1, backoff_max=5)
    h.put("t", "a")
    waits = []
    for _ in range(5):
        fail_once(h)
        waits.append(info(h, 0)["ready_at"] - h.clock.now / SEC)
        h.advance(waits[-1])
    assert waits == [1, 2, 4, 5, 5]
    assert info(h, 0)["attempts"] == 5  # no max_attempts: never buried


def test_release_all_counts_each_task_as_it_comes_back(h: Q) -> None:
    """A task buried for its spent attempts does not make the next one a bury."""
    h.put("t", "a")
    h.put("t", "b", utube="another")  # a utube of its own: taken beside a
    for _ in range(2):  # a: two attempts spent, each waited out
        fail_once(h)
        h.advance(4)
    assert h.take("t")[0] == 0  # a: its third and last attempt
    assert h.take("t")[0] == 1  # b: its first
    heard: list[str] = []
    h.q.listen(lambda changes: heard.extend(c.event for c in changes))
    h.tcall("t", "release_all")
    assert heard == ["bury", "release"]
    assert h.status("t", 0) == "!" and h.status("t", 1) == "~"
    calls = h.stats("t")["calls"]
    assert (calls["release"], calls["bury"]) == (4, 1)
