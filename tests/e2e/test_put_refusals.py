"""Put options a driver cannot honour, refused by every surface of queuebox's own (the
CLI, both bundled clients, the console) while the wire keeps the module's behaviour for
Tarantool clients; and one buried task kicked by id from the CLI and the clients."""

from __future__ import annotations

import asyncio
from contextlib import closing

import pytest
import tarantool

from queuebox.clients import aio, blocking
from queuebox.clients.errors import OptionRefused, QueueError, TaskNotFound
from tests.e2e.serverproc import ServerProc, StartServer, login_tester, unique
from tests.e2e.test_cli_client import queuebox
from tests.e2e.test_cli_tasks import as_json, ok
from tests.e2e.webclient import Web, http_port


def count(conn: tarantool.Connection, tube: str) -> int:
    return int(conn.call("queue.statistics", tube).data[0]["tasks"]["total"])


def test_the_cli_refuses_delay_on_fifo_and_puts_nothing(
    conn: tarantool.Connection, env: dict[str, str]
) -> None:
    tube = unique("fifo")
    ok("create-tube", tube, "fifo", env=env)
    done = queuebox("put", tube, "x", "--delay", "5", env=env)
    assert done.returncode == 2, done.stderr
    assert f"tube '{tube}' is a fifo tube, which ignores the put option delay" in done.stderr
    refused = queuebox("put", tube, "x", "--pri", "1", "--ttl", "3", "--json", env=env)
    assert refused.returncode == 2 and "options pri, ttl" in refused.stderr
    assert count(conn, tube) == 0
    assert ok("put", tube, "x", env=env).startswith("0\tready")
    ttl_tube = unique("fifottl")
    ok("create-tube", ttl_tube, "fifottl", env=env)
    assert ok("put", ttl_tube, "x", "--delay", "5", env=env).startswith("0\tdelayed")
    # The wire answers as the module does: fifo ignores the option, the task is ready.
    assert conn.call(f"queue.tube.{tube}:put", "y", {"delay": 5}).data[0][1] == "r"


def test_both_clients_refuse_and_name_the_option_and_type(server: ServerProc) -> None:
    tube = unique("utube")
    with blocking.connect("127.0.0.1", server.port, "tester", "secret") as conn:
        conn.create_tube(tube, "utube")
        with pytest.raises(OptionRefused, match=r"utube tube, which ignores the put option ttr"):
            conn.tube(tube).put("x", ttr=5, utube="a")
        with pytest.raises(OptionRefused):
            conn.tube(tube).put_many(["x", "y"], pri=1)
        assert conn.tube(tube).put("x", utube="a").status == "r"
        assert conn.tube(tube).statistics()["tasks"]["total"] == 1

    async def aio_put() -> None:
        async with aio.connect("127.0.0.1", server.port, "tester", "secret") as connection:
            with pytest.raises(OptionRefused, match="option delay"):
                await connection.tube(tube).put("x", delay=1)
            assert (await connection.tube(tube).put("x", utube="b")).id == 1

    asyncio.run(aio_put())


def test_the_console_refuses_the_put_form_option(start_server: StartServer) -> None:
    server = start_server("--http-listen", "127.0.0.1:0")
    with closing(login_tester(server.port)) as conn:
        conn.call("queue.create_tube", "jobs", "fifo")
    web = Web(http_port(server))
    assert web.login("tester", "secret").status == 303
    refused = web.post("/api/tubes/jobs/put", {"data": 1, "opts": {"delay": 3, "pri": 2}})
    assert refused.status == 400
    message = refused.json()["error"]["message"]
    assert message == (
        "tube 'jobs' is a fifo tube, which ignores the put options delay, pri: the task was not put"
    )
    assert web.post("/api/tubes/jobs/put", {"data": 1}).status == 200
    with closing(login_tester(server.port)) as conn:
        assert count(conn, "jobs") == 1


def test_kick_one_buried_task_by_id(conn: tarantool.Connection, env: dict[str, str]) -> None:
    tube = unique("dead")
    conn.call("queue.create_tube", tube, "fifo", {"max_attempts": 1})
    for n in range(3):
        conn.call(f"queue.tube.{tube}:put", n)
        conn.call(f"queue.tube.{tube}:bury", n, {"reason": "bad"})
    task = as_json("kick", tube, "--id", "2", env=env)
    assert (task["id"], task["status"]) == (2, "ready")
    assert conn.call(f"queue.tube.{tube}:peek", 0).data[0][1] == "!"  # not the oldest one
    not_buried = queuebox("kick", tube, "--id", "2", env=env)
    assert not_buried.returncode == 1 and "not buried" in not_buried.stderr
    assert queuebox("kick", tube, "--id", "9", env=env).returncode == 4
    assert queuebox("kick", tube, "--id", "1", "--all", env=env).returncode == 2
    assert queuebox("kick", "nosuch", "--id", "1", env=env).returncode == 4
    with blocking.connect("127.0.0.1", int(env["QUEUEBOX_PORT"]), "tester", "secret") as c:
        assert c.tube(tube).kick_task(1).status == "r"
        with pytest.raises(QueueError):
            c.tube(tube).kick_task(1)
        with pytest.raises(TaskNotFound):
            c.tube(tube).kick_task(7)
    rows = conn.call("queuebox.tasks", tube, {"state": "buried"}).data[0]["tasks"]
    assert [t["id"] for t in rows] == [0]
