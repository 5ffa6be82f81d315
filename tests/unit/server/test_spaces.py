"""SELECT on the queue's spaces (server/core/spaces.py), in process.

A module index read through queuebox's own storage index must give what the
plain way gives (every row sorted by the module's key, Tarantool's iterator
rules applied), for any tasks, key, iterator, offset and limit; and the
checks answer with Tarantool's codes and texts.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuebox.drivers.driver import DRIVERS
from queuebox.drivers.schema import task_space
from queuebox.server.core.spaces import Visible, _select
from queuebox.server.runtime.errors import CallError
from tests.unit.drivers.queue_harness import Q

TYPE = "Supplied key type of part 0 does not match index part type: expected "
NO_ITERATOR = "does not support requested iterator type"
ITERATORS = [0, 1, 2, 3, 4, 5, 6]
STATUSES = ["r", "t", "!", "~", "-", "a", "z"]


def tube_with(kind: str, ops: list[tuple[str, int]]) -> Q:
    h = Q()
    h.create("t", kind)
    for op, n in ops:
        if op == "put":
            h.put("t", n, pri=n % 3, utube=str(n % 4))
        elif op == "take":
            h.take("t")
        elif op == "bury":
            h.status("t", n) and h.tcall("t", "bury", n)
        elif op == "delete":
            h.status("t", n) and h.tcall("t", "delete", n)
    return h


def key_for(parts: tuple[tuple[int, str], ...], draw: Any) -> list[Any]:
    key: list[Any] = []
    for _, kind in parts[: draw(st.integers(0, len(parts)))]:
        key.append(draw(st.sampled_from(STATUSES)) if kind == "string" else draw(st.integers(0, 9)))
    return key


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(["fifo", "fifottl", "utube", "utubettl"]),
    ops=st.lists(
        st.tuples(st.sampled_from(["put", "put", "take", "bury", "delete"]), st.integers(0, 12)),
        max_size=30,
    ),
    data=st.data(),
)
def test_through_the_storage_index_as_through_sorting(
    kind: str, ops: list[tuple[str, int]], data: Any
) -> None:
    h = tube_with(kind, ops)
    space = h.catalog.space("t")
    found = Visible(space.id, task_space("t", DRIVERS[kind], False), space, "memtx")
    index = data.draw(st.integers(0, len(found.schema.indexes) - 1))
    key = key_for(found.schema.indexes[index][1], data.draw)
    iterator = data.draw(st.sampled_from(ITERATORS))
    offset, limit = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 40))
    args = (index, key, iterator, offset, limit)
    assert _select(found, None, space, *args) == _select(found, list(space), None, *args)


def test_iterators_on_a_small_tube() -> None:
    h = tube_with("fifo", [("put", n) for n in range(5)] + [("take", 0), ("bury", 3)])
    space = h.catalog.space("t")
    found = Visible(space.id, task_space("t", DRIVERS["fifo"], False), space, "memtx")

    def ids(index: int, key: list[Any], it: int, offset: int = 0, limit: int = 100) -> list[int]:
        return [row[0] for row in _select(found, None, space, index, key, it, offset, limit)]

    assert ids(0, [], 0) == [0, 1, 2, 3, 4]
    assert ids(0, [2], 6) == [3, 4]  # GT
    assert ids(0, [2], 2) == [2, 3, 4]  # ALL with a key reads as GE
    assert ids(0, [2], 3) == [1, 0]  # LT
    assert ids(0, [2], 4, offset=1) == [1, 0]  # LE
    assert ids(1, ["r"], 0) == [1, 2, 4]
    assert ids(1, ["r"], 1) == [4, 2, 1]  # REQ
    assert ids(1, ["r", 2], 5) == [2, 4, 0]  # GE crosses into t
    assert ids(0, [], 0, limit=2**64 - 1) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("index", "key", "iterator", "code", "message"),
    [
        (0, [1, 2], 0, 31, "Invalid key part count (expected [0..1], got 2)"),
        (0, ["x"], 0, 18, TYPE + "unsigned"),
        (0, [True], 0, 18, TYPE + "unsigned"),
        (1, [1], 0, 18, TYPE + "string"),
        (2, [], 0, 35, "No index #2 is defined in space 't'"),
        (0, [], 8, 112, f"Index 'task_id' (TREE) of space 't' (memtx) {NO_ITERATOR}"),
        (0, [], 12, 1, "Illegal parameters, Invalid iterator type"),
    ],
)  # fmt: skip
def test_checks_answer_as_tarantool(
    index: int, key: list[Any], iterator: int, code: int, message: str
) -> None:
    h = tube_with("fifo", [("put", 0)])
    space = h.catalog.space("t")
    found = Visible(space.id, task_space("t", DRIVERS["fifo"], False), space, "memtx")
    with pytest.raises(CallError) as caught:
        _select(found, None, space, index, key, iterator, 0, 10)
    assert (caught.value.code, caught.value.message) == (code, message)


def test_a_plugin_driver_without_field_types_shows_its_storage_indexes() -> None:
    from tests.e2e.plugins.sample import Lifo

    class Wide(Lifo):
        FORMAT = ("task_id", "status", "extra", "data")
        F_DATA = 3

    schema = task_space("w", Wide, False)
    assert schema.format == tuple((f, "any") for f in Wide.FORMAT)
    assert schema.indexes[1] == ("status", ((1, "scalar"), (0, "scalar")), True)
    assert task_space("gone", None, True).indexes == (("task_id", ((0, "unsigned"),), True),)
