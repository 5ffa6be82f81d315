"""Legacy arguments: numbers or numeric strings work everywhere; anything else is a clear error."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.drivers.legacy import LegacyQueue, is_legacy_statistics
from tests.unit.drivers.legacy_harness import SEC, T0, Legacy


@pytest.fixture
def lq() -> Legacy:
    return Legacy()


def test_every_argument_may_be_a_numeric_string(lq: Legacy) -> None:
    task = lq.task("put", "0", "t", "0", "10", "5", "0", "payload")
    assert task[1:] == ["t", "ready", "payload"]
    meta = lq.task("meta", "0", task[0])
    assert meta[8:10] == [10 * SEC, 5 * SEC]  # ttl, ttr: time64 (µs)
    taken = lq.task("take", "0", "t", "0.5")
    assert taken[0] == task[0]
    assert lq.call("kick", "0", "t", "3") == [0]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("7", 7), (" 7 ", 7), ("+7", 7), ("7.", 7), (".5", 0.5), ("2.5e1", 25), ("0x10", 16)],
)
def test_numeric_string_forms_lua_tonumber_reads(lq: Legacy, text: str, seconds: float) -> None:
    task = lq.put("x", ttl=text)
    assert lq.task("meta", 0, task[0])[8] == int(seconds * SEC)


def test_float_seconds_become_exact_microseconds(lq: Legacy) -> None:
    task = lq.put("x", ttl=4.35, ttr="0.000001")
    meta = lq.task("meta", 0, task[0])
    assert meta[8] == 4_350_000 and meta[9] == 1
    assert meta[3] == T0 + 4_350_000  # next_event = created + ttl, no float rounding


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("put", ["abc", "t", 0, 0, 0, 0], "Invalid value of space: 'abc'"),
        ("put", [-1, "t", 0, 0, 0, 0], "Invalid value of space: -1"),
        ("put", [1.5, "t", 0, 0, 0, 0], "Invalid value of space: 1.5"),
        ("put", [2**32, "t", 0, 0, 0, 0], "Invalid value of space: 4294967296"),
        ("put", [None, "t", 0, 0, 0, 0], "Invalid value of space: nil"),
        ("put", [0, 5, 0, 0, 0, 0], "Invalid value of tube: 5"),
        ("put", [0, "t", "soon", 0, 0, 0], "Invalid value of delay: 'soon'"),
        ("put", [0, "t", 0, "abc", 0, 0], "Invalid value of ttl: 'abc'"),
        ("put", [0, "t", 0, 0, True, 0], "Invalid value of ttr: true"),
        ("put", [0, "t", 0, 0, 0, "high"], "Invalid value of pri: 'high'"),
        ("put", [0, "t", 0, 0, 0], "Invalid value of pri: nil"),  # all four are required
        ("put", [0, "t"], "Invalid value of delay: nil"),
        ("put", [0, "t", 0, "1_000", 0, 0], "Invalid value of ttl: '1_000'"),
        ("put", [0, "t", 0, "inf", 0, 0], "Invalid value of ttl: 'inf'"),
        ("put", [0, "t", 0, float("nan"), 0, 0], "Invalid value of ttl: nan"),
        ("put", [0, "t", 0, [1], 0, 0], "Invalid value of ttl: [1]"),
        ("take", [0, "t", "later"], "Invalid value of timeout: 'later'"),
        ("kick", [0, "t", "all"], "Invalid value of count: 'all'"),
        ("release", [0, "0" * 32, "x"], "Invalid value of delay: 'x'"),
    ],
)
def test_bad_arguments_are_named_in_the_error(
    lq: Legacy, name: str, args: list[Any], message: str
) -> None:
    if name == "release":  # needs a task the caller has taken
        lq.put("x")
        args[1] = lq.take_id()
    assert lq.error(name, *args) == message


def test_huge_times_are_capped_at_a_hundred_years_and_stay_storable(lq: Legacy) -> None:
    task = lq.put("x", ttl=10**30, delay="1e30")
    meta = lq.task("meta", 0, task[0])
    hundred_years = 3_153_600_000
    assert meta[8] == 2 * hundred_years * SEC  # ttl += delay, both capped
    assert meta[3] == T0 + hundred_years * SEC
    assert lq.recover().status(task[0]) == "delayed"


@pytest.mark.parametrize(
    ("args", "legacy"),
    [
        ([], False),
        (["jobs"], False),
        ([None], False),
        ([0], True),
        (["0"], True),
        ([" 12 "], True),
        ([3, "jobs"], True),
        (["3", "jobs"], True),
        ([1.5], True),  # then statistics says: Invalid value of space: 1.5
        (["-1"], True),
        (["1e3"], True),
        (["12abc"], False),
        ([True], False),
        ([[0]], False),
    ],
)
def test_is_legacy_statistics_picks_the_form_by_first_argument(
    args: list[Any], legacy: bool
) -> None:
    assert is_legacy_statistics(args) is legacy


def test_names_and_access_classes() -> None:
    lq = Legacy().q
    names = [
        "put",
        "urgent",
        "put_unique",
        "take",
        "ack",
        "touch",
        "done",
        "bury",
        "dig",
        "unbury",
        "kick",
        "release",
        "requeue",
        "delete",
        "truncate",
        "peek",
        "meta",
    ]
    assert all(lq.has_name(f"queue.{n}") for n in names)
    assert not lq.has_name("queue.statistics")  # shared name, routed by the glue
    assert not lq.has_name("queue.tube.t:put")
    assert lq.access_of("queue.peek") == lq.access_of("queue.meta") == "read"
    assert lq.access_of("queue.statistics") == "read"
    assert lq.access_of("queue.truncate") == "admin"
    # Settling queued tasks is "manage": a writer's on its tubes, an admin's everywhere.
    settle = ("bury", "dig", "unbury", "kick", "delete")
    assert {lq.access_of(f"queue.{n}") for n in settle} == {"manage"}
    others = ("peek", "meta", "truncate", *settle)
    assert {lq.access_of(f"queue.{n}") for n in names if n not in others} == {"write"}
    assert isinstance(lq, LegacyQueue)


def test_restart_check_answers_already_started(lq: Legacy) -> None:
    # 1.5 started a tube's timer fiber on first use; queuebox's timers always run.
    assert lq.call("restart_check", 0, "t") == ["already started"]
    assert lq.call("restart_check", "7", "never_used") == ["already started"]
    assert lq.error("restart_check", "x", "t") == "Invalid value of space: 'x'"
    assert lq.error("restart_check", 0, 5) == "Invalid value of tube: 5"
    assert lq.q.access_of("queue.restart_check") == "read"


def test_statistic_is_the_statistics_of_the_russian_document(lq: Legacy) -> None:
    lq.put("a")
    lq.take_id()
    flat = lq.call("statistic", 0, "t")
    assert flat == [lq.q.statistics([0, "t"])]
    assert dict(zip(flat[0][::2], flat[0][1::2], strict=True))["space0.t.put"] == "1"
    assert lq.q.access_of("queue.statistic") == "read"
