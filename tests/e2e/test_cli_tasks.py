"""The operator's commands through the real `queuebox` command: tasks, ack, release, bury,
kick, delete, truncate, tube-options; --json everywhere, errors included; stdin input;
tables that fit; quiet in pipes and on Ctrl-C (bench too); pipeline load's early check."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
import tarantool

from tests.e2e.client_targets import unique
from tests.e2e.serverproc import REPO, ServerProc, login_tester
from tests.e2e.test_cli_client import queuebox


def ok(*args: str, env: dict[str, str], stdin: str | None = None) -> str:
    done = queuebox(*args, env=env, stdin=stdin)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def as_json(*args: str, env: dict[str, str]) -> Any:
    return json.loads(ok(*args, "--json", env=env))


@pytest.fixture
def consumer(server: ServerProc) -> Iterator[tarantool.Connection]:
    """Another client (tarantool-python): the one that holds taken tasks."""
    with closing(login_tester(server.port)) as conn:
        yield conn


def test_tasks_lists_by_state_and_pages(env: dict[str, str]) -> None:
    tube = unique("list")
    ok("create-tube", tube, "fifottl", env=env)
    lines = "\n".join(json.dumps({"n": n}) for n in range(5)) + "\n\n"
    put = ok("put", tube, "-", "--pri", "1", env=env, stdin=lines)  # a task per line
    assert [line.split("\t")[0] for line in put.splitlines()] == ["0", "1", "2", "3", "4"]
    ok("bury", tube, "3", "--reason", "bad row", env=env)
    page = as_json("tasks", tube, "--state", "ready", "--limit", "2", env=env)
    assert [t["id"] for t in page["tasks"]] == [0, 1] and page["next"] == [1, 1]
    rest = as_json("tasks", tube, "--state", "ready", "--after", json.dumps(page["next"]), env=env)
    assert [t["id"] for t in rest["tasks"]] == [2, 4]
    buried = as_json("tasks", tube, "--state", "buried", env=env)["tasks"]
    assert (buried[0]["id"], buried[0]["reason"], buried[0]["data"]) == (3, "bad row", {"n": 3})
    text = queuebox("tasks", tube, "--limit", "2", env={**env, "COLUMNS": "60"})
    header, *rows = text.stdout.splitlines()
    assert header.split() == ["id", "state", "attempts", "next", "data"]
    assert len(rows) == 2 and all(len(line) <= 60 for line in text.stdout.splitlines())
    assert "--after '[1]'" in text.stderr
    every = ok("tasks", tube, "--all", "--limit", "2", env={**env, "COLUMNS": "200"})
    assert [line.split()[0] for line in every.splitlines() if line[0].isdigit()] == [
        "0", "1", "2", "3", "4"
    ]  # fmt: skip


def test_ack_and_release_act_for_the_consumer_holding_the_task(
    env: dict[str, str], consumer: tarantool.Connection
) -> None:
    tube = unique("hold")
    ok("create-tube", tube, "fifo", env=env)
    ok("put", tube, "a", env=env)
    ok("put", tube, "b", env=env)
    assert consumer.call(f"queue.tube.{tube}:take", 0).data[0][0] == 0
    assert consumer.call(f"queue.tube.{tube}:take", 0).data[0][0] == 1
    assert as_json("release", tube, "0", "--delay", "30", env=env)["status"] == "delayed"
    assert as_json("ack", tube, "1", env=env) == {"id": 1, "status": "done", "data": "b"}
    not_taken = queuebox("ack", tube, "0", env=env)
    assert not_taken.returncode == 2
    assert "task 0 is delayed: only a taken task is acked or released" in not_taken.stderr
    assert queuebox("ack", tube, "7", env=env).returncode == 4


def test_bury_kick_delete_and_truncate(env: dict[str, str]) -> None:
    tube = unique("ops")
    ok("create-tube", tube, "utube", env=env)
    for n in range(4):
        ok("put", tube, str(n), "--utube", str(n), env=env)
    for task_id in ("0", "1", "2"):
        ok("bury", tube, task_id, env=env)
    assert as_json("kick", tube, env=env) == {"kicked": 1}
    assert ok("kick", tube, "--all", env=env).strip() == "kicked 2"
    assert as_json("delete", tube, "2", env=env)["status"] == "done"
    refused = queuebox("truncate", tube, env=env, stdin="")  # no terminal to ask: refused
    assert refused.returncode == 2 and "add --yes" in refused.stderr
    assert as_json("stats", tube, env=env)["tasks"]["total"] == 3
    assert as_json("truncate", tube, "--yes", env=env) == {"truncated": tube, "tasks": 3}
    assert as_json("stats", tube, env=env)["tasks"]["total"] == 0


def test_delete_all_asks_first_and_keeps_to_its_state(env: dict[str, str]) -> None:
    tube = unique("purge")
    ok("create-tube", tube, "fifo", env=env)
    for n in range(5):
        ok("put", tube, str(n), env=env)
    for task_id in ("1", "3"):
        ok("bury", tube, task_id, env=env)
    refused = queuebox("delete", tube, "--all", "--state", "buried", env=env)  # stdin: null
    assert refused.returncode == 2, refused
    assert refused.stderr == (
        f"queuebox delete: delete 2 buried task(s) of tube {tube!r}? Nobody to ask here: "
        "add --yes\n"
    )
    assert as_json("stats", tube, env=env)["tasks"]["buried"] == 2
    done = as_json("delete", tube, "--all", "--state", "buried", "--yes", env=env)
    assert done == {"tube": tube, "state": "buried", "deleted": 2}
    tasks = as_json("stats", tube, env=env)["tasks"]
    assert (tasks["buried"], tasks["ready"]) == (0, 3)
    assert ok("delete", tube, "--all", "--yes", env=env).strip() == "deleted 3 task(s)"
    assert as_json("stats", tube, env=env)["tasks"]["total"] == 0
    for args in (["0", "--all"], [], ["0", "--state", "ready"]):
        usage = queuebox("delete", tube, *args, "--yes", env=env)
        assert usage.returncode == 2 and "give a task ID, or --all" in usage.stderr, args


def test_tube_options_show_and_change_the_retry_policy(env: dict[str, str]) -> None:
    tube = unique("opts")
    ok("create-tube", tube, "fifo", "--opt", "max_attempts=3", env=env)
    assert ok("tube-options", tube, env=env).strip() == "max_attempts 3, backoff 1, backoff_max 60"
    changed = as_json("tube-options", tube, "--backoff", "2", "--backoff-max", "10", env=env)
    assert changed == {"max_attempts": 3, "backoff": 2.0, "backoff_max": 10.0}
    ok("tube-options", tube, "--max-attempts", "0", "--backoff", "0", env=env)
    assert ok("tube-options", tube, env=env).startswith("no retry options")


@pytest.mark.parametrize(
    "args",
    [["tasks", "{t}"], ["ack", "{t}", "0"], ["release", "{t}", "0"], ["bury", "{t}", "0"],
     ["kick", "{t}"], ["delete", "{t}", "0"], ["truncate", "{t}", "--yes"],
     ["tube-options", "{t}"], ["stats", "{t}"], ["put", "{t}", "x"], ["peek", "{t}", "0"]],
)  # fmt: skip
def test_every_command_answers_json_errors_too(env: dict[str, str], args: list[str]) -> None:
    name = unique("nosuch")
    done = queuebox(*[a.format(t=name) for a in args], "--json", env=env)
    assert done.returncode == 4, done
    assert json.loads(done.stderr) == {"error": f"tube {name!r} does not exist", "exit": 4}
    assert done.stdout == ""


def test_json_before_the_command_and_usage_errors_as_json(env: dict[str, str]) -> None:
    assert isinstance(as_json("stats", env=env), dict | list)
    assert isinstance(json.loads(ok("--json", "stats", env=env)), dict | list)
    usage = queuebox("--json", "tasks", "t", "--limit", "0", env=env)
    assert usage.returncode == 2
    assert json.loads(usage.stderr)["error"].startswith("--limit: expected an integer >= 1")
    unknown = queuebox("--json", "nosuch", env=env)
    assert json.loads(unknown.stderr) == {"error": "unknown command 'nosuch'", "exit": 2}


def test_the_stats_table_fits_the_terminal(env: dict[str, str]) -> None:
    tube = unique("wide")
    ok("create-tube", tube, "fifo", env=env)
    narrow = ok("stats", tube, env={**env, "COLUMNS": "70"})
    assert all(len(line) <= 70 for line in narrow.splitlines())
    assert narrow.split()[:7] == ["tube", "ready", "taken", "delayed", "buried", "done", "total"]
    piped = ok("stats", tube, env=env)  # not a terminal, no COLUMNS: every column
    assert piped.splitlines()[0].split()[-1] == "delay"


def test_a_reader_that_leaves_is_not_an_error(env: dict[str, str]) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("QUEUEBOX_")}
    command = (
        f"{sys.executable} -m queuebox stats | true; {sys.executable} -m queuebox tubes | head -c 1"
    )
    done = subprocess.run(
        ["sh", "-c", command], cwd=REPO, env={**clean, **env}, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == ""


def wait_for_a_socket(pid: int, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        fds = f"/proc/{pid}/fd"
        try:
            if any(os.readlink(f"{fds}/{fd}").startswith("socket:") for fd in os.listdir(fds)):
                return
        except OSError:
            pass  # an fd closed while we looked
        time.sleep(0.05)
    raise AssertionError(f"process {pid} opened no socket in {seconds} s")


def interruptible() -> None:
    """In the child, before exec: SIGINT as a terminal gives it. A shell without job
    control starts background commands with SIGINT ignored, that is inherited, and a
    Python started so never raises KeyboardInterrupt (a CI run from `cmd &` did)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_ends_a_waiting_take_quietly(env: dict[str, str]) -> None:
    tube = unique("wait")
    ok("create-tube", tube, "fifo", env=env)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("QUEUEBOX_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "queuebox", "take", tube, "--timeout", "60"],
        cwd=REPO, env={**clean, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, preexec_fn=interruptible,
    )  # fmt: skip
    wait_for_a_socket(proc.pid)  # Python started (slowly, on a busy machine) and connected
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out, err) == (130, "", "\n")


def test_ctrl_c_in_bench_drops_its_tube_without_tracebacks(env: dict[str, str]) -> None:
    tube = unique("bench")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("QUEUEBOX_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "queuebox", "bench", "take-ack", "--tasks", "5000000",
         "--tube", tube, "--processes", "2", "--max-time", "120"],
        cwd=REPO, env={**clean, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, preexec_fn=interruptible,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while tube not in ok("tubes", env=env).split() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)  # into the put phase
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert f"interrupted; tube {tube!r} dropped" in err
    assert tube not in ok("tubes", env=env).split()


def test_pipeline_load_of_a_missing_tube_fails_before_spark(env: dict[str, str]) -> None:
    done = queuebox("pipeline", "load", "--input", "nowhere", "--tube", "nosuch", env=env)
    assert done.returncode == 4
    assert "tube 'nosuch' does not exist" in done.stderr and "--create-tube" in done.stderr
    assert "Spark" not in done.stderr and "Traceback" not in done.stderr
