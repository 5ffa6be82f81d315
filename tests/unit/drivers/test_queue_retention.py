"""Buried retention (QUEUE.md §14): at most buried_max buried tasks (the longest buried
dropped first), each kept buried_ttl seconds; every drop counted, durably, and heard as
a delete."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.drivers.retention import BURIED_SPACE, DROP_BATCH
from tests.unit.drivers.queue_harness import VARIANT_IDS, VARIANTS, Q, error_of, make_tube


@pytest.fixture(params=VARIANTS, ids=VARIANT_IDS)
def h(request: pytest.FixtureRequest) -> Q:
    harness = Q()
    type_, mode = request.param
    make_tube(harness, "t", type_, mode, buried_max=2, buried_ttl=10)
    for n in range(4):
        harness.put("t", n, utube=f"u{n}")
    return harness


def ids(h: Q) -> list[int]:
    return [task["id"] for task in h.q.list_tasks("t", {"state": "buried"})["tasks"]]


def test_the_longest_buried_is_dropped_first(h: Q) -> None:
    for task_id in (3, 1, 2):
        h.one("t", "bury", task_id)
        h.advance(1)
    assert sorted(ids(h)) == [1, 2]  # 3 was buried first
    assert h.status("t", 3) is None
    stats = h.stats("t")
    assert stats["retention"] == {"buried_max": 2, "buried_ttl": 10.0, "dropped": 1}
    assert stats["tasks"]["buried"] == 2
    assert stats["calls"]["delete"] == 1  # heard and counted as a delete


def test_a_buried_task_goes_after_its_ttl_and_a_kick_saves_it(h: Q) -> None:
    h.one("t", "bury", 0)
    h.advance(5)
    h.one("t", "bury", 1)
    h.one("t", "kick", 1)  # 0 (the first in index order) is ready again: its time goes
    h.advance(1)
    h.one("t", "bury", 0)
    h.advance(8.999)
    assert sorted(ids(h)) == [0, 1]
    h.advance(0.001)
    assert ids(h) == [0]
    h.advance(1)
    assert ids(h) == []
    assert h.stats("t")["retention"]["dropped"] == 2
    assert list(h.catalog.get(BURIED_SPACE)) == []


def test_times_and_the_count_survive_a_restart(h: Q) -> None:
    h.one("t", "bury", 0)
    h.one("t", "bury", 1)
    h.one("t", "bury", 2)
    h.advance(4)
    h2 = h.restart(via_msgpack=True)
    assert h2.stats("t")["retention"]["dropped"] == 1
    h2.advance(6)
    assert ids(h2) == []
    assert h2.stats("t")["retention"]["dropped"] == 3


def test_the_drop_is_heard_as_a_delete() -> None:
    h = Q()
    make_tube(h, "t", "fifo", buried_max=0)
    heard: list[Any] = []
    h.q.listen(lambda changes: heard.extend(changes))
    h.put("t", "x")
    assert h.one("t", "bury", 0)[1] == "!"
    assert [c.event for c in heard] == ["put", "bury", "delete"]
    assert h.status("t", 0) is None


def test_options_set_later_apply_to_tasks_already_buried() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    for n in range(3):
        h.put("t", n)
        h.one("t", "bury", n)
    assert h.q.tube_options("t", {"buried_max": 1}) == {"buried_max": 1}
    assert ids(h) == [2]
    assert h.q.tube_options("t", {"buried_max": False}) == {}
    assert "retention" not in h.stats("t")


@pytest.mark.parametrize(
    ("opts", "text"),
    [
        ({"buried_max": -1}, "Invalid value of buried_max: -1"),
        ({"buried_max": 1.5}, "Invalid value of buried_max: 1.5"),
        ({"buried_ttl": "x"}, "Invalid value of buried_ttl: x"),
    ],
)
def test_bad_options_are_refused(opts: dict[str, Any], text: str) -> None:
    h = Q()
    assert error_of(h.create, "t", "fifo", **opts)[1] == text


def test_a_large_backlog_is_dropped_a_batch_per_turn() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    for n in range(2500):
        h.put("t", n)
        h.one("t", "bury", n)
    h.q.tube_options("t", {"buried_max": 0})
    assert h.stats("t")["retention"]["dropped"] == DROP_BATCH
    assert h.q.next_deadline() == h.clock.now + 1  # the rest in the timer's next turns
    h.advance(1e-6)
    assert h.stats("t")["retention"]["dropped"] == 2 * DROP_BATCH
    h.advance(1e-6)
    assert h.stats("t")["tasks"]["buried"] == 0
    assert h.stats("t")["retention"]["dropped"] == 2500
