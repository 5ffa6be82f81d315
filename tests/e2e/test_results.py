"""Task results over the wire (drivers/results.py): an ack's result read and awaited
with tarantool-python, the bundled clients and the CLI; a failure's reason; kept
through a kill -9 and read from a replica, then from it once promoted."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from contextlib import closing
from typing import Any

import pytest
import tarantool
from tarantool.error import DatabaseError

from queuebox.clients import aio, blocking, worker
from tests.e2e.cluster import connect, start_primary, start_replica, wait_equal
from tests.e2e.serverproc import REPO, ServerProc, StartServer, clean_env, login_tester, unique
from tests.e2e.test_cli_client import queuebox
from tests.waiting import wait_for


def result(conn: tarantool.Connection, tube: str, tid: int, timeout: float = 0) -> Any:
    return conn.call("queuebox.result", [tube, tid, timeout]).data[0]


def done_task(conn: tarantool.Connection, tube: str, value: Any) -> int:
    tid: int = conn.call(f"queue.tube.{tube}:put", ["job"]).data[0][0]
    conn.call(f"queue.tube.{tube}:take", [0])
    conn.call(f"queue.tube.{tube}:ack", [tid, {"result": value}])
    return tid


def test_an_ack_result_is_read_by_id_and_counted(conn: tarantool.Connection) -> None:
    tube = unique("res")
    conn.call("queue.create_tube", [tube, "fifottl", {"result_ttl": 60}])
    tid = done_task(conn, tube, {"rows": 3, "raw": b"\x00\xff"})
    assert result(conn, tube, tid) == {"status": "done", "result": {"rows": 3, "raw": b"\x00\xff"}}
    assert result(conn, tube, 999) == {"status": "unknown"}
    stats = conn.call("queue.statistics", [tube]).data[0]
    assert stats["results"] == {"held": 1, "stored": 1}
    with pytest.raises(DatabaseError) as info:
        conn.call(f"queue.tube.{tube}:ack", [tid + 1, {"result": "x" * 70_000}])
    assert info.value.args[0] == 32  # not taken, or over the cap: never stored


def test_a_result_is_awaited_until_the_ack_comes(server: ServerProc) -> None:
    tube = unique("wait")

    async def scenario() -> None:
        async with aio.connect(port=server.port, user="tester", password="secret") as c:
            await c.create_tube(tube, "fifo", result_ttl=60)
            t = c.tube(tube)
            task = await t.put("job")
            waiting = asyncio.ensure_future(t.result(task, timeout=30))
            await asyncio.sleep(0)  # let it go out before the worker acks
            worker = login_tester(server.port)
            with closing(worker):
                worker.call(f"queue.tube.{tube}:take", [5])
                assert not waiting.done()
                worker.call(f"queue.tube.{tube}:ack", [task.id, {"result": [1, 2]}])
            found = await asyncio.wait_for(waiting, 10)
            assert (found.status, found.value, found.done) == ("done", [1, 2], True)
            pending = await t.result(await t.put("never"), timeout=0.2)
            assert pending.status == "pending"

    asyncio.run(scenario())


def test_a_buried_task_failed_with_its_reason_and_the_cli_exits_by_status(
    server: ServerProc, conn: tarantool.Connection, env: dict[str, str]
) -> None:
    tube = unique("fail")
    conn.call("queue.create_tube", [tube, "fifo", {"result_ttl": 60}])
    with blocking.connect(port=server.port, user="tester", password="secret") as c:
        t = c.tube(tube)
        bad = t.put("job").id
        t.bury(bad, reason="ValueError: no")
        found = t.result(bad)
        assert (found.status, found.error) == ("failed", "ValueError: no")
        good = done_task(conn, tube, {"ok": True})
        pending = t.put("later").id
    run = queuebox("result", tube, str(good), env=env)
    assert (run.returncode, json.loads(run.stdout)) == (0, {"ok": True})
    run = queuebox("result", tube, str(bad), "--json", env=env)
    assert run.returncode == 1
    assert json.loads(run.stdout)["error"] == "ValueError: no"
    assert queuebox("result", tube, "12345", env=env).returncode == 4
    run = queuebox("result", tube, str(pending), "--wait", "0.1", env=env)
    assert run.returncode == 5 and "still pending" in run.stderr
    run = queuebox("tube-options", tube, "--result-ttl", "0", "--json", env=env)
    assert (run.returncode, json.loads(run.stdout)) == (0, {})
    run = queuebox("tube-options", tube, "--result-ttl", "90", "--json", env=env)
    assert json.loads(run.stdout) == {"result_ttl": 90.0}


@pytest.mark.parametrize("kill", [True])
def test_results_survive_a_kill(start_server: StartServer, kill: bool) -> None:
    server = start_server()
    with closing(login_tester(server.port)) as c:
        c.call("queue.create_tube", ["kept", "utubettl", {"result_ttl": 3600}])
        tid = done_task(c, "kept", "answer")
    server.restart(kill)
    with closing(login_tester(server.port)) as c:
        assert result(c, "kept", tid) == {"status": "done", "result": "answer"}


def test_a_replica_reads_results_and_keeps_them_when_promoted(start_server: StartServer) -> None:
    primary = start_primary(start_server)
    tube = unique("promote")
    with connect(primary) as p:
        p.call("queue.create_tube", [tube, "fifo", {"result_ttl": 3600}])
        tid = done_task(p, tube, {"n": 1})
        waiting = p.call(f"queue.tube.{tube}:put", ["later"]).data[0][0]
        replica = start_replica(start_server, primary)
        with connect(replica) as r:
            wait_equal(p, r, tube)
            wait_for(lambda: result(r, tube, tid).get("status") == "done", "the replicated result")
            assert result(r, tube, waiting) == {"status": "pending"}
    primary.stop()
    with connect(replica) as r:
        assert r.call("queuebox.promote").data[0]["promoted"] is True
        assert result(r, tube, tid) == {"status": "done", "result": {"n": 1}}
        r.call(f"queue.tube.{tube}:take", [0])
        r.call(f"queue.tube.{tube}:ack", [waiting, {"result": "after"}])
        assert result(r, tube, waiting, 1) == {"status": "done", "result": "after"}


@pytest.mark.parametrize(
    ("section", "printed"), [("## Results", "done 6\n"), ("## Dependencies", "3\n")]
)
def test_the_examples_of_docs_workers_run(server: ServerProc, section: str, printed: str) -> None:
    """docs/workers.md's results and dependencies examples, on this server."""
    doc = (REPO / "docs" / "workers.md").read_text()
    code = re.search(r"```python\n(.*?)```", doc[doc.index(section) :], re.S)
    assert code is not None
    login = f"blocking.connect(port={server.port}, user='tester', password='secret')"
    text = code.group(1).replace("blocking.connect()", login)
    env = {**clean_env(), "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-c", text], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, printed, "")


def test_a_workers_return_value_and_its_last_error_are_the_results(server: ServerProc) -> None:
    tube = unique("worked")

    def double(data: int) -> dict[str, int]:
        if data < 0:
            raise ValueError(f"negative: {data}")
        return {"double": data * 2}

    async def scenario() -> None:
        async with aio.connect(port=server.port, user="tester", password="secret") as c:
            t = await c.create_tube(tube, "fifo", result_ttl=60, max_attempts=1)
            good, bad = await t.put(21), await t.put(-1)
            waiting = asyncio.ensure_future(t.result(good, timeout=30))
            running = worker.Worker(t, double, take_timeout=0.2)
            runner = asyncio.ensure_future(running.run())
            try:
                assert (await asyncio.wait_for(waiting, 20)).value == {"double": 42}
                failed = await t.result(bad, timeout=20)
            finally:
                running.stop()
                await asyncio.wait_for(runner, 10)
            assert failed.status == "failed" and "ValueError: negative: -1" in str(failed.error)

    asyncio.run(scenario())
