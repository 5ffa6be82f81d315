"""What a queue's secondary indexes cost per task, in bytes (tracemalloc).

A status or watch index holds the primary key in its entry key, so it finds
its tuples through the primary index and keeps no dict of its own, nor a
tuple per key of several fields: one run entry (8 bytes and the list's
slack) per task, where a dict entry cost ~50 and a key tuple 64 more.
Bytes are counted, not timed: the answer is the same on any machine.
"""

from __future__ import annotations

import tracemalloc

from queuebox.storage.space import IndexDef, Space, SpaceDef

TASKS = 20_000


def _bytes_per_task(*secondary: IndexDef) -> float:
    space = Space(SpaceDef(700, "q", (IndexDef("task_id", (0,)), *secondary)))
    tasks = [(i, "r", 1_000_000 + i, b"data") for i in range(TASKS)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for t in tasks:
            space.insert(t)
        return (tracemalloc.get_traced_memory()[0] - before) / TASKS
    finally:
        tracemalloc.stop()


def test_a_status_index_costs_a_run_entry_per_task_not_a_dict_entry() -> None:
    alone = _bytes_per_task()
    with_status = _bytes_per_task(IndexDef("status", (1, 0), group=1))
    assert with_status - alone <= 12


def test_a_watch_index_costs_a_run_entry_per_task_not_a_key_tuple() -> None:
    alone = _bytes_per_task()
    # Its key (next event, task id) would be a 64-byte tuple: the run holds the task.
    with_watch = _bytes_per_task(IndexDef("watch", (2,), unique=False))
    assert with_watch - alone <= 12


def test_a_unique_index_without_the_primary_key_keeps_its_dict() -> None:
    alone = _bytes_per_task()
    with_own = _bytes_per_task(IndexDef("next", (2,)))
    assert with_own - alone > 30  # its tuples can not be found through the primary


def test_tasks_gone_from_the_head_of_a_ttl_index_are_let_go() -> None:
    """The run of a key of several fields holds task tuples: the head's walk
    past deleted tasks must drop them, not keep their data alive until the
    next trim of the run."""
    space = Space(SpaceDef(701, "q", (IndexDef("task_id", (0,)), IndexDef("watch", (1,), False))))
    tracemalloc.start()  # before the data is made: only what it traces counts as freed
    try:
        for i in range(3000):
            space.insert((i, 1_000_000 + i, bytes([i % 256]) * 10_000))
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1000):  # fewer than a trim of the run waits for
            space.delete((i,))
        assert space.index("watch").first() == (1000, 1_001_000, bytes([1000 % 256]) * 10_000)
        freed = before - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert freed > 1000 * 10_000
