"""drivers/oldest.py: the ready task put first, on every driver, without a walk."""

from __future__ import annotations

import pytest

from queuebox.drivers.oldest import oldest_ready
from tests.unit.drivers.queue_harness import DRIVERS, Q


def space(q: Q):  # type: ignore[no-untyped-def]
    return q.catalog.get("t")


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_lowest_ready_id_whatever_its_priority(driver: str) -> None:
    q = Q()
    q.q.call(1, "queue.create_tube", ["t", driver, {}])
    assert oldest_ready(space(q)) is None
    for n, pri in enumerate((5, 0, 9, 0, 3)):
        q.q.call(1, "queue.tube.t:put", [n, {"pri": pri, "utube": str(n)}])
    assert oldest_ready(space(q))[0] == 0  # type: ignore[index]
    q.q.call(1, "queue.tube.t:bury", [0])
    q.q.call(1, "queue.tube.t:delete", [1])
    assert oldest_ready(space(q))[0] == 2  # type: ignore[index]
    for task_id in (2, 3, 4):
        q.q.call(1, "queue.tube.t:bury", [task_id])
    assert oldest_ready(space(q)) is None
    q.q.call(1, "queue.tube.t:kick", [10])
    assert oldest_ready(space(q))[0] == 0  # type: ignore[index]


def test_many_priorities_on_a_ttl_tube() -> None:
    q = Q()
    q.q.call(1, "queue.create_tube", ["t", "fifottl", {}])
    for n in range(200):
        q.q.call(1, "queue.tube.t:put", [n, {"pri": 199 - n}])
    for task_id in range(150):
        q.q.call(1, "queue.tube.t:delete", [task_id])
    assert oldest_ready(space(q))[0] == 150  # type: ignore[index]
