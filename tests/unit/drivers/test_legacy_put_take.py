"""Legacy put, urgent, put_unique, take, peek and meta: shapes, defaults, order."""

from __future__ import annotations

import re

import pytest

from tests.unit.drivers.legacy_harness import SEC, T0, Legacy


@pytest.fixture
def lq() -> Legacy:
    return Legacy()


def test_put_returns_the_task_with_every_data_argument_as_a_field(lq: Legacy) -> None:
    task = lq.task("put", 0, "t", 0, 0, 0, 0, "a", 2, None, {"k": [1, 2]})
    assert re.fullmatch(r"[0-9a-f]{32}", task[0])
    assert task[1:] == ["t", "ready", "a", 2, None, {"k": [1, 2]}]
    assert lq.task("peek", 0, task[0]) == task


def test_put_without_data_is_a_task_with_no_data_fields(lq: Legacy) -> None:
    assert lq.put()[1:] == ["t", "ready"]


def test_put_with_delay_is_delayed(lq: Legacy) -> None:
    assert lq.put("x", delay=1)[2] == "delayed"
    assert lq.call("take", 0, "t", 0) == []


def test_task_ids_are_distinct(lq: Legacy) -> None:
    assert len({lq.put(i)[0] for i in range(50)}) == 50


def test_put_defaults_ttl_25_days_ttr_60_s_pri_offset_127(lq: Legacy) -> None:
    task = lq.put("x", ttl=-5, ttr=0)
    meta = lq.task("meta", 0, task[0])
    assert meta == [
        task[0], "t", "ready",
        T0 + 2_160_000 * SEC,  # next_event: created + ttl
        "127", "128",  # ipri default; stored pri = 255 - (0 + 127)
        0, T0, 2_160_000 * SEC, 60 * SEC, 0, 0, T0,  # ttl, ttr: time64 (µs)
    ]  # fmt: skip


def test_delay_is_added_to_ttl(lq: Legacy) -> None:
    task = lq.put("x", delay=5, ttl=10)
    meta = lq.task("meta", 0, task[0])
    assert meta[3] == T0 + 5 * SEC and meta[8] == 15 * SEC


@pytest.mark.parametrize(
    ("pri", "stored"),
    [(0, "128"), (128, "0"), (1000, "0"), (-127, "255"), ("-500", "255"), (10, "118")],
)
def test_pri_is_an_offset_clamped_to_0_255(lq: Legacy, pri: object, stored: str) -> None:
    task = lq.put("x", pri=pri)
    assert lq.task("meta", 0, task[0])[5] == stored


def test_higher_pri_is_served_first_and_equals_in_put_order(lq: Legacy) -> None:
    ids = [lq.put(n, pri=p)[0] for n, p in enumerate([0, 5, 0, -3, 5])]
    order = [lq.take_id() for _ in range(5)]
    assert order == [ids[1], ids[4], ids[0], ids[2], ids[3]]
    assert lq.take_id() is None


def test_tubes_of_one_space_and_spaces_are_separate(lq: Legacy) -> None:
    a = lq.put("a", tube="one")[0]
    b = lq.put("b", tube="two")[0]
    c = lq.put("c", space=7, tube="one")[0]
    assert lq.take_id("two") == b
    assert lq.take_id("one", space="7") == c
    assert lq.take_id("one") == a
    assert lq.error("peek", 7, a) == "Task not found"


def test_urgent_goes_before_every_older_ready_task(lq: Legacy) -> None:
    first = lq.put("first", pri=100)[0]
    lq.put("second")
    urgent = lq.task("urgent", 0, "t", 0, 0, 0, "-100", "now")
    assert urgent[1:] == ["t", "ready", "now"]
    assert lq.task("meta", 0, urgent[0])[4] == "126"  # head ipri 127 - 1
    assert lq.take_id() == urgent[0]
    assert lq.take_id() == first


def test_urgent_into_an_empty_tube_gets_the_default_ipri(lq: Legacy) -> None:
    urgent = lq.task("urgent", 0, "t", 0, 0, 0, 0, "x")
    assert lq.task("meta", 0, urgent[0])[4] == "127"


def test_urgent_keeps_jumping_ahead_even_at_ipri_0(lq: Legacy) -> None:
    lq.put("old")
    ids = [lq.task("urgent", 0, "t", 0, 0, 0, 0, n)[0] for n in range(130)]
    assert lq.task("meta", 0, ids[-1])[4] == "0"
    assert lq.take_id() == ids[-1]
    assert lq.take_id() == ids[-2]


def test_urgent_with_delay_is_a_plain_put(lq: Legacy) -> None:
    task = lq.task("urgent", 0, "t", 2, 0, 0, 0, "x")
    assert task[2] == "delayed"
    assert lq.task("meta", 0, task[0])[4] == "127"
    assert lq.stats(0, "t")["space0.t.urgent"] == "1"


def test_put_unique_returns_the_existing_task_with_that_first_field(lq: Legacy) -> None:
    first = lq.task("put_unique", 0, "t", 0, 0, 0, 0, "key", "v1")
    again = lq.task("put_unique", "0", "t", "0", "0", "0", "0", "key", "v2")
    assert again == first
    other = lq.task("put_unique", 0, "t", 0, 0, 0, 0, "other")
    assert other[0] != first[0]
    assert lq.stats(0, "t")["space0.t.put"] == "2"


