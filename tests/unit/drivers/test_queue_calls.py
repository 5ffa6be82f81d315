"""Call names, access levels and the module-level calls (QUEUE.md §1, §2)."""

from __future__ import annotations

import pytest

from queuebox.drivers.queue import VERSION, Queue
from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef
from tests.unit.drivers.queue_harness import DRIVERS, Q, error_of, make_tube


@pytest.fixture
def h() -> Q:
    harness = Q()
    make_tube(harness, "t", "fifo")
    return harness


def test_known_names(h: Q) -> None:
    for name in (
        "queue.create_tube",
        "queue.tube",
        "queue.cfg",
        "queue.identify",
        "queue.statistics",
        "queue.stats",
        "queue.state",
        "queue.tube.t:put",
        "queue.tube.t:release_all",
        "queue.tube.t:on_task_change",
        "queue.tube.t:drop",
        "queue.tube.t.put",
    ):
        assert h.q.has_name(name), name
    for name in (
        "queue.nosuch",
        "queue.tube.nosuch:put",
        "queue.tube.t:nosuch",
        "queue.tube.t:grant",
        "queue.tube.t",
        "queue.tube.t:",
        "box.info",
        "queue",
        "queue.tube.a.b:put",
        "queue.tube.t:put:x",
    ):
        assert not h.q.has_name(name), name


@pytest.mark.parametrize("name", ["queue.tube.nosuch:put", "queue.tube.t:grant", "queue.x"])
def test_unknown_names_are_not_defined(h: Q, name: str) -> None:
    assert error_of(h.call, name) == (33, f"Procedure '{name}' is not defined")


def test_the_dot_form_reaches_the_method_without_self(h: Q) -> None:
    assert error_of(h.call, "queue.tube.t.put", "x") == (
        32,
        "attempt to index field 'raw' (a nil value)",
    )


def test_access_levels(h: Q) -> None:
    expected = {
        "queue.tube.t:peek": "read",
        "queue.statistics": "read",
        "queue.stats": "read",
        "queue.state": "read",
        "queue.tube": "read",
        "queue.identify": "read",
        "queue.tube.t:put": "write",
        "queue.tube.t:take": "write",
        "queue.tube.t:touch": "write",
        "queue.tube.t:ack": "manage",
        "queue.tube.t:release": "manage",
        "queue.tube.t:bury": "manage",
        "queue.tube.t:kick": "manage",
        "queue.tube.t:delete": "manage",
        "queue.tube.t:release_all": "write",
        "queue.tube.nosuch:take": "write",
        "queue.create_tube": "admin",
        "queue.tube.t:drop": "admin",
        "queue.tube.t:truncate": "admin",
        "queue.cfg": "admin",
        "queue.nosuch": "admin",
    }
    assert {name: h.q.access_of(name) for name in expected} == expected


def test_other_namespaces() -> None:
    q = Queue(Catalog(), lambda: 0, namespaces=("queue", "jobs"))
    assert q.call(1, "jobs.create_tube", ["t", "fifo"]) == []
    assert q.call(1, "jobs.tube.t:put", ["x"]) == [[0, "r", "x"]]
    assert q.call(1, "queue.tube.t:take", [0]) == [[0, "t", "x"]]
    assert q.has_name("jobs.tube.t:ack")


def test_state(h: Q) -> None:
    assert h.call("queue.state") == ["RUNNING"]


def test_tube_lists_and_checks() -> None:
    h = Q()
    assert h.call("queue.tube") == [[]]
    make_tube(h, "a", "fifo")
    make_tube(h, "b", "utube")
    assert sorted(h.call("queue.tube")[0]) == ["a", "b"]
    assert h.call("queue.tube", None) == h.call("queue.tube")
    assert h.call("queue.tube", "a") == [True]
    assert h.call("queue.tube", "c") == [False]
    assert h.call("queue.tube", False) == [False]
    for bad in (5, True, ["a"]):
        assert error_of(h.call, "queue.tube", bad) == (32, "argument #1 should be string or nil")


def test_on_task_change_binds_a_named_callback_and_answers_the_old_one(h: Q) -> None:
    h.q.listen(lambda changes: None, {"audit", "mirror"})
    assert h.tcall("t", "on_task_change", "audit") == [None]
    assert h.q.callback_of("t") == "audit"
    assert h.tcall("t", "on_task_change", "mirror") == ["audit"]
    assert h.tcall("t", "on_task_change") == ["mirror"]  # nil unbinds
    assert h.q.callback_of("t") is None


def test_on_task_change_over_the_wire_is_never_a_silent_no_op(h: Q) -> None:
    assert error_of(h.tcall, "t", "on_task_change", "nosuch") == (
        32,
        "on_task_change: no callback named 'nosuch' (plugins name them)",
    )
    assert error_of(h.tcall, "t", "on_task_change", {"fn": 1}) == (
        32,
        "on_task_change over the wire takes the name of a callback a plugin "
        "registered, not a table value",
    )
    assert h.tcall("t", "on_task_change", None) == [None]


def test_create_tube_binds_on_task_change_by_name_and_does_not_store_it() -> None:
    h = Q()
    h.q.listen(lambda changes: None, {"audit"})
    error = error_of(h.call, "queue.create_tube", "x", "fifo", {"on_task_change": "nosuch"})
    assert error[1] == "on_task_change: no callback named 'nosuch' (plugins name them)"
    assert h.call("queue.tube", "x") == [False]  # refused before anything was made
    assert h.create("x", "fifo", on_task_change="audit") == []
    assert h.q.callback_of("x") == "audit"
    assert "on_task_change" not in h.catalog.space("_queue").get(("x",))[4]


# -- create_tube --


