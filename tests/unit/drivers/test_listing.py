"""drivers/listing.py: a tube's tasks by state, a page at a time, from the spaces
alone, and the operator's release (Queue.release_task) every driver obeys."""

from __future__ import annotations

import pytest

from queuebox.drivers.errors import QueueError
from queuebox.drivers.listing import list_tasks
from tests.unit.drivers.queue_harness import DRIVERS, Q


def ids(page: dict) -> list[int]:  # type: ignore[type-arg]
    return [task["task_id"] for task in page["tasks"]]


@pytest.mark.parametrize("driver", DRIVERS)
def test_pages_by_state_in_take_order(driver: str) -> None:
    q = Q()
    q.q.call(1, "queue.create_tube", ["t", driver, {}])
    for n in range(7):
        q.q.call(1, "queue.tube.t:put", [n, {"utube": "u"}])
    q.q.call(1, "queue.tube.t:bury", [2])
    q.q.call(1, "queue.tube.t:bury", [5])
    page = list_tasks(q.catalog, "t", "ready", 0, 3)
    assert page["total"] == 5 and ids(page) == [0, 1, 3]
    assert ids(list_tasks(q.catalog, "t", "ready", 3, 3)) == [4, 6]
    assert ids(list_tasks(q.catalog, "t", "!", 0, 10)) == [2, 5]  # the status letter works too
    every = list_tasks(q.catalog, "t")
    assert every["total"] == 7 and ids(every) == list(range(7))
    assert every["tasks"][3]["data"] == 3 and every["tasks"][2]["status"] == "!"


def test_ttl_drivers_list_ready_tasks_by_priority() -> None:
    q = Q()
    q.q.call(1, "queue.create_tube", ["t", "fifottl", {}])
    for pri in (5, 1, 3):
        q.q.call(1, "queue.tube.t:put", [pri, {"pri": pri}])
    assert ids(list_tasks(q.catalog, "t", "ready")) == [1, 2, 0]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("nope",), "Tube nope not found"),
        ((None,), "Tube None not found"),
        (("t", "sleeping"), "Unknown state sleeping"),
        (("t", None, -1), "offset must be a whole number >= 0"),
        (("t", None, 0, "ten"), "limit must be a whole number >= 0"),
    ],
)
def test_bad_arguments_are_queue_errors(args: tuple, error: str) -> None:  # type: ignore[type-arg]
    q = Q()
    q.q.call(1, "queue.create_tube", ["t", "fifo", {}])
    with pytest.raises(QueueError) as failed:
        list_tasks(q.catalog, *args)
    assert failed.value.message.startswith(error)


def test_a_page_is_at_most_a_thousand_tasks() -> None:
    q = Q()
    q.q.call(1, "queue.create_tube", ["t", "fifo", {}])
    for n in range(1005):
        q.q.call(1, "queue.tube.t:put", [n])
    assert len(list_tasks(q.catalog, "t", None, 0, 5000)["tasks"]) == 1000


@pytest.mark.parametrize("driver", DRIVERS)
def test_release_task_frees_a_task_from_whoever_holds_it(driver: str) -> None:
    q = Q()
    q.q.call(1, "queue.create_tube", ["t", driver, {}])
    q.q.call(1, "queue.tube.t:put", ["job"])
    (taken,) = q.q.call(7, "queue.tube.t:take", [0])  # connection 7 holds it
    assert q.q.release_task("t", taken[0]) == [[0, "r", "job"]]
    with pytest.raises(QueueError, match="Task was not taken"):
        q.q.call(7, "queue.tube.t:ack", [0])
    with pytest.raises(QueueError, match="Task was not taken"):
        q.q.release_task("t", 0)
    with pytest.raises(QueueError, match="Task 3 not found"):
        q.q.release_task("t", 3)
    with pytest.raises(QueueError, match="Tube other not found"):
        q.q.release_task("other", 0)
    # Takeable again, by anyone.
    assert q.q.call(8, "queue.tube.t:take", [0])[0][1] == "t"
