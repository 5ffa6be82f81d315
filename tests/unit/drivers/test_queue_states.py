"""Every row of the task state table (QUEUE.md §5) and the tube methods of §3, on every driver."""

from __future__ import annotations

import pytest

from tests.unit.drivers.queue_harness import (
    SEC,
    TTL_DRIVERS,
    Q,
    error_of,
    make_tube,
    variants,
)

h = variants()


def put(h: Q, data: str, **opts: object) -> list:
    # A utube of its own per task, so utube drivers behave like plain queues here.
    return h.put("t", data, utube=data, **opts)  # type: ignore[no-any-return]


def test_put_answers_a_ready_task(h: Q) -> None:
    assert put(h, "a") == [0, "r", "a"]
    assert h.one("t", "peek", 0) == [0, "r", "a"]


def test_put_with_delay_is_delayed_on_ttl_drivers_and_ready_elsewhere(h: Q) -> None:
    expected = "~" if h.type in TTL_DRIVERS else "r"  # type: ignore[attr-defined]
    assert put(h, "a", delay=1) == [0, expected, "a"]


def test_ready_take_gives_taken(h: Q) -> None:
    put(h, "a")
    assert h.take("t") == [0, "t", "a"]
    assert h.status("t", 0) == "t"


def test_ready_bury_gives_buried(h: Q) -> None:
    put(h, "a")
    assert h.one("t", "bury", 0) == [0, "!", "a"]


def test_ready_delete_removes(h: Q) -> None:
    put(h, "a")
    assert h.one("t", "delete", 0) == [0, "-", "a"]
    assert error_of(h.tcall, "t", "peek", 0) == (32, "Task 0 not found")


def test_taken_ack_removes(h: Q) -> None:
    put(h, "a")
    h.take("t")
    assert h.one("t", "ack", 0) == [0, "-", "a"]
    assert h.status("t", 0) is None
    assert error_of(h.tcall, "t", "ack", 0) == (32, "Task was not taken")


def test_taken_delete_removes_whoever_owns_it(h: Q) -> None:
    put(h, "a")
    h.take("t", conn=1)
    assert h.one("t", "delete", 0, conn=2) == [0, "-", "a"]
    assert error_of(h.tcall, "t", "ack", 0, conn=1) == (32, "Task was not taken")


def test_taken_release_gives_ready_and_keeps_the_id_at_the_head(h: Q) -> None:
    put(h, "a")
    put(h, "b")
    h.take("t")
    assert h.one("t", "release", 0) == [0, "r", "a"]
    assert h.take("t") == [0, "t", "a"]


def test_taken_release_with_delay(h: Q) -> None:
    put(h, "a")
    h.take("t")
    # Every driver delays it; the module's fifo and utube ignore the delay (QUEUE.md §10 #6).
    assert h.one("t", "release", 0, {"delay": 5}) == [0, "~", "a"]
    assert h.take("t") is None
    h.advance(5)
    assert h.take("t") == [0, "t", "a"]


def test_taken_bury_gives_buried_and_drops_the_owner(h: Q) -> None:
    put(h, "a")
    h.take("t", conn=1)
    assert h.one("t", "bury", 0, conn=2) == [0, "!", "a"]
    assert error_of(h.tcall, "t", "ack", 0, conn=1) == (32, "Task was not taken")


def test_taken_release_all_gives_ready_whoever_owns_it(h: Q) -> None:
    put(h, "a")
    put(h, "b")
    h.take("t", conn=1)
    h.take("t", conn=2)
    assert h.tcall("t", "release_all", conn=3) == []
    assert [h.status("t", i) for i in (0, 1)] == ["r", "r"]
    assert h.stats("t")["calls"]["release"] == 2
    assert error_of(h.tcall, "t", "ack", 0, conn=1) == (32, "Task was not taken")


def test_taken_owner_session_end_gives_ready(h: Q) -> None:
    put(h, "a")
    h.take("t", conn=7)
    h.q.disconnected(7)
    assert h.status("t", 0) == "r"


def test_buried_kick_gives_ready(h: Q) -> None:
    put(h, "a")
    h.one("t", "bury", 0)
    assert h.one("t", "kick", 1) == 1
    assert h.status("t", 0) == "r"
    assert h.take("t") == [0, "t", "a"]