@pytest.mark.parametrize("type_", DRIVERS)
def test_create_answers_nothing_and_the_tube_exists(type_: str) -> None:
    h = Q()
    assert h.create("x", type_) == []
    assert h.call("queue.tube", "x") == [True]
    assert h.put("x", 1) == [0, "r", 1]


def test_create_of_an_unknown_type() -> None:
    h = Q()
    assert error_of(h.call, "queue.create_tube", "x", "nosuch") == (
        32,
        "Unknown tube type nosuch",
    )
    assert error_of(h.call, "queue.create_tube", "x") == (32, "Unknown tube type nil")
    assert error_of(h.call, "queue.create_tube", "x", 5) == (32, "Unknown tube type 5")


def test_create_of_an_existing_name(h: Q) -> None:
    assert error_of(h.create, "t", "fifo") == (32, "Space 't' already exists")
    assert error_of(h.create, "_queue", "fifo") == (32, "Space '_queue' already exists")


def test_if_not_exists_gives_the_existing_tube_whatever_its_type(h: Q) -> None:
    h.put("t", "a")
    assert h.create("t", "utubettl", if_not_exists=True) == []
    assert h.one("t", "peek", 0) == [0, "r", "a"]
    assert h.q.registry.tubes["t"].type == "fifo"


def test_create_with_a_name_that_is_not_a_string() -> None:
    h = Q()
    assert error_of(h.call, "queue.create_tube", 5, "fifo") == (
        18,
        "Supplied key type of part 0 does not match index part type: expected string",
    )


def test_engines() -> None:
    h = Q()
    assert error_of(h.create, "x", "fifo", engine="nosuch") == (
        57,
        "Space engine 'nosuch' does not exist",
    )
    assert h.create("v", "fifo", engine="vinyl") == []
    assert h.create("m", "fifo", engine="memtx") == []
    assert error_of(h.create, "l", "limfifottl", engine="vinyl") == (
        32,
        "limfifottl queue does not support vinyl engine",
    )
    assert "l" not in h.catalog


@pytest.mark.parametrize("type_", ["utube", "utubettl"])
def test_ready_buffer_with_vinyl_leaves_the_space_but_no_tube(type_: str) -> None:
    h = Q()
    opts = {"storage_mode": "ready_buffer", "engine": "vinyl"}
    assert error_of(h.create, "x", type_, **opts) == (
        32,
        '"ready_buffer" storage mode cannot be used with vinyl engine',
    )
    assert h.call("queue.tube", "x") == [False]
    assert error_of(h.create, "x", type_, storage_mode="ready_buffer") == (
        32,
        "Space 'x' already exists",
    )
    assert h.create("x", type_, storage_mode="ready_buffer", if_not_exists=True) == []
    assert h.put("x", 1) == [0, "r", 1]


def test_ready_buffer_creates_a_second_space() -> None:
    h = Q()
    make_tube(h, "x", "utubettl", "ready_buffer")
    assert "x_ready_buffer" in h.catalog
    assert error_of(h.create, "x_ready_buffer", "fifo") == (
        32,
        "Space 'x_ready_buffer' already exists",
    )
    h.tcall("x", "drop")
    assert "x_ready_buffer" not in h.catalog


def test_if_not_exists_over_a_plain_space() -> None:
    h = Q()
    h.catalog.create_space("plain", [IndexDef("primary", (0,))])
    assert error_of(h.create, "plain", "fifo", if_not_exists=True) == (
        32,
        'space "plain" does not have "task_id" index',
    )
    assert error_of(h.create, "plain", "fifo") == (32, "Space 'plain' already exists")


def test_options_are_stored_verbatim_with_the_drivers_defaults() -> None:
    h = Q()
    h.create("f", "fifo", foo="bar", ttl=5, temporary=True)
    h.create("ft", "fifottl")
    h.create("ut", "utubettl", ttl=10, pri=3, capacity=None)
    registry = h.catalog.space("_queue")
    assert registry.get(("f",)) == (
        "f",
        0,
        "f",
        "fifo",
        {"foo": "bar", "if_not_exists": False, "ttl": 5, "temporary": True},
    )
    assert registry.get(("ft",))[4] == {
        "if_not_exists": False,
        "ttl": 3153600000,
        "ttr": 3153600000,
        "pri": 0,
    }
    assert registry.get(("ut",))[1:4] == (2, "ut", "utubettl")
    assert registry.get(("ut",))[4] == {"if_not_exists": False, "ttl": 10, "ttr": 10, "pri": 3}
    assert h.catalog.space("f").temporary
    assert not h.catalog.space("ft").temporary


def test_tube_ids_are_max_plus_one() -> None:
    h = Q()
    for name in "abc":
        h.create(name, "fifo")
    h.tcall("c", "drop")
    h.tcall("a", "drop")
    h.create("d", "fifo")
    assert h.q.registry.tubes["d"].tube_id == 2


def test_eval_helpers(h: Q) -> None:
    assert h.q.eval_create("e", "fifottl", {"ttl": 5}) == []
    assert h.q.tube_exists("e")
    assert not h.q.tube_exists("nosuch")
    assert not h.q.tube_exists(5)
    assert error_of(h.q.eval_create, "e", "fifo", None) == (32, "Space 'e' already exists")
    assert VERSION == Queue.VERSION == "1.5.0"


def test_basic_put_take_ack_drop() -> None:
    h = Q()
    make_tube(h, "b", "fifo")
    h.put("b", "x")
    assert h.tcall("b", "take", 0.1) == [[0, "t", "x"]]
    assert h.tcall("b", "ack", 0) == [[0, "-", "x"]]
    assert h.tcall("b", "drop") == [True]
    assert h.call("queue.tube", "b") == [False]
