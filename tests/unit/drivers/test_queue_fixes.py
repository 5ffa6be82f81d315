"""The five "probably fix" quirks of QUEUE.md §10, fixed, and the quirks kept on purpose."""

from __future__ import annotations

import pytest

from tests.unit.drivers.queue_harness import (
    DRIVERS,
    SEC,
    T0,
    VARIANT_IDS,
    VARIANTS,
    Q,
    error_of,
    make_tube,
)


@pytest.mark.parametrize("mode", [None, "ready_buffer"])
def test_1_utube_kick_commits_and_answers_its_count(mode: str | None) -> None:
    h = Q()
    make_tube(h, "t", "utube", mode)
    h.put("t", "a")
    h.tcall("t", "bury", 0)
    assert h.tcall("t", "kick", 5) == [1]
    assert h.status("t", 0) == "r"
    assert h.tcall("t", "kick", 5) == [0]


@pytest.mark.parametrize("type_", ["utube", "utubettl"])
def test_2_a_kicked_task_can_be_taken_in_ready_buffer_mode(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_, "ready_buffer")
    h.put("t", "a")
    h.take("t")
    h.tcall("t", "bury", 0)
    assert h.tcall("t", "kick", 1) == [1]
    assert h.tcall("t", "take", 0) == [[0, "t", "a"]]


@pytest.mark.parametrize("mode", [None, "ready_buffer"])
def test_3_utubettl_release_keeps_a_correct_expiry(mode: str | None) -> None:
    h = Q()
    make_tube(h, "t", "utubettl", mode)
    h.put("t", "a", ttl=1)
    h.take("t")
    h.advance(0.5)
    h.tcall("t", "release", 0)
    assert h.catalog.space("t").get((0,))[2] == T0 + SEC  # next_event = created + ttl
    h.advance(1.0)
    assert error_of(h.tcall, "t", "peek", 0) == (32, "Task 0 not found")
    stats = h.stats("t")
    assert stats["tasks"]["ready"] == 0
    assert stats["calls"]["ttl"] == 1


def test_3_a_task_released_after_its_ttl_is_deleted_not_handed_out() -> None:
    h = Q()
    make_tube(h, "t", "utubettl")
    h.put("t", "a", ttl=1, ttr=5)
    h.take("t")
    h.advance(2)  # ttl passed while taken: utubettl keeps it taken until ttr
    assert h.one("t", "release", 0) == [0, "r", "a"]
    assert h.take("t") is None
    assert h.stats("t")["calls"]["ttl"] == 1


@pytest.mark.parametrize(("type_", "mode"), VARIANTS, ids=VARIANT_IDS)
def test_4_truncate_clears_ownership(type_: str, mode: str | None) -> None:
    h = Q()
    make_tube(h, "t", type_, mode)
    h.put("t", "a")
    h.take("t", conn=1)
    h.tcall("t", "truncate")
    h.put("t", "b")
    assert error_of(h.tcall, "t", "ack", 0, conn=1) == (32, "Task was not taken")
    assert h.tcall("t", "drop") == [True]


@pytest.mark.parametrize(("type_", "mode"), VARIANTS, ids=VARIANT_IDS)
def test_5_explicit_nil_opts_mean_no_options(type_: str, mode: str | None) -> None:
    h = Q()
    make_tube(h, "t", type_, mode)
    assert h.tcall("t", "put", "a", None) == [[0, "r", "a"]]
    h.take("t")
    assert h.tcall("t", "release", 0, None) == [[0, "r", "a"]]
    assert h.take("t") == [0, "t", "a"]
    assert h.tcall("t", "ack", 0) == [[0, "-", "a"]]


# -- kept on purpose (clients can see them) --


@pytest.mark.parametrize("type_", DRIVERS)
def test_kept_take_timeout_is_empty_and_full_put_is_nil(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_, capacity=1)
    assert h.tcall("t", "take", 0) == []
    h.put("t", "a")
    expected = [None] if type_ == "limfifottl" else [[1, "r", "b"]]
    assert h.tcall("t", "put", "b") == expected


def test_kept_kick_of_a_negative_count_answers_it() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    assert h.tcall("t", "kick", -5) == [-5]


def test_kept_identify_answers_a_string_not_bytes() -> None:
    h = Q()
    assert isinstance(h.call("queue.identify")[0], str)
