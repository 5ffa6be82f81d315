"""Every modern queue call of QUEUE.md §1–§3 over real sockets with tarantool-python.

The answers are checked as a connector sees them: CALL shapes (`[]` versus
`[None]`, `[[id, status, data]]`, scalars), the CALL_16 shapes of QUEUE.md §1, the
EVAL texts real clients send, and error codes with their texts (queuebox
leaves out upstream's Lua `file:line: ` prefix).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import tarantool
from tarantool.error import DatabaseError

from tests.e2e.serverproc import (
    CALL,
    PING,
    RawClient,
    ServerProc,
    StartServer,
    login_tester,
    unique,
)
from tests.waiting import wait_for

ALSO_BEHIND_A_ROUTER = True  # but for conftest.NOT_BEHIND_A_ROUTER
DRIVERS = ["fifo", "fifottl", "limfifottl", "utube", "utubettl"]
TTL_DRIVERS = ["fifottl", "limfifottl", "utubettl"]
EVAL_CREATE = "local name, type, cfg = ... ; queue.create_tube(name, type, cfg)"
EVAL_EXISTS = "local name = ... ; return queue.tube[name] ~= nil"


def error_of(conn: tarantool.Connection, name: str, *args: Any) -> tuple[int, str]:
    with pytest.raises(DatabaseError) as info:
        conn.call(name, *args)
    return info.value.code, info.value.message


def eval_error(conn: tarantool.Connection, expr: str, *args: Any) -> tuple[int, str]:
    with pytest.raises(DatabaseError) as info:
        conn.eval(expr, *args)
    return info.value.code, info.value.message


@pytest.fixture(scope="module")
def conn16(server: ServerProc) -> Iterator[tarantool.Connection]:
    c = login_tester(server.port, call_16=True)
    try:
        yield c
    finally:
        c.close()


def tube_of(conn: tarantool.Connection, type_: str, opts: dict[str, Any] | None = None) -> str:
    name = unique(type_)
    assert conn.call("queue.create_tube", name, type_, opts or {}).data == []
    return name


class Tube:
    """`t.put("x")` calls queue.tube.<name>:put over the connection; `.data` is returned."""

    def __init__(self, conn: tarantool.Connection, name: str) -> None:
        self.conn = conn
        self.name = name

    def __getattr__(self, method: str) -> Any:
        def call(*args: Any) -> Any:
            return self.conn.call(f"queue.tube.{self.name}:{method}", *args).data

        return call

    def error(self, method: str, *args: Any) -> tuple[int, str]:
        return error_of(self.conn, f"queue.tube.{self.name}:{method}", *args)


def new_tube(conn: tarantool.Connection, type_: str, opts: dict[str, Any] | None = None) -> Tube:
    return Tube(conn, tube_of(conn, type_, opts))


# --- QUEUE.md §2 module-level calls ----------------------------------------------------


@pytest.mark.parametrize("type_", DRIVERS)
def test_create_tube_answers_nothing_and_the_tube_exists(
    conn: tarantool.Connection, type_: str
) -> None:
    name = unique(type_)
    # queuebox answers [] where upstream answers "unsupported Lua type" after succeeding.
    assert conn.call("queue.create_tube", name, type_).data == []
    assert conn.call("queue.tube", name).data == [True]
    assert conn.call(f"queue.tube.{name}:put", "x").data == [[0, "r", "x"]]


def test_create_tube_errors(conn: tarantool.Connection) -> None:
    name = tube_of(conn, "fifo")
    assert error_of(conn, "queue.create_tube", unique("x"), "nosuch") == (
        32,
        "Unknown tube type nosuch",
    )
    assert error_of(conn, "queue.create_tube", unique("x")) == (32, "Unknown tube type nil")
    assert error_of(conn, "queue.create_tube", name, "fifo") == (
        32,
        f"Space '{name}' already exists",
    )
    code, message = error_of(conn, "queue.create_tube", 5, "fifo")
    assert code == 18 and message.endswith("expected string")
    assert error_of(conn, "queue.create_tube", unique("x"), "fifo", {"engine": "nosuch"}) == (
        57,
        "Space engine 'nosuch' does not exist",
    )
    assert error_of(conn, "queue.create_tube", unique("x"), "limfifottl", {"engine": "vinyl"}) == (
        32,
        "limfifottl queue does not support vinyl engine",
    )


def test_create_tube_checks_the_spaces_that_exist(conn: tarantool.Connection) -> None:
    # The registry's own space is a space like any other, but not a tube.
    assert error_of(conn, "queue.create_tube", "_queue", "fifo") == (
        32,
        "Space '_queue' already exists",
    )
    assert error_of(conn, "queue.create_tube", "_queue", "fifo", {"if_not_exists": True}) == (
        32,
        'space "_queue" does not have "task_id" index',
    )
    # ready_buffer refuses vinyl after the main space was made: a retry says it exists.
    name = unique("rb")
    opts = {"storage_mode": "ready_buffer", "engine": "vinyl"}
    assert error_of(conn, "queue.create_tube", name, "utube", opts) == (
        32,
        '"ready_buffer" storage mode cannot be used with vinyl engine',
    )
    assert conn.call("queue.tube", name).data == [False]
    assert error_of(conn, "queue.create_tube", name, "utube") == (
        32,
        f"Space '{name}' already exists",
    )


def test_create_tube_if_not_exists_keeps_the_tube_and_its_tasks(conn: tarantool.Connection) -> None:
    tube = new_tube(conn, "fifo")
    tube.put("kept")
    opts = {"if_not_exists": True}
    assert conn.call("queue.create_tube", tube.name, "utubettl", opts).data == []
    assert tube.peek(0) == [[0, "r", "kept"]]  # still the fifo tube, whatever the type asked


def test_tube_lists_and_checks(conn: tarantool.Connection) -> None:
    name = tube_of(conn, "fifo")
    assert conn.call("queue.tube", name).data == [True]
    assert conn.call("queue.tube", unique("nosuch")).data == [False]
    listed = conn.call("queue.tube").data
    assert len(listed) == 1 and name in listed[0]
    assert error_of(conn, "queue.tube", 5) == (32, "argument #1 should be string or nil")


def test_a_server_without_tubes_answers_empty_tables(start_server: StartServer) -> None:
    server = start_server()
    c = login_tester(server.port)
    c16 = login_tester(server.port, call_16=True)
    try:
        assert c.call("queue.tube").data == [[]]
        assert c.call("queue.statistics").data == [[]]
        assert c16.call("queue.statistics").data == [[]]
    finally:
        c.close()
        c16.close()


def test_cfg_answers_nothing_and_validates(conn: tarantool.Connection) -> None:
    assert conn.call("queue.cfg", {"ttr": 0}).data == []
    assert conn.call("queue.cfg", {"in_replicaset": False}).data == []
    assert error_of(conn, "queue.cfg", {"nosuch": 1}) == (32, "Unknown option nosuch")
    assert error_of(conn, "queue.cfg", {"ttr": -1}) == (32, "Invalid value of ttr: -1")
    assert error_of(conn, "queue.cfg", {"ttr": "x"}) == (32, "Invalid value of ttr: x")
    assert error_of(conn, "queue.cfg", {"in_replicaset": 1}) == (
        32,
        "Invalid value of in_replicaset: 1",
    )


def test_statistics_of_a_tube_of_all_tubes_and_of_an_unknown_one(
    conn: tarantool.Connection, conn16: tarantool.Connection
) -> None:
    tube = new_tube(conn, "fifo")
    tube.put("x")
    (one,) = conn.call("queue.statistics", tube.name).data
    assert one["tasks"] == {
        "ready": 1, "taken": 0, "buried": 0, "delayed": 0, "done": 0, "total": 1
    }  # fmt: skip
    assert set(one["calls"]) == {
        "ack", "bury", "delete", "kick", "put", "release", "take", "touch", "ttl", "ttr", "delay"
    }  # fmt: skip
    assert one["calls"]["put"] == 1
    assert conn.call("queue.stats", tube.name).data == [one]
    (every,) = conn.call("queue.statistics").data
    assert every[tube.name] == one
    assert conn16.call("queue.statistics", tube.name).data == [[one]]
    assert error_of(conn, "queue.statistics", unique("nosuch")) == (
        32,
        "attempt to index a nil value",
    )


def test_statistics_of_a_tube_with_a_numeric_name(conn: tarantool.Connection) -> None:
    name = str(uuid.uuid4().int % 10**12)  # numbers also start the legacy statistics form
    assert conn.call("queue.create_tube", name, "fifo").data == []
    conn.call(f"queue.tube.{name}:put", "x")
    for function in ("queue.statistics", "queue.stats"):
        (stats,) = conn.call(function, name).data
        assert stats["tasks"]["ready"] == 1 and stats["calls"]["put"] == 1


def test_state_and_version(conn: tarantool.Connection, conn16: tarantool.Connection) -> None:
    assert conn.call("queue.state").data == ["RUNNING"]
    assert conn16.call("queue.state").data == [["RUNNING"]]
    assert conn.eval("return queue._VERSION").data == ["1.5.0"]
    assert conn.eval("return queue.state()").data == ["RUNNING"]


def test_eval_texts_of_real_clients(conn: tarantool.Connection) -> None:
    name = unique("evaled")
    assert conn.eval(EVAL_EXISTS, name).data == [False]
    assert conn.eval(EVAL_CREATE, name, "fifottl", {"ttl": 60}).data == []
    assert conn.eval(EVAL_EXISTS, name).data == [True]
    assert conn.call(f"queue.tube.{name}:put", "x").data == [[0, "r", "x"]]
    # Runs of whitespace do not matter; any other text is refused, not run.
    assert conn.eval("local name = ...  ;\n  return queue.tube[name] ~= nil", name).data == [True]
    code, message = eval_error(conn, "return 1 + 1")
    assert code == 32 and "EVAL" in message


# --- QUEUE.md §1 names that do not resolve ---------------------------------------------


def test_unknown_tubes_methods_and_functions_are_not_defined(conn: tarantool.Connection) -> None:
    name = tube_of(conn, "fifo")
    for missing in (
        f"queue.tube.{unique('nosuch')}:put",
        f"queue.tube.{name}:nosuch",
        "queue.nosuch",
        "nosuch",
    ):
        assert error_of(conn, missing, "x") == (33, f"Procedure '{missing}' is not defined")


def test_the_dot_form_reaches_the_method_without_self(conn: tarantool.Connection) -> None:
    name = tube_of(conn, "fifo")
    assert error_of(conn, f"queue.tube.{name}.put", "x") == (
        32,
        "attempt to index field 'raw' (a nil value)",
    )


def test_a_dropped_tube_is_not_defined(conn: tarantool.Connection) -> None:
    tube = new_tube(conn, "fifottl")
    tube.put("x")
    assert tube.drop() == [True]
    assert conn.call("queue.tube", tube.name).data == [False]
    for method in ("put", "take", "peek", "drop"):
        name = f"queue.tube.{tube.name}:{method}"
        assert error_of(conn, name, 0) == (33, f"Procedure '{name}' is not defined")
    # The name can be created again, empty and with fresh statistics.
    assert conn.call("queue.create_tube", tube.name, "fifo").data == []
    assert tube.put("again") == [[0, "r", "again"]]
    assert conn.call("queue.statistics", tube.name).data[0]["calls"]["put"] == 1


# --- QUEUE.md §3 tube methods ----------------------------------------------------------


@pytest.mark.parametrize("type_", DRIVERS)
def test_task_lifecycle_shapes(conn: tarantool.Connection, type_: str) -> None:
    t = new_tube(conn, type_)
    assert t.put("a") == [[0, "r", "a"]]
    assert t.put({"k": [1, None]}) == [[1, "r", {"k": [1, None]}]]
    assert t.put(None) == [[2, "r", None]]
    assert t.peek(1) == [[1, "r", {"k": [1, None]}]]
    assert t.take(0) == [[0, "t", "a"]]
    assert t.release(0) == [[0, "r", "a"]]
    assert t.take() == [[0, "t", "a"]]  # released: back at the head
    assert t.ack(0) == [[0, "-", "a"]]
    assert t.bury(1) == [[1, "!", {"k": [1, None]}]]
    assert t.bury(1) == [[1, "!", {"k": [1, None]}]]
    assert t.kick() == [1]
    assert t.kick(5) == [0]
    assert t.kick(-5) == [-5]
    assert t.delete(2) == [[2, "-", None]]
    assert t.take(None) == [[1, "t", {"k": [1, None]}]]
    assert t.take(0) == []
    assert t.release_all() == []
    assert t.peek(1) == [[1, "r", {"k": [1, None]}]]
    assert t.truncate() == []
    assert t.take(0) == []
    assert t.put("z") == [[0, "r", "z"]]  # ids are reused after truncate


@pytest.mark.parametrize("type_", DRIVERS)
def test_task_errors(conn: tarantool.Connection, type_: str) -> None:
    t = new_tube(conn, type_)
    t.put("a")
    for method in ("peek", "bury", "delete"):
        assert t.error(method, 7) == (32, "Task 7 not found")
    for method in ("ack", "release"):
        assert t.error(method, 0) == (32, "Task was not taken")
        assert t.error(method, 7) == (32, "Task was not taken")
    assert t.error("touch", 0, 1) == (32, "Task was not taken")  # checked before the driver
    assert t.error("peek", "zero") == (
        18,
        "Supplied key type of part 0 does not match index part type: expected unsigned",
    )
    assert t.peek(0.0) == [[0, "r", "a"]]
    assert t.error("take", "1") == (32, "attempt to compare string with number")
    field = {"fifo": 3, "utube": 4, "fifottl": 8, "limfifottl": 8, "utubettl": 9}[type_]
    assert t.error("put") == (39, f"Tuple field {field} required by space format is missing")
    assert t.error("kick", "x") == (32, "'for' limit must be a number")
    t.take(0)
    if type_ not in TTL_DRIVERS:
        assert t.error("touch", 0, 1) == (32, f"{type_} queue does not support touch")
        assert conn.call("queue.statistics", t.name).data[0]["calls"]["touch"] == 1


def test_on_task_change_over_the_wire_is_never_a_silent_no_op(conn: tarantool.Connection) -> None:
    # A Lua function cannot come over the wire: a plugin's callback by name, or an error.
    t = new_tube(conn, "fifo")
    assert t.on_task_change() == [None]  # nothing was bound, nothing is
    assert t.error("on_task_change", "nosuch") == (
        32,
        "on_task_change: no callback named 'nosuch' (plugins name them)",
    )
    code, message = t.error("on_task_change", {"fn": "function() end"})
    assert code == 32 and "takes the name of a callback a plugin registered" in message
    assert t.put("x") == [[0, "r", "x"]]


def test_take_timeouts(conn: tarantool.Connection) -> None:
    t = new_tube(conn, "fifo")
    assert t.take(0) == []
    assert t.take(-1) == []
    assert t.take(0.05) == []
    t.put("x")
    assert t.take(0.05) == [[0, "t", "x"]]


def test_explicit_nil_opts_mean_no_options(conn: tarantool.Connection) -> None:
    # Upstream fails here on every ttl driver (QUEUE.md §10 #5); queuebox deliberately does not.
    t = new_tube(conn, "fifottl")
    assert t.put("x", None) == [[0, "r", "x"]]
    assert t.take(0) == [[0, "t", "x"]]
    assert t.release(0, None) == [[0, "r", "x"]]


@pytest.mark.parametrize("type_", TTL_DRIVERS)
def test_ttl_driver_options(conn: tarantool.Connection, type_: str) -> None:
    t = new_tube(conn, type_)
    assert t.put("later", {"delay": 60}) == [[0, "~", "later"]]
    assert t.take(0) == []
    assert t.put("now", {"ttl": 60, "ttr": 30, "pri": 3}) == [[1, "r", "now"]]
    assert t.take(0) == [[1, "t", "now"]]
    assert t.touch(1, 0) == []
    assert t.touch(1) == []
    assert t.touch(1, 1.5) == [[1, "t", "now"]]
    assert t.error("touch", 1, 4e9) == (
        95,
        "Integer overflow when performing '+' operation on field 3",
    )
    assert t.release(1, {"delay": 60}) == [[1, "~", "now"]]
    assert t.error("put", "x", {"pri": -1}) == (
        23,
        "Tuple field 6 type does not match one required by operation: expected unsigned",
    )
    assert t.error("put", "x", {"ttl": "long"}) == (32, "attempt to compare string with number")


def test_priority_order(conn: tarantool.Connection) -> None:
    t = new_tube(conn, "fifottl")
    for pri in (5, 1, 0, 1, 9):
        t.put(pri, {"pri": pri})
    assert [t.take(0)[0][0] for _ in range(5)] == [2, 1, 3, 0, 4]


def test_fifo_put_ignores_delay_and_release_honours_it(conn: tarantool.Connection) -> None:
    t = new_tube(conn, "fifo")
    assert t.put("x", {"delay": 60}) == [[0, "r", "x"]]  # as the module: put takes no options
    assert t.take(0) == [[0, "t", "x"]]
    # The module ignores it (a failing consumer spins); queuebox delays (QUEUE.md §10 #6).
    assert t.release(0, {"delay": 0.2}) == [[0, "~", "x"]]
    assert t.take(0) == []
    assert t.take(5) == [[0, "t", "x"]]


def test_limfifottl_put_into_a_full_tube_answers_nil(
    conn: tarantool.Connection, conn16: tarantool.Connection
) -> None:
    t = new_tube(conn, "limfifottl", {"capacity": 1})
    assert t.put("a") == [[0, "r", "a"]]
    assert t.put("b") == [None]
    assert conn16.call(f"queue.tube.{t.name}:put", "b").data == [[None]]
    stats = conn.call("queue.statistics", t.name).data[0]
    assert stats["calls"]["put"] == 1 and stats["tasks"]["total"] == 1


def test_drop_refuses_taken_tasks_and_waiting_consumers(
    server: ServerProc, conn: tarantool.Connection
) -> None:
    t = new_tube(conn, "fifo")
    t.put("x")
    t.take(0)
    assert t.error("drop") == (32, "There are taken tasks in the tube")
    t.ack(0)
    with RawClient(server.port) as other:
        # A take waiting on another connection is a connected consumer; the ping's reply
        # comes after the take has registered its wait.
        other.request(CALL, {0x22: f"queue.tube.{t.name}:take", 0x21: [10]})
        assert other.roundtrip(PING).code == 0
        assert t.error("drop") == (32, "There are consumers connected the tube")

    def dropped() -> bool:  # refused as busy until the server has seen the close
        answer = drop_or_error(t)
        assert answer in ([True], (32, "There are consumers connected the tube"))
        return answer == [True]

    wait_for(dropped, "the drop, once the waiting take's connection closed", timeout=5)


def drop_or_error(t: Tube) -> list[Any] | tuple[int, str]:
    try:
        return t.drop()  # type: ignore[no-any-return]
    except DatabaseError as exc:
        return exc.code, exc.message


# --- CALL_16 shapes (QUEUE.md §1) --------------------------------------------------------


def test_call16_shapes(conn16: tarantool.Connection) -> None:
    t = Tube(conn16, tube_of(conn16, "fifottl"))
    assert t.put("x") == [[0, "r", "x"]]
    assert t.take(0) == [[0, "t", "x"]]
    assert t.take(0) == []
    assert t.release(0) == [[0, "r", "x"]]
    assert t.bury(0) == [[0, "!", "x"]]
    assert t.kick(1) == [[1]]
    assert t.kick(0) == [[0]]
    assert t.truncate() == []
    assert conn16.call("queue.tube", t.name).data == [[True]]
    (names,) = conn16.call("queue.tube").data  # one array of names: one tuple
    assert t.name in names and all(isinstance(n, str) for n in names)
    assert error_of(conn16, f"queue.tube.{t.name}:peek", 0) == (32, "Task 0 not found")
