"""`queuebox.tasks` and `queuebox.release` over IPROTO, with tarantool-python:
what an operator's tools (and the console, as the logged-in user) call."""

from __future__ import annotations

from typing import Any

import pytest
import tarantool

from tests.e2e.serverproc import ServerProc, login_tester, unique

ER_ACCESS_DENIED, ER_PROC_LUA = 42, 32


def error_of(call: Any) -> tuple[int, str]:
    with pytest.raises(tarantool.DatabaseError) as failed:
        call()
    return failed.value.args[0], failed.value.args[1]


def test_tasks_lists_a_tube_by_state_a_page_at_a_time(conn: Any) -> None:
    tube = unique("listed")
    conn.call("queue.create_tube", tube, "utubettl", {})
    for n in range(6):
        conn.call(f"queue.tube.{tube}:put", {"n": n}, {"utube": f"u{n % 2}", "pri": 5 - n})
    conn.call(f"queue.tube.{tube}:bury", 4)
    (page,) = conn.call("queuebox.tasks", tube, {"state": "ready", "limit": 2}).data
    assert page["total"] == 5 and page["offset"] == 0
    # Within a state, in the order take follows: priority, then id.
    assert [t["task_id"] for t in page["tasks"]] == [5, 3]
    assert page["tasks"][0]["utube"] == "u1" and page["tasks"][0]["data"] == {"n": 5}
    (rest,) = conn.call("queuebox.tasks", tube, {"state": "ready", "offset": 2}).data
    assert [t["task_id"] for t in rest["tasks"]] == [2, 1, 0]
    (buried,) = conn.call("queuebox.tasks", tube, {"state": "buried"}).data
    assert [(t["task_id"], t["status"]) for t in buried["tasks"]] == [(4, "!")]
    (every,) = conn.call("queuebox.tasks", tube).data
    assert [t["task_id"] for t in every["tasks"]] == list(range(6))
    assert error_of(lambda: conn.call("queuebox.tasks", "nosuch")) == (
        ER_PROC_LUA,
        "Tube nosuch not found",
    )
    code, text = error_of(lambda: conn.call("queuebox.tasks", tube, {"state": "gone"}))
    assert code == ER_PROC_LUA and text.startswith("Unknown state gone")


def test_release_gives_back_a_task_another_session_holds(server: ServerProc, conn: Any) -> None:
    tube = unique("held")
    conn.call("queue.create_tube", tube, "fifottl", {})
    conn.call(f"queue.tube.{tube}:put", "job")
    worker = login_tester(server.port)
    try:
        (task,) = worker.call(f"queue.tube.{tube}:take", 0).data
        # The module's own release is the taker's alone.
        assert error_of(lambda: conn.call(f"queue.tube.{tube}:release", task[0])) == (
            ER_PROC_LUA,
            "Task was not taken",
        )
        assert conn.call("queuebox.release", tube, task[0]).data == [[task[0], "r", "job"]]
        # The worker no longer holds it.
        assert error_of(lambda: worker.call(f"queue.tube.{tube}:ack", task[0]))[1] == (
            "Task was not taken"
        )
    finally:
        worker.close()
    assert error_of(lambda: conn.call("queuebox.release", tube, task[0]))[1] == "Task was not taken"
    assert error_of(lambda: conn.call("queuebox.release", tube, 99))[1] == "Task 99 not found"
    stats = conn.call("queue.statistics", tube).data[0]
    assert stats["tasks"]["ready"] == 1 and stats["calls"]["release"] == 1


def test_release_is_a_write_and_tasks_a_read(server: ServerProc, conn: Any) -> None:
    tube = unique("rights")
    conn.call("queue.create_tube", tube, "fifo", {})
    reader = login_tester(server.port, user="reader", password="readpw")
    try:
        assert reader.call("queuebox.tasks", tube).data[0]["total"] == 0
        code, _ = error_of(lambda: reader.call("queuebox.release", tube, 0))
        assert code == ER_ACCESS_DENIED
    finally:
        reader.close()
