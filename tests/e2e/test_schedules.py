"""Schedules against a real server (queuebox.schedule and co.): an interval fires
into its tube, pause/resume/delete, rights, a kill -9 right after a tick fires
no tick twice, and after a downtime `skip` drops the missed ticks while
`catch_up` puts one task for them. Waits are on the tube's task count or the
wall clock passing a tick, never a fixed sleep."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from typing import Any

import pytest
import tarantool

from queuebox.clients import ScheduleNotFound, blocking
from tests.e2e.client_targets import free_port
from tests.e2e.cluster import connect
from tests.e2e.serverproc import (
    REPO,
    USERS_TOML,
    ServerProc,
    StartServer,
    clean_env,
    login_tester,
    unique,
)
from tests.e2e.test_cli_client import queuebox
from tests.waiting import metric, wait_for

ER_ACCESS_DENIED, ER_PROC_LUA = 42, 32
EXIT_USAGE, EXIT_NOT_FOUND = 2, 4


def as_json(*args: str, env: dict[str, str]) -> Any:
    done = queuebox(*args, "--json", env=env)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def count(conn: Any, tube: str) -> int:
    return int(conn.call("queue.statistics", tube).data[0]["tasks"]["total"])


def drain(conn: Any, tube: str) -> list[dict[str, Any]]:
    """The data of every task in `tube`, taken and acked, oldest first."""
    found = []
    while (got := conn.call(f"queue.tube.{tube}:take", 0).data) and got[0] is not None:
        found.append(got[0][2])
        conn.call(f"queue.tube.{tube}:ack", got[0][0])
    return found


def listed(conn: Any, name: str) -> dict[str, Any]:
    (shown,) = conn.call("queuebox.schedules", name).data[0]
    return shown  # type: ignore[no-any-return]


def error_of(call: Any) -> tuple[int, str]:
    with pytest.raises(tarantool.DatabaseError) as failed:
        call()
    return failed.value.args[0], failed.value.args[1]


def test_an_interval_fires_pauses_resumes_and_goes(server: ServerProc, conn: Any) -> None:
    tube, name = unique("beat"), unique("every")
    conn.call("queue.create_tube", tube, "fifottl", {})
    made = conn.call("queuebox.schedule", name, tube, {"every": 0.2, "data": {"n": 1}}).data[0]
    assert (made["name"], made["tube"], made["state"], made["every"]) == (name, tube, "active", 0.2)
    assert made["tz"] == "UTC" and made["missed"] == "skip"
    wait_for(lambda: count(conn, tube) >= 2, what="two ticks put")
    first, second = drain(conn, tube)[:2]
    assert first["schedule"] == name and first["data"] == {"n": 1} and first["ticks"] == 1
    assert round(second["tick"] - first["tick"], 6) == 0.2
    paused = conn.call("queuebox.schedule_pause", name).data[0]
    assert paused["state"] == "paused" and paused["next_tick"] is None
    drain(conn, tube)
    fired = listed(conn, name)["fired"]
    # Paused: while a marker schedule of the same interval fires three times
    # (the timer runs), the paused one puts nothing and counts nothing.
    marker_tube, marker = unique("marker"), unique("marker")
    conn.call("queue.create_tube", marker_tube, "fifo", {})
    conn.call("queuebox.schedule", marker, marker_tube, {"every": 0.2})
    wait_for(lambda: count(conn, marker_tube) >= 3, what="three marker ticks")
    conn.call("queuebox.schedule_delete", marker)
    later = listed(conn, name)
    assert count(conn, tube) == 0 and later["fired"] == fired and later["missed_ticks"] == 0
    resumed_at = time.time()
    assert conn.call("queuebox.schedule_resume", name).data[0]["state"] == "active"
    wait_for(lambda: count(conn, tube) >= 1, what="a tick after the resume")
    assert drain(conn, tube)[0]["tick"] > resumed_at
    assert conn.call("queuebox.schedule_delete", name).data[0]["name"] == name
    assert conn.call("queuebox.schedules", name).data == [[]]
    assert error_of(lambda: conn.call("queuebox.schedule_pause", name)) == (
        ER_PROC_LUA,
        f"Schedule '{name}' not found",
    )


def test_bad_specs_are_refused_with_the_reason(server: ServerProc, conn: Any) -> None:
    name = unique("bad")
    assert error_of(lambda: conn.call("queuebox.schedule", name, "t", {"cron": "* * *"})) == (
        ER_PROC_LUA,
        "Invalid schedule: '* * *' has 3 fields, a cron expression has 5",
    )
    assert conn.call("queuebox.schedules", name).data == [[]]


def test_managing_a_schedule_needs_write_on_its_tube(start_server: StartServer) -> None:
    toml = USERS_TOML + '\n[users.jobber]\npassword = "jobpw"\nwrite = ["jobs*"]\n'
    server = start_server(toml=toml)
    with connect(server) as conn:
        jobber = login_tester(server.port, user="jobber", password="jobpw")
        try:
            spec = {"cron": "0 0 1 1 *"}
            assert jobber.call("queuebox.schedule", "mine", "jobs_a", spec).data[0]["name"]
            conn.call("queuebox.schedule", "theirs", "mail", spec)
            assert [s["name"] for s in jobber.call("queuebox.schedules").data[0]] == ["mine"]
            assert len(conn.call("queuebox.schedules").data[0]) == 2
            for call, args in (
                ("queuebox.schedule", ("mine", "mail", spec)),
                ("queuebox.schedule", ("theirs", "jobs_a", spec)),
                ("queuebox.schedule_pause", ("theirs",)),
                ("queuebox.schedule_delete", ("theirs",)),
            ):
                assert error_of(lambda c=call, a=args: jobber.call(c, *a)) == (  # type: ignore[misc]
                    ER_ACCESS_DENIED,
                    f"Execute access to function '{call}' is denied for user 'jobber'",
                )
            assert jobber.call("queuebox.schedule_delete", "mine").data[0]["name"] == "mine"
        finally:
            jobber.close()


def test_a_kill_right_after_a_tick_fires_no_tick_twice(start_server: StartServer) -> None:
    server = start_server()
    tube, name = unique("killed"), unique("beat")
    with connect(server) as conn:
        conn.call("queue.create_tube", tube, "fifo", {})
        conn.call("queuebox.schedule", name, tube, {"every": 0.2, "missed": "catch_up"})
        wait_for(lambda: count(conn, tube) >= 3, what="three ticks put")
    server.restart(kill=True)  # SIGKILL within a tick of the last put
    with connect(server) as conn:
        before = count(conn, tube)
        wait_for(lambda: count(conn, tube) >= before + 2, what="two ticks after the restart")
        conn.call("queuebox.schedule_pause", name)
        found = drain(conn, tube)
        shown = listed(conn, name)
    ticks = [round(t["tick"] * 5) for t in found]  # in fifths of a second: whole numbers
    assert len(set(ticks)) == len(ticks), f"a tick fired twice: {ticks}"
    assert ticks == sorted(ticks)
    # catch_up: every tick from the first to the last is in exactly one task.
    assert sum(t["ticks"] for t in found) == ticks[-1] - ticks[0] + 1
    assert shown["fired"] == len(found) and shown["missed_ticks"] == 0


@pytest.mark.parametrize("missed", ["skip", "catch_up"])
def test_ticks_missed_while_down(start_server: StartServer, missed: str) -> None:
    """Also: /metrics counts what the schedule fired and missed, as listed."""
    port = free_port()
    server = start_server("--metrics-listen", f"127.0.0.1:{port}")
    tube, name = unique("down"), unique("beat")
    with connect(server) as conn:
        conn.call("queue.create_tube", tube, "fifo", {})
        conn.call("queuebox.schedule", name, tube, {"every": 0.2, "missed": missed})
        wait_for(lambda: count(conn, tube) >= 1, what="a tick put")
    assert server.stop() == 0
    down_until = time.time() + 1.0
    wait_for(lambda: time.time() > down_until, what="a second of downtime")
    server.start()
    with connect(server) as conn:
        wait_for(lambda: listed(conn, name)["last_tick"] > down_until, what="a tick after")
        conn.call("queuebox.schedule_pause", name)
        found = drain(conn, tube)
        shown = listed(conn, name)
    ticks = [round(t["tick"] * 5) for t in found]
    assert len(set(ticks)) == len(ticks) and shown["fired"] == len(found)
    covered = sum(t["ticks"] for t in found)
    span = ticks[-1] - ticks[0] + 1
    if missed == "skip":
        # Each tick of the downtime is dropped and counted; none is put.
        assert all(t["ticks"] == 1 for t in found)
        assert shown["missed_ticks"] >= 5 and covered + shown["missed_ticks"] == span
    else:
        # The downtime's ticks come as one task (a start slowed by a loaded machine may
        # hold the timer back long enough for a second late task).
        assert max(t["ticks"] for t in found) >= 5
        assert covered == span and shown["missed_ticks"] == 0
    labels = {"schedule": name, "tube": tube}
    assert metric(port, "queuebox_schedule_fired_total", **labels) == shown["fired"]
    assert metric(port, "queuebox_schedule_missed_ticks_total", **labels) == shown["missed_ticks"]
    assert metric(port, "queuebox_schedules", state="paused") == 1


def test_the_cli_adds_lists_pauses_resumes_and_deletes(
    server: ServerProc, conn: Any, env: dict[str, str]
) -> None:
    tube, name = unique("cli"), unique("nightly")
    conn.call("queue.create_tube", tube, "fifottl", {})
    made = as_json(
        "schedule", "add", name, tube, "--cron", "30 2 * * mon-fri", "--tz", "Europe/Berlin",
        "--data", '{"job": "report"}', "--missed", "catch_up", "--pri", "2", env=env,
    )  # fmt: skip
    assert (made["cron"], made["tz"], made["missed"]) == (
        "30 2 * * mon-fri",
        "Europe/Berlin",
        "catch_up",
    )
    assert made["data"] == {"job": "report"} and made["opts"] == {"pri": 2}
    listed_ = as_json("schedule", "list", name, env=env)
    assert [s["name"] for s in listed_] == [name] and listed_[0]["next_tick"] > time.time()
    text = queuebox("schedule", "list", env={**env, "COLUMNS": "200"}).stdout
    assert text.splitlines()[0].split()[:4] == ["name", "tube", "when", "state"]
    assert name in text and "cron 30 2 * * mon-fri Europe/Berlin" in text
    assert as_json("schedule", "pause", name, env=env)["state"] == "paused"
    assert as_json("schedule", "resume", name, env=env)["state"] == "active"
    assert as_json("schedule", "delete", name, env=env)["name"] == name
    gone = queuebox("schedule", "pause", name, "--json", env=env)
    assert gone.returncode == EXIT_NOT_FOUND
    assert json.loads(gone.stdout or gone.stderr)["error"] == f"Schedule '{name}' not found"
    assert queuebox("schedule", "list", name, env=env).returncode == EXIT_NOT_FOUND
    bad = queuebox("schedule", "add", name, tube, env=env)
    assert bad.returncode == EXIT_USAGE and "one of --cron and --every" in bad.stderr


def test_the_bundled_client_manages_schedules(server: ServerProc) -> None:
    tube, name = unique("client"), unique("beat")
    with blocking.connect(port=server.port, user="tester", password="secret") as client:
        client.create_tube(tube, "fifo")
        made = client.schedule(name, tube, every=0.2, data=[1, 2])
        assert made["every"] == 0.2 and made["data"] == [1, 2]
        task = client.tube(tube).take(timeout=5)
        assert task is not None and task.data["schedule"] == name
        assert client.schedule_pause(name)["state"] == "paused"
        assert [s["name"] for s in client.schedules(name)] == [name]
        assert client.schedule_resume(name)["state"] == "active"
        client.schedule_delete(name)
        with pytest.raises(ScheduleNotFound):
            client.schedule_delete(name)


def test_the_example_of_docs_workers_runs(server: ServerProc) -> None:
    """docs/workers.md's schedule example, on this server, every=0.2 for speed: its
    worker prints the ticks it handles; SIGTERM stops it (exit 0)."""
    doc = (REPO / "docs" / "workers.md").read_text()
    section = doc[doc.index("## Schedules (periodic tasks)") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    text = code.group(1).replace("port=3301", f"port={server.port}")
    text = text.replace("every=10", "every=0.2")
    env = {**clean_env(), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", text]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO) as proc:
        try:
            assert proc.stdout is not None
            lines = iter(proc.stdout.readline, "")
            first = next(line for line in lines if " for the tick at " in line)
            assert first.startswith("ping for the tick at ") and first.endswith(" covering 1\n")
        finally:
            proc.terminate()
            assert proc.wait(timeout=30) == 0
    with connect(server) as conn:
        for name in ("nightly", "heartbeat"):
            conn.call("queuebox.schedule_delete", name)