def test_put_unique_matches_status_tube_and_type(lq: Legacy) -> None:
    ready = lq.task("put_unique", 0, "t", 0, 0, 0, 0, "key")
    delayed = lq.task("put_unique", 0, "t", 5, 0, 0, 0, "key")
    assert delayed[0] != ready[0] and delayed[2] == "delayed"
    assert lq.task("put_unique", 0, "t", 5, 0, 0, 0, "key")[0] == delayed[0]
    assert lq.task("put_unique", 0, "u", 0, 0, 0, 0, "key")[0] != ready[0]
    assert (
        lq.task("put_unique", 0, "t", 0, 0, 0, 0, 1)[0]
        == lq.task("put_unique", 0, "t", 0, 0, 0, 0, 1.0)[0]
    )
    assert (
        lq.task("put_unique", 0, "t", 0, 0, 0, 0, "1")[0]
        != lq.task("put_unique", 0, "t", 0, 0, 0, 0, 1)[0]
    )
    maps = [lq.task("put_unique", 0, "t", 0, 0, 0, 0, {"a": 1, "b": [2]}) for _ in range(2)]
    assert maps[0][0] == maps[1][0]


def test_put_unique_of_a_taken_task_puts_a_new_one(lq: Legacy) -> None:
    first = lq.task("put_unique", 0, "t", 0, 0, 0, 0, "key")
    lq.take_id()
    assert lq.task("put_unique", 0, "t", 0, 0, 0, 0, "key")[0] != first[0]


@pytest.mark.parametrize("data", [[], [None], [None, "x"]])
def test_put_unique_needs_data(lq: Legacy, data: list[object]) -> None:
    assert lq.error("put_unique", 0, "t", 0, 0, 0, 0, *data) == (
        "Can not put unique task without data"
    )


def test_take_marks_the_task_taken_by_the_connection(lq: Legacy) -> None:
    task = lq.put("x", ttr=30)
    taken = lq.task("take", 0, "t", 0, conn=9)
    assert taken == [task[0], "t", "taken", "x"]
    meta = lq.task("meta", 0, task[0])
    assert meta[2] == "taken" and meta[6] == 9 and meta[11] == 1
    assert meta[3] == T0 + 30 * SEC  # deadline now + ttr


def test_take_deadline_is_capped_by_ttl(lq: Legacy) -> None:
    task = lq.put("x", ttl=10, ttr=30)
    lq.advance(4)
    lq.take_id()
    assert lq.task("meta", 0, task[0])[3] == T0 + 10 * SEC


def test_take_from_an_empty_tube_with_zero_timeout_answers_nothing(lq: Legacy) -> None:
    assert lq.call("take", 0, "t", 0) == []
    assert lq.call("take", "3", "never-used", "0") == []
    assert lq.stats(0, "t")["space0.t.take_timeout"] == "1"


def test_take_with_a_negative_timeout_is_an_error(lq: Legacy) -> None:
    assert lq.error("take", 0, "t", -1) == "Timeout can't be less then 0"
    assert lq.error("take", 0, "t", "-0.5") == "Timeout can't be less then 0"


def test_take_does_not_create_a_space(lq: Legacy) -> None:
    lq.call("take", 5, "t", 0)
    lq.call("kick", 5, "t", 1)
    assert lq.call("truncate", 5, "t") == [0]
    assert "_legacy_5" not in lq.catalog


def test_ctaken_counts_every_take(lq: Legacy) -> None:
    task = lq.put("x")
    for _ in range(3):
        tid = lq.take_id()
        lq.task("release", 0, tid)
    assert lq.task("meta", 0, task[0])[11] == 3


def test_meta_has_13_fields_with_owner_and_now(lq: Legacy) -> None:
    task = lq.put("x", ttl="1.5", ttr=2, pri=3)
    lq.advance(0.25)
    lq.call("take", 0, "t", 0, conn=4)
    meta = lq.task("meta", 0, task[0])
    assert len(meta) == 13
    assert meta[:3] == [task[0], "t", "taken"]
    assert meta[3] == T0 + int(1.5 * SEC)  # min(now + ttr, created + ttl)
    assert (meta[4], meta[5], meta[6]) == ("127", "125", 4)
    assert (meta[7], meta[8], meta[9], meta[10], meta[11]) == (T0, 1_500_000, 2 * SEC, 0, 1)
    assert meta[12] == T0 + SEC // 4


def test_peek_and_meta_of_unknown_tasks(lq: Legacy) -> None:
    lq.put("x")
    for name in ("peek", "meta", "ack", "touch", "done", "bury", "dig", "unbury"):
        assert lq.error(name, 0, "f" * 32) == "Task not found"
        assert lq.error(name, 99, "f" * 32) == "Task not found"
        assert lq.error(name, 0, 12345) == "Task not found"
        assert lq.error(name, 0) == "Task not found"
    for name in ("release", "requeue", "delete"):
        assert lq.error(name, 0, "f" * 32) == "Task not found"
