"""A name bound once (drivers/core.py `Binding`) and the one name parser
(drivers/callnames.py): what a binding says of its call, and how names split."""

from __future__ import annotations

import pytest

from queuebox.drivers.callnames import CallPath, in_namespace, parse_name, split_name
from queuebox.drivers.legacy import LegacyQueue
from queuebox.drivers.queue import Queue
from queuebox.storage.catalog import Catalog


@pytest.fixture
def q() -> Queue:
    queue = Queue(Catalog(), lambda: 0, namespaces=("queue", "jobs"))
    queue.call(1, "queue.create_tube", ["t", "fifo"])
    return queue


@pytest.mark.parametrize(
    ("name", "right", "tube", "takes_data"),
    [
        ("queue.tube.t:put", "write", "t", True),
        ("jobs.tube.t:put", "write", "t", True),
        ("queue.tube.t.put", "write", "t", False),  # the dot form: no self, no data
        ("queue.tube.t:take", "write", "t", False),
        ("queue.tube.t:peek", "read", "t", False),
        ("queue.tube.t:drop", "admin", "t", False),
        ("queue.create_tube", "admin", None, False),
        ("queue.statistics", "read", None, False),
        ("queue.tube", "read", None, False),
    ],
)
def test_a_binding_says_its_right_tube_and_data(
    q: Queue, name: str, right: str, tube: str | None, takes_data: bool
) -> None:
    binding = q.bind(name)
    assert binding is not None
    assert (binding.right, binding.tube, binding.takes_data) == (right, tube, takes_data)


def test_a_binding_runs_its_call_and_a_split_name_binds_the_same(q: Queue) -> None:
    put = q.bind("queue.tube.t:put", split_name("queue.tube.t:put"))
    assert put is not None and put.call(1, ["x"]) == [[0, "r", "x"]]
    assert q.bind("queue.tube.nosuch:put", split_name("queue.tube.nosuch:put")) is None


def test_a_dropped_tubes_binding_answers_no_such_procedure(q: Queue) -> None:
    put = q.bind("queue.tube.t:put")
    assert put is not None
    q.call(1, "queue.tube.t:drop", [])
    q.call(1, "queue.create_tube", ["t", "fifo"])  # a new tube of the same name
    with pytest.raises(Exception, match="Procedure 'queue.tube.t:put' is not defined"):
        put.call(1, ["x"])


def test_legacy_bindings_name_no_tube() -> None:
    lq = LegacyQueue(Catalog(), lambda: 0)
    put = lq.bind("queue.put")
    assert put is not None and (put.right, put.tube, put.takes_data) == ("write", None, False)
    assert lq.bind("queue.tube.t:put") is None


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("queue.create_tube", ("create_tube", None, None)),
        ("queue.tube.t:put", ("tube:", "t", "put")),
        ("queue.tube.t.put", ("tube.", "t", "put")),
        ("jobs.tube.t:ack", ("tube:", "t", "ack")),
        ("queue.tube.t:", None),
        ("queue.tube.t", None),
        ("queue.tube.a.b:put", None),
        ("queue.tube.t:put:x", None),
        ("queue.create_tube:x", None),
        ("queue.tube['t']:put", None),
        ("box.info", None),
        ("queue", None),
    ],
)
def test_queue_names(name: str, parsed: object) -> None:
    assert parse_name(name, ("queue", "jobs"), {"create_tube"}) == parsed


def test_a_dotted_namespace_and_the_first_one_a_name_is_in() -> None:
    path = split_name("my.q.tube.t:events")
    assert path == CallPath(("my", "q", "tube", "t"), "events")
    assert parse_name("my.q.tube.t:put", ("my.q",), ()) == ("tube:", "t", "put")
    assert in_namespace(path, ("other", "my.q", "my")) == ("tube", "t")
    assert in_namespace(path, ("queue",)) is None
    assert in_namespace(CallPath(("queue",), "x"), ("queue",)) is None
