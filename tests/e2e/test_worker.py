"""`queuebox worker` and the worker library against a real server: a function per task
with concurrency, failures tried again with growing waits and then buried, a stop that
leaves no task lost or taken, a worker started before its server."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from queuebox.clients import aio, blocking, worker
from tests.e2e.client_targets import free_port
from tests.e2e.serverproc import REPO, ServerProc, StartServer, clean_env, unique
from tests.waiting import wait_for, wait_for_async

FUNCTIONS = "tests.e2e.worker_functions"


class WorkerProc:
    """`queuebox worker` as a subprocess; its log is kept in a file. Always stopped."""

    def __init__(self, workdir: Path, port: int, target: str, *flags: str) -> None:
        self.record = workdir / "record.txt"
        self.log_path = workdir / "worker.log"
        env = clean_env() | {"WORKER_RECORD": str(self.record)}
        command = [
            sys.executable, "-m", "queuebox", "worker", f"{FUNCTIONS}:{target}",
            "--port", str(port), "--user", "tester", "--password", "secret", *flags,
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                command, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )

    def events(self) -> list[str]:
        return self.record.read_text().splitlines() if self.record.exists() else []

    def log(self) -> str:
        return self.log_path.read_text()

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 30.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"the worker did not end in {timeout} s:\n{self.log()}") from None


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., WorkerProc]]:
    started: list[WorkerProc] = []

    def start(port: int, target: str, *flags: str) -> WorkerProc:
        workdir = tmp_path / f"worker{len(started)}"
        workdir.mkdir()
        proc = WorkerProc(workdir, port, target, *flags)
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            if proc.proc.poll() is None:
                proc.proc.kill()
                proc.proc.wait()


@pytest.fixture
def conn(server: ServerProc) -> Iterator[blocking.Connection]:
    with blocking.connect("127.0.0.1", server.port, "tester", "secret") as connection:
        yield connection


def most_at_once(events: list[str]) -> int:
    running = most = 0
    for event in events:
        running += 1 if event.startswith("start") else -1 if event.startswith("end") else 0
        most = max(most, running)
    return most


def test_the_worker_runs_the_function_for_each_task_several_at_once(
    server: ServerProc, conn: blocking.Connection, workers: Callable[..., WorkerProc]
) -> None:
    tube = conn.create_tube(unique("each"), "fifottl")
    tube.put_many(range(12))
    proc = workers(server.port, "record", "--tube", tube.name, "--concurrency", "4")
    wait_for(lambda: tube.statistics()["tasks"]["done"] == 12, "12 tasks done")
    proc.signal(signal.SIGTERM)
    assert proc.wait() == 0
    events = proc.events()
    assert sorted(int(e.split()[1]) for e in events if e.startswith("end")) == list(range(12))
    assert 1 < most_at_once(events) <= 4
    assert "stopped: 12 done, 0 failed" in proc.log()


def test_a_failing_function_is_tried_with_growing_waits_then_buried(
    server: ServerProc, conn: blocking.Connection, workers: Callable[..., WorkerProc]
) -> None:
    tube = conn.create_tube(unique("fails"), "fifo")  # no policy: the worker counts
    task = tube.put({"n": 1})
    flags = ("--tube", tube.name, "--max-attempts", "4", "--backoff", "0.05")
    proc = workers(server.port, "always_fails", *flags)
    buried = wait_for(lambda: tube.tasks("buried")["tasks"], "the task buried")
    proc.signal(signal.SIGINT)
    assert proc.wait() == 0
    assert proc.events() == [f"fail {task.id}"] * 4
    reason = "4 attempts, the last one raised ValueError: cannot handle {'n': 1}"
    assert buried[0]["reason"] == reason
    # One line per failure, no traceback; the waits double, in this order.
    lines = [line for line in proc.log().splitlines() if "failed (attempt" in line]
    notes = [re.search(r"attempt (\d) of 4; ([^)]*)\)", line).groups() for line in lines]  # type: ignore[union-attr]
    assert notes == [
        ("1", "again in 0.05 s"), ("2", "again in 0.1 s"), ("3", "again in 0.2 s"), ("4", "buried")
    ]  # fmt: skip
    assert "Traceback" not in proc.log()


def test_the_tubes_own_policy_counts_on_the_server(
    server: ServerProc, conn: blocking.Connection, workers: Callable[..., WorkerProc]
) -> None:
    tube = conn.create_tube(unique("policy"), "fifo", max_attempts=2, backoff=0.05)
    tube.put("x")
    proc = workers(server.port, "always_fails", "--tube", tube.name)
    buried = wait_for(lambda: tube.tasks("buried")["tasks"], "the task buried")
    proc.signal(signal.SIGTERM)
    assert proc.wait() == 0
    assert len(proc.events()) == 2  # the tube's 2, not the worker's default 5
    assert (buried[0]["attempts"], buried[0]["reason"]) == (
        2,
        "2 attempts, the last one raised ValueError: cannot handle 'x'",
    )


def test_sigterm_with_a_task_in_hand_gives_it_back_after_the_grace(
    server: ServerProc, conn: blocking.Connection, workers: Callable[..., WorkerProc]
) -> None:
    tube = conn.create_tube(unique("grace"), "fifottl", ttr=600)
    long, short = tube.put(3600), tube.put(0.2)  # seconds each function call sleeps
    proc = workers(server.port, "sleeps", "--tube", tube.name, "--concurrency", "2", "--grace", "1")
    wait_for(lambda: len(proc.events()) >= 2, "both tasks started")
    proc.signal(signal.SIGTERM)
    assert proc.wait() == 0
    assert f"end {short.id}" in proc.events()  # finished within the grace: acked
    assert tube.peek(long).status.name == "READY"  # given back, not left taken for 600 s
    stats = tube.statistics()["tasks"]
    assert (stats["done"], stats["ready"], stats["taken"]) == (1, 1, 0)
    assert f"task {long.id} of {tube.name} given back unfinished" in proc.log()


def test_a_second_ctrl_c_gives_the_tasks_back_at_once(
    server: ServerProc, conn: blocking.Connection, workers: Callable[..., WorkerProc]
) -> None:
    tube = conn.create_tube(unique("twice"), "fifo")
    task = tube.put(3600)
    proc = workers(server.port, "marked", "--tube", tube.name)  # async: cancelled
    wait_for(lambda: proc.events(), "the task started")
    proc.signal(signal.SIGINT)
    wait_for(lambda: "1 task(s) in hand" in proc.log(), "the first Ctrl-C handled")
    assert proc.proc.poll() is None  # the first one waits for the task (grace 30 s)
    proc.signal(signal.SIGINT)
    assert proc.wait() == 0
    assert tube.peek(task).status.name == "READY"


def test_a_worker_started_before_its_server_works_once_it_is_up(
    start_server: StartServer, workers: Callable[..., WorkerProc]
) -> None:
    port = free_port()
    server = start_server("--listen", f"127.0.0.1:{port}")
    with blocking.connect("127.0.0.1", port, "tester", "secret") as first:
        first.create_tube("later", "fifo").put("kept")
    assert server.stop() == 0
    proc = workers(port, "record", "--tube", "later", "--wait-for-server", "60")
    wait_for(lambda: "trying again for 60 s" in proc.log(), "the worker retrying")
    assert proc.proc.poll() is None and proc.events() == []  # waiting, not dead
    server.start()
    wait_for(lambda: "end 0" in proc.events(), "the task handled")
    proc.signal(signal.SIGTERM)
    assert proc.wait() == 0
    assert "trying again for 60 s" in proc.log()


def test_a_missing_tube_or_function_is_one_line_and_an_exit_status(
    server: ServerProc, workers: Callable[..., WorkerProc]
) -> None:
    missing = workers(server.port, "record", "--tube", "nosuch")
    assert missing.wait() == 4
    assert "tube 'nosuch' does not exist" in missing.log()
    wrong = workers(server.port, "nothing_here", "--tube", "x")
    assert wrong.wait() == 2
    assert f"cannot import {FUNCTIONS}:nothing_here" in wrong.log()
    assert "Traceback" not in missing.log() + wrong.log()


async def test_the_library_worker_and_the_decorator(server: ServerProc, tmp_path: Path) -> None:
    from tests.e2e import worker_functions

    seen: list[tuple[int, Any]] = []

    def plain(data: Any) -> None:
        seen.append((worker.current_task().id, data))

    async with aio.connect("127.0.0.1", server.port, "tester", "secret") as conn:
        tube = await conn.create_tube(unique("lib"), "utube")
        await tube.put_many(["a", "b", "c"])
        running = worker.Worker(tube, plain, concurrency=2, take_timeout=0.5)
        runner = asyncio.ensure_future(running.run())
        await wait_for_async(lambda: running.handled >= 3, "3 tasks handled")
        running.stop()
        await asyncio.wait_for(runner, 10)
        assert sorted(seen) == [(0, "a"), (1, "b"), (2, "c")]
        # @worker.handler: still the function, and it knows its tube and options.
        assert isinstance(worker_functions.marked, worker.Handler)
        assert (worker_functions.marked.tube, worker_functions.marked.options) == (
            "marked_tube",
            {"concurrency": 3},
        )


def test_sigterm_mid_batch_loses_no_task_and_does_none_twice(
    server: ServerProc, conn: blocking.Connection, workers: Callable[..., WorkerProc]
) -> None:
    tube = conn.create_tube(unique("batch"), "fifottl", ttr=600)
    tube.put_many(range(400))
    proc = workers(server.port, "quick", "--tube", tube.name, "--concurrency", "8")
    wait_for(lambda: len(proc.events()) >= 60, "some tasks done")
    proc.signal(signal.SIGTERM)  # takes and acks in flight, functions running
    assert proc.wait() == 0
    ended = [int(e.split()[1]) for e in proc.events()]
    stats = tube.statistics()["tasks"]
    # Every function that ran got its task acked; the rest wait, none left taken.
    assert len(set(ended)) == len(ended) == stats["done"] < 400
    assert (stats["taken"], stats["ready"]) == (0, 400 - stats["done"])
    again = workers(server.port, "quick", "--tube", tube.name, "--concurrency", "8")
    wait_for(lambda: tube.statistics()["tasks"]["done"] == 400, "the rest done")
    again.signal(signal.SIGTERM)
    assert again.wait() == 0
    everything = ended + [int(e.split()[1]) for e in again.events()]
    assert sorted(everything) == list(range(400))  # each exactly once


def test_the_function_runs_while_its_task_is_taken_and_its_result_goes_with_the_ack(
    server: ServerProc, conn: blocking.Connection
) -> None:
    tube = conn.create_tube(unique("after"), "fifo")
    tube.put_many(range(30))
    seen: list[str] = []

    def check(data: int) -> dict[str, int]:
        seen.append(conn.tube(tube.name).peek(worker.current_task().id).status.name)
        return {"double": data * 2}  # acked as ack(id, {result = ...})

    running = asyncio.run(_work_off(server, tube.name, check, 30, concurrency=4))
    assert seen == ["TAKEN"] * 30  # acked only after the function returned
    assert (running.handled, running.failed) == (30, 0)
    assert tube.statistics()["tasks"]["done"] == 30
    # The client's ack with a result, against a server that may keep none.
    task = tube.put("x")
    taken = tube.take(0)
    assert taken is not None and taken.id == task.id
    assert tube.ack(taken, result={"ok": 1}).status.name == "DONE"


def test_a_slow_function_keeps_its_task_past_its_ttr(
    server: ServerProc, conn: blocking.Connection
) -> None:
    tube = conn.create_tube(unique("slow"), "fifottl", ttr=1)
    task = tube.put(2.5)
    calls: list[int] = []

    async def slow(seconds: float) -> None:
        calls.append(worker.current_task().id)
        await asyncio.sleep(seconds)

    running = asyncio.run(_work_off(server, tube.name, slow, 1))
    assert calls == [task.id]  # never taken a second time: touched, not timed out
    assert (running.handled, running.failed) == (1, 0)
    stats = tube.statistics()["tasks"]
    assert (stats["done"], stats["ready"], stats["taken"]) == (1, 0, 0)


def test_the_time_limit_counts_a_try_for_a_thread(
    server: ServerProc, conn: blocking.Connection, workers: Callable[..., WorkerProc]
) -> None:
    tube = conn.create_tube(unique("limit"), "fifo", max_attempts=2, backoff=0.05)
    task = tube.put(1.0)  # each call sleeps 1 s, the limit is 0.3 s
    flags = ("--tube", tube.name, "--time-limit", "0.3", "--concurrency", "1")
    proc = workers(server.port, "sleeps", *flags)
    buried = wait_for(lambda: tube.tasks("buried")["tasks"], "the task buried")
    assert buried[0]["reason"] == "2 attempts, the last one: time limit 0.3 s exceeded"
    assert [e for e in proc.events() if e.startswith("start")] == [f"start {task.id}"] * 2
    # The threads ran on alone; their results were ignored: the task stays buried.
    wait_for(lambda: proc.events().count(f"end {task.id}") == 2, "both calls ended")
    assert tube.peek(task).status.name == "BURIED"
    proc.signal(signal.SIGTERM)
    assert proc.wait() == 0
    lines = [line for line in proc.log().splitlines() if "failed (attempt" in line]
    assert len(lines) == 2 and all(line.endswith("time limit 0.3 s exceeded") for line in lines)
    assert "2 failed (1 buried, 2 past the time limit)" in proc.log()
    assert "still running in threads" not in proc.log()


def test_the_time_limit_cancels_an_async_function(
    server: ServerProc, conn: blocking.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.e2e import worker_functions

    monkeypatch.setenv("WORKER_RECORD", str(tmp_path / "record.txt"))
    tube = conn.create_tube(unique("alimit"), "fifo")  # no policy: the worker counts
    task = tube.put(60)
    handler = worker_functions.over_time
    options = {**handler.options, "retry": worker.RetryDefaults(2, 0.05, 0.05)}
    running = asyncio.run(
        _work_off(server, tube.name, handler.function, 0, until_buried=1, **options)
    )
    record = (tmp_path / "record.txt").read_text().split("\n")
    assert record[:-1] == [f"start {task.id}", f"cancelled {task.id}"] * 2
    assert (running.timed_out, running.failed, running.buried) == (2, 2, 1)
    reason = tube.tasks("buried")["tasks"][0]["reason"]
    assert reason == "2 attempts, the last one: time limit 0.3 s exceeded"


async def _work_off(
    server: ServerProc,
    tube: str,
    function: Callable[[Any], Any],
    handled: int,
    until_buried: int = 0,
    **options: Any,
) -> worker.Worker:
    """Run a library worker until it handled (or buried) so many tasks, then stop it."""
    async with aio.connect("127.0.0.1", server.port, "tester", "secret") as conn:
        running = worker.Worker(conn.tube(tube), function, take_timeout=0.2, **options)
        runner = asyncio.ensure_future(running.run())

        def enough() -> bool:
            assert not runner.done(), "the worker ended early"
            return running.handled >= handled and running.buried >= until_buried

        await wait_for_async(enough, f"{handled} handled, {until_buried} buried")
        running.stop()
        await asyncio.wait_for(runner, 10)
        return running
