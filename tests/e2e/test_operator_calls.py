"""`queuebox.release` and `queuebox.kick_task` over IPROTO, with
tarantool-python, and the tube rights of `queuebox.tasks`, `queuebox.release`
and `queuebox.kick_task`: what an operator's tools (and the console, as the
logged-in user) call."""

from __future__ import annotations

from typing import Any

import pytest
import tarantool

from tests.e2e.serverproc import USERS_TOML, ServerProc, StartServer, login_tester, unique

ER_ACCESS_DENIED, ER_PROC_LUA = 42, 32


def error_of(call: Any) -> tuple[int, str]:
    with pytest.raises(tarantool.DatabaseError) as failed:
        call()
    return failed.value.args[0], failed.value.args[1]


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
    assert (
        error_of(lambda: conn.call("queuebox.release", "nosuch", 0))[1] == "Tube 'nosuch' not found"
    )
    stats = conn.call("queue.statistics", tube).data[0]
    assert stats["tasks"]["ready"] == 1 and stats["calls"]["release"] == 1


def test_release_is_a_write_and_tasks_a_read_on_their_tube(
    start_server: StartServer,
) -> None:
    toml = USERS_TOML + '\n[users.jobber]\npassword = "jobpw"\nwrite = ["jobs*"]\n'
    server = start_server(toml=toml)
    conn = login_tester(server.port)
    jobber = login_tester(server.port, user="jobber", password="jobpw")
    try:
        for tube in ("jobs_b", "mail_b"):
            conn.call("queue.create_tube", tube, "fifo", {})
            conn.call(f"queue.tube.{tube}:put", "x")
        (taken,) = conn.call("queue.tube.jobs_b:take", 0).data
        assert jobber.call("queuebox.tasks", "jobs_b").data[0]["tasks"][0]["state"] == "taken"
        assert jobber.call("queuebox.release", "jobs_b", taken[0]).data[0][1] == "r"
        conn.call("queue.tube.mail_b:bury", 0)
        for call in ("queuebox.tasks", "queuebox.release", "queuebox.kick_task"):
            code, text = error_of(lambda c=call: jobber.call(c, "mail_b", 0))  # type: ignore[misc]
            assert (code, text) == (
                ER_ACCESS_DENIED,
                f"Execute access to function '{call}' is denied for user 'jobber'",
            )
    finally:
        conn.close()
        jobber.close()


@pytest.mark.parametrize("driver", ["fifo", "fifottl", "utube", "utubettl"])
def test_kick_task_kicks_that_buried_task_only(server: ServerProc, conn: Any, driver: str) -> None:
    tube = unique("kicked")
    conn.call("queue.create_tube", tube, driver, {"max_attempts": 1, "backoff": 0})
    for n in range(4):
        conn.call(f"queue.tube.{tube}:put", f"job {n}")
    (first,) = conn.call(f"queue.tube.{tube}:take", 0).data
    conn.call(f"queue.tube.{tube}:release", first[0])  # its only attempt: buried
    for task_id in (1, 2):
        conn.call(f"queue.tube.{tube}:bury", task_id)
    listed = conn.call("queuebox.tasks", tube, {"id": 0}).data[0]["tasks"][0]
    assert listed["attempts"] == 1 and listed["reason"]
    # Not the first buried one in kick order: task 2, then task 0.
    assert conn.call("queuebox.kick_task", tube, 2).data == [[2, "r", "job 2"]]
    assert [status_of(conn, tube, n) for n in range(4)] == ["!", "!", "r", "r"]
    assert conn.call("queuebox.kick_task", tube, 0).data == [[0, "r", "job 0"]]
    listed = conn.call("queuebox.tasks", tube, {"id": 0}).data[0]["tasks"][0]
    assert listed["attempts"] == 0 and "reason" not in listed  # a fresh start, as kick gives
    stats = conn.call("queue.statistics", tube).data[0]
    assert stats["tasks"]["buried"] == 1 and stats["calls"]["kick"] == 2
    # A kicked task is taken again like any ready one.
    assert conn.call(f"queue.tube.{tube}:take", 0).data[0][0] == 0
    assert error_of(lambda: conn.call("queuebox.kick_task", tube, 2))[1] == "Task was not buried"
    assert error_of(lambda: conn.call("queuebox.kick_task", tube, 99))[1] == "Task 99 not found"
    assert error_of(lambda: conn.call("queuebox.kick_task", "nosuch", 0))[1] == (
        "Tube 'nosuch' not found"
    )


def status_of(conn: Any, tube: str, task_id: int) -> str:
    return str(conn.call(f"queue.tube.{tube}:peek", task_id).data[0][1])