def test_buried_delete_removes(h: Q) -> None:
    put(h, "a")
    h.one("t", "bury", 0)
    assert h.one("t", "delete", 0) == [0, "-", "a"]


def test_bury_of_a_buried_task_answers_it_unchanged_without_a_stat(h: Q) -> None:
    put(h, "a")
    h.one("t", "bury", 0)
    assert h.one("t", "bury", 0) == [0, "!", "a"]
    assert h.stats("t")["calls"]["bury"] == 1


@pytest.mark.parametrize("type_", TTL_DRIVERS)
def test_delayed_bury_then_kick_makes_it_ready_at_once(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_)
    h.put("t", "a", delay=10)
    assert h.one("t", "bury", 0) == [0, "!", "a"]
    assert h.one("t", "kick", 1) == 1
    assert h.take("t") == [0, "t", "a"]


@pytest.mark.parametrize("type_", TTL_DRIVERS)
def test_delayed_delete_removes(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_)
    h.put("t", "a", delay=10)
    assert h.one("t", "delete", 0) == [0, "-", "a"]
    h.advance(11)
    assert h.take("t") is None


@pytest.mark.parametrize("type_", TTL_DRIVERS)
def test_delayed_becomes_ready_when_the_delay_ends(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_)
    h.put("t", "a", delay=1)
    assert h.take("t") is None
    h.advance(0.999999)
    assert h.status("t", 0) == "~"
    h.advance(0.000001)
    assert h.status("t", 0) == "r"


def test_peek_has_no_side_effects(h: Q) -> None:
    put(h, "a")
    h.take("t")
    before = h.stats("t")
    assert h.one("t", "peek", 0) == [0, "t", "a"]
    assert h.stats("t") == before


def test_data_comes_back_as_given(h: Q) -> None:
    values = [None, 1, -2.5, "s", b"\x00\xff", [1, [2]], {"k": {"n": None}}, True]
    for i, value in enumerate(values):
        assert h.put("t", value, utube=str(i)) == [i, "r", value]
    for i, value in enumerate(values):
        assert h.take("t") == [i, "t", value]


def test_put_without_data_is_a_missing_field() -> None:
    h = Q()
    fields = {"fifo": 3, "fifottl": 8, "limfifottl": 8, "utube": 4, "utubettl": 9}
    for type_, field in fields.items():
        make_tube(h, type_, type_)
        assert error_of(h.tcall, type_, "put") == (
            39,
            f"Tuple field {field} required by space format is missing",
        )
        assert h.stats(type_)["calls"]["put"] == 0


def test_ack_release_touch_need_the_taking_session(h: Q) -> None:
    put(h, "a")
    put(h, "b")
    h.take("t", conn=1)
    for method, args in (("ack", (0,)), ("release", (0,)), ("touch", (0, 1))):
        assert error_of(h.tcall, "t", method, *args, conn=2) == (32, "Task was not taken")
    # ready, buried and missing tasks are "not taken" too
    assert error_of(h.tcall, "t", "ack", 1) == (32, "Task was not taken")
    h.one("t", "bury", 1)
    assert error_of(h.tcall, "t", "release", 1) == (32, "Task was not taken")
    assert error_of(h.tcall, "t", "ack", 99) == (32, "Task was not taken")


def test_unknown_ids_are_not_found(h: Q) -> None:
    for method in ("peek", "bury", "delete"):
        assert error_of(h.tcall, "t", method, 5) == (32, "Task 5 not found")


def test_ids_may_be_integral_floats(h: Q) -> None:
    put(h, "a")
    assert h.one("t", "peek", 0.0) == [0, "r", "a"]
    h.take("t")
    assert h.one("t", "ack", 0.0) == [0, "-", "a"]
    assert error_of(h.tcall, "t", "peek", 5.0) == (32, "Task 5 not found")


@pytest.mark.parametrize("bad", ["0", -1, 1.5, None, True, [0]])
def test_ids_of_another_type_are_a_key_type_error(h: Q, bad: object) -> None:
    put(h, "a")
    h.take("t")
    expected = (18, "Supplied key type of part 0 does not match index part type: expected unsigned")
    for method in ("peek", "bury", "delete", "ack", "release"):
        assert error_of(h.tcall, "t", method, bad) == expected


