"""The operator's release (Queue.release_task, `queuebox.release`): a taken task
back whoever holds it, on every driver."""

from __future__ import annotations

import pytest

from queuebox.drivers.errors import QueueError
from tests.unit.drivers.queue_harness import DRIVERS, Q


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
    with pytest.raises(QueueError, match="Tube 'other' not found"):
        q.q.release_task("other", 0)
    # Takeable again, by anyone.
    assert q.q.call(8, "queue.tube.t:take", [0])[0][1] == "t"
