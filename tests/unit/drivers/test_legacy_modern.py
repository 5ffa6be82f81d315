"""The legacy and the modern queue over one Catalog: same names, never confused."""

from __future__ import annotations

import pytest

from queuebox.drivers.errors import QueueError
from queuebox.drivers.queue import Blocked, Queue
from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef
from tests.unit.drivers.legacy_harness import T0, FakeClock, Legacy, recovered


class Both:
    def __init__(self, catalog: Catalog | None = None, clock: FakeClock | None = None) -> None:
        self.legacy = Legacy(catalog, clock)
        self.catalog = self.legacy.catalog
        self.modern = Queue(self.catalog, self.legacy.clock)

    def mcall(self, name: str, *args: object, conn: int = 1) -> object:
        return self.modern.call(conn, name, list(args))

    def recover(self) -> Both:
        return Both(recovered(self.catalog), self.legacy.clock)


@pytest.fixture
def both() -> Both:
    b = Both()
    b.mcall("queue.create_tube", "jobs", "fifo", {})
    return b


def test_a_legacy_tube_and_a_modern_tube_of_one_name_keep_their_own_tasks(both: Both) -> None:
    legacy_id = both.legacy.put("legacy", tube="jobs")[0]
    assert both.mcall("queue.tube.jobs:put", "modern") == [[0, "r", "modern"]]
    assert both.mcall("queue.tube.jobs:take", 0) == [[0, "t", "modern"]]
    assert both.mcall("queue.tube.jobs:take", 0) == []
    assert both.legacy.task("take", 0, "jobs", 0)[:4] == [legacy_id, "jobs", "taken", "legacy"]
    assert both.legacy.call("take", 0, "jobs", 0) == []
    modern_stats = both.mcall("queue.statistics", "jobs")
    assert modern_stats[0]["tasks"]["taken"] == 1  # type: ignore[index]
    assert both.legacy.stats(0, "jobs")["space0.jobs.tasks.taken"] == "1"


def test_waiters_of_one_api_are_not_woken_by_the_other(both: Both) -> None:
    woken: list[str] = []
    modern = both.mcall("queue.tube.jobs:take", 5, conn=2)
    legacy = both.legacy.call("take", 0, "jobs", 5, conn=3)
    assert isinstance(modern, Blocked) and isinstance(legacy, Blocked)
    both.modern.waiters.add(
        modern.tube, modern.kind, 2, modern.timeout_s, T0, lambda: woken.append("modern")
    )
    both.legacy.q.waiters.add(
        legacy.tube, legacy.kind, 3, legacy.timeout_s, T0, lambda: woken.append("legacy")
    )
    both.legacy.put("x", tube="jobs")
    assert woken == ["legacy"]
    both.mcall("queue.tube.jobs:put", "y")
    assert woken == ["legacy", "modern"]


@pytest.mark.parametrize("legacy_first", [True, False])
def test_a_modern_tube_cannot_take_a_legacy_space_name(legacy_first: bool) -> None:
    b = Both()
    if legacy_first:
        b.legacy.put("x", space=0)
    with pytest.raises(QueueError, match="Space '_legacy_0' is reserved for the legacy queue API"):
        b.mcall("queue.create_tube", "_legacy_0", "fifo", {})
    assert "_legacy_0" not in b.mcall("queue.tube")[0]
    if not legacy_first:
        b.legacy.put("x", space=0)
    assert b.legacy.take_id(space=0) is not None


def test_a_foreign_space_with_a_legacy_name_is_refused_not_used() -> None:
    # Such a space can't be made through the queue API; this stands for one
    # left in a data directory by something else.
    b = Both()
    foreign = b.catalog.create_space("_legacy_3", [IndexDef("pk", (0,))])
    foreign.insert((0, "not a legacy task"))
    assert b.legacy.error("put", 3, "t", 0, 0, 0, 0, "x") == (
        "Space '_legacy_3' is not a legacy queue space"
    )
    assert b.legacy.error("peek", 3, "0" * 32) == "Task not found"
    assert list(foreign) == [(0, "not a legacy task")]
    b2 = b.recover()  # and a restart does not adopt it either
    assert 3 not in b2.legacy.q.store.spaces


def test_both_come_back_from_one_recovered_catalog(both: Both) -> None:
    legacy_id = both.legacy.put("legacy", tube="jobs")[0]
    both.mcall("queue.tube.jobs:put", "modern")
    both.legacy.take_id("jobs", conn=4)
    both.mcall("queue.tube.jobs:take", 0, conn=4)
    again = both.recover()
    assert again.mcall("queue.tube.jobs:take", 0) == [[0, "t", "modern"]]
    assert again.legacy.task("take", 0, "jobs", 0)[:4] == [legacy_id, "jobs", "taken", "legacy"]
    assert again.legacy.stats(0, "jobs")["space0.jobs.ready_by_restart"] == "1"