def test_take_order_is_fifo_for_plain_drivers(h: Q) -> None:
    for data in "abcde":
        put(h, data)
    assert [h.take("t")[2] for _ in range(5)] == list("abcde")
    assert h.take("t") is None


def test_kick_counts(h: Q) -> None:
    for data in "abc":
        put(h, data)
        h.one("t", "bury", ord(data) - ord("a"))
    assert h.one("t", "kick", 2) == 2
    assert h.one("t", "kick", 100500) == 1
    assert h.one("t", "kick", 1) == 0
    assert h.tcall("t", "kick") == [0]  # default count 1, nothing buried


@pytest.mark.parametrize("count", [0, -5, 0.5])
def test_kick_of_no_more_than_zero_answers_the_count(h: Q, count: float) -> None:
    put(h, "a")
    h.one("t", "bury", 0)
    assert h.one("t", "kick", count) == count
    assert h.status("t", 0) == "!"


def test_kick_goes_in_index_order(h: Q) -> None:
    for i in range(3):
        put(h, f"d{i}")
    for i in (2, 0, 1):
        h.one("t", "bury", i)
    h.one("t", "kick", 1)
    assert [h.status("t", i) for i in range(3)] == ["r", "!", "!"]


def test_kick_of_a_non_number_is_the_for_limit_error(h: Q) -> None:
    assert error_of(h.tcall, "t", "kick", "3") == (32, "'for' limit must be a number")


def test_truncate_removes_every_task(h: Q) -> None:
    for data in "abc":
        put(h, data)
    h.take("t")
    assert h.tcall("t", "truncate") == []
    assert h.take("t") is None
    assert h.stats("t")["tasks"]["total"] == 0
    assert put(h, "z") == [0, "r", "z"]


def test_drop_answers_true_and_forgets_the_tube(h: Q) -> None:
    put(h, "a")
    h.one("t", "bury", 0)
    put(h, "b", delay=5)
    assert h.tcall("t", "drop") == [True]
    assert h.call("queue.tube", "t") == [False]
    assert error_of(h.tcall, "t", "put", "x") == (
        33,
        "Procedure 'queue.tube.t:put' is not defined",
    )
    assert "t" not in h.catalog


def test_drop_refuses_taken_tasks_then_works_after_ack(h: Q) -> None:
    put(h, "a")
    h.take("t")
    assert error_of(h.tcall, "t", "drop") == (32, "There are taken tasks in the tube")
    h.tcall("t", "ack", 0)
    assert h.tcall("t", "drop") == [True]


def test_drop_refuses_waiting_consumers(h: Q) -> None:
    waiter = h.wait("t", conn=2, timeout=None)
    assert error_of(h.tcall, "t", "drop") == (32, "There are consumers connected the tube")
    h.q.waiters.remove(waiter)
    assert h.tcall("t", "drop") == [True]


def test_recreating_a_dropped_tube_starts_empty(h: Q) -> None:
    put(h, "a")
    h.tcall("t", "drop")
    type_ = h.type  # type: ignore[attr-defined]
    make_tube(h, "t", type_)
    assert h.take("t") is None
    assert h.stats("t")["calls"]["put"] == 0


def test_disconnect_releases_two_taken_tasks_and_drop_then_works(h: Q) -> None:
    put(h, "a")
    put(h, "b")
    h.take("t", conn=5)
    h.take("t", conn=5)
    h.q.disconnected(5)
    assert h.stats("t")["tasks"]["ready"] == 2
    assert h.tcall("t", "drop") == [True]


def test_touch_with_no_or_non_positive_delta_answers_nothing_without_a_look(h: Q) -> None:
    assert h.tcall("t", "touch", 99) == []
    assert h.tcall("t", "touch", 99, None) == []
    assert h.tcall("t", "touch", 99, 0) == []
    assert h.tcall("t", "touch", 99, -1) == []
    assert h.stats("t")["calls"]["touch"] == 0


def test_touch_of_a_string_delta_is_a_compare_error(h: Q) -> None:
    assert error_of(h.tcall, "t", "touch", 0, "1") == (
        32,
        "attempt to compare string with number",
    )


@pytest.mark.parametrize("type_", ["fifo", "utube"])
def test_touch_is_refused_by_plain_drivers(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_)
    h.put("t", "a")
    h.take("t")
    assert error_of(h.tcall, "t", "touch", 0, 1) == (
        32,
        f"{type_} queue does not support touch",
    )
    assert h.stats("t")["calls"]["touch"] == 1


@pytest.mark.parametrize("type_", TTL_DRIVERS)
def test_touch_overflow(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_)
    h.put("t", "a")
    h.take("t")
    assert error_of(h.tcall, "t", "touch", 0, 3153600001) == (
        95,
        "Integer overflow when performing '+' operation on field 3",
    )
    assert h.stats("t")["calls"]["touch"] == 1
    assert h.one("t", "touch", 0, 1) == [0, "t", "a"]
    assert h.stats("t")["calls"]["touch"] == 3


def test_take_timeout_of_a_string_is_a_compare_error(h: Q) -> None:
    assert error_of(h.tcall, "t", "take", "1") == (32, "attempt to compare string with number")


@pytest.mark.parametrize("timeout", [0, -1, 0.0000001])
def test_take_with_no_positive_timeout_is_one_attempt(h: Q, timeout: float) -> None:
    assert h.tcall("t", "take", timeout) == []
    put(h, "a")
    assert h.tcall("t", "take", timeout) == [[0, "t", "a"]]


@pytest.mark.parametrize("type_", TTL_DRIVERS)
def test_ttl_put_options(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_)
    assert error_of(h.tcall, "t", "put", "x", {"ttl": "5"}) == (
        32,
        "attempt to compare string with number",
    )
    assert error_of(h.tcall, "t", "put", "x", {"ttr": "5"}) == (
        32,
        "attempt to compare string with number",
    )
    assert error_of(h.tcall, "t", "put", "x", {"delay": "5"}) == (
        32,
        "attempt to compare number with string",
    )
    for pri in (-1, 1.5, "1"):
        assert error_of(h.tcall, "t", "put", "x", {"pri": pri}) == (
            23,
            "Tuple field 6 type does not match one required by operation: expected unsigned",
        )
    assert h.stats("t")["calls"]["put"] == 0
    assert h.put("t", "x", pri=2.0, ttl=1.5, ttr=0.5) == [0, "r", "x"]


def test_priority_order() -> None:
    for type_ in TTL_DRIVERS:
        h = Q()
        make_tube(h, "t", type_)
        for i, pri in enumerate((5, 1, 0, 1, 9)):
            h.put("t", i, pri=pri, utube=str(i))
        assert [h.take("t")[0] for _ in range(5)] == [2, 1, 3, 0, 4]


def test_tube_default_priority() -> None:
    h = Q()
    make_tube(h, "t", "fifottl", pri=5)
    h.put("t", "late")
    h.put("t", "early", pri=1)
    assert h.take("t")[2] == "early"


def test_expired_time_units_are_whole_microseconds() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    h.put("t", "a", ttl=0.0000015)  # 1.5 µs → 1 µs
    h.clock.now += 1
    assert h.take("t") is None
    assert h.stats("t")["calls"]["ttl"] == 1


def test_tube_methods_touch_only_their_tube() -> None:
    h = Q()
    make_tube(h, "a", "fifo")
    make_tube(h, "b", "fifo")
    h.put("a", "x")
    assert h.take("b") is None
    assert error_of(h.tcall, "b", "peek", 0) == (32, "Task 0 not found")
    assert h.take("a") == [0, "t", "x"]


def test_ttl_zero_answers_ready_then_expires_at_once() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    assert h.put("t", "a", ttl=0) == [0, "r", "a"]
    # Expired by the end of the put itself: nothing due is left for later.
    assert h.q.next_deadline() is None
    assert h.stats("t")["calls"]["ttl"] == 1
    assert h.take("t") is None


def test_delay_adds_to_ttl_and_release_delay_does_too() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    h.put("t", "a", ttl=10, ttr=20)
    h.take("t")
    h.tcall("t", "release", 0, {"delay": 5})
    task = h.catalog.space("t").get((0,))
    assert task[3] == 15 * SEC  # ttl
    assert task[4] == 20 * SEC  # ttr
