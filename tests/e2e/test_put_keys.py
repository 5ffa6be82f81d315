"""Exactly-once puts over the wire (QUEUE.md §17): a keyed put answers the first task
again on every driver, through tarantool-python, asynctnt and the bundled clients;
'-' after an ack; a new task after a short window; the keys through a restart from
the WAL and from a snapshot; statistics, /metrics and the CLI. Real servers."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import closing
from typing import Any

import asynctnt
import pytest

from queuebox.clients import aio, blocking
from tests.e2e.client_targets import free_port
from tests.e2e.cluster import start_primary, start_replica, wait_equal
from tests.e2e.serverproc import (
    REPO,
    RawClient,
    ServerProc,
    StartServer,
    clean_env,
    login_tester,
    unique,
)
from tests.e2e.test_metrics import samples, scrape, value
from tests.waiting import wait_for

DRIVERS = ["fifo", "fifottl", "limfifottl", "utube", "utubettl"]
LOGIN = {"user": "tester", "password": "secret"}


def put(conn: Any, tube: str, data: Any, key: str | None = None, **opts: Any) -> list[Any]:
    if key is not None:
        opts["key"] = key
    return list(conn.call(f"queue.tube.{tube}:put", data, opts).data[0])


@pytest.mark.parametrize("driver", DRIVERS)
def test_every_driver_answers_a_key_with_its_first_task(conn: Any, driver: str) -> None:
    tube = unique(driver)
    conn.call("queue.create_tube", tube, driver, {})
    first = put(conn, tube, "a", key="k1", utube="u")
    assert put(conn, tube, "a", key="k1", utube="u") == first
    other = put(conn, tube, "b", key="k2", utube="u")
    assert other[0] != first[0]
    stats = conn.call("queue.statistics", tube).data[0]
    assert stats["tasks"]["total"] == 2 and stats["calls"]["put"] == 2
    assert stats["keys"] == {"held": 2, "matched": 1}
    (taken,) = conn.call(f"queue.tube.{tube}:take", 0).data
    assert taken[0] == first[0]
    assert put(conn, tube, "a", key="k1", utube="u")[1] == "t"
    conn.call(f"queue.tube.{tube}:ack", first[0])
    assert put(conn, tube, "a", key="k1", utube="u") == [first[0], "-", "a"]


async def test_asynctnt_and_the_bundled_clients_put_once_per_key(server: ServerProc) -> None:
    tube = unique("clients")
    c = asynctnt.Connection(host="127.0.0.1", port=server.port, username="tester",
                            password="secret", connect_timeout=5)  # fmt: skip
    await c.connect()
    try:
        await c.call("queue.create_tube", [tube, "fifottl", {}])
        first = (await c.call(f"queue.tube.{tube}:put", ["x", {"key": "a"}])).body[0]
        again = (await c.call(f"queue.tube.{tube}:put", ["x", {"key": "a"}])).body[0]
        assert list(again) == list(first)
    finally:
        await c.disconnect()
    async with aio.connect("127.0.0.1", server.port, **LOGIN) as conn:
        jobs = conn.tube(tube)
        assert (await jobs.put("x", key="a")).id == first[0]
        auto = [await jobs.put("y") for _ in range(2)]  # a fresh key each: two tasks
        assert auto[0].id != auto[1].id
        many = await jobs.put_many(["m", "m"])
        assert len({t.id for t in many}) == 2
    with blocking.connect("127.0.0.1", server.port, **LOGIN) as bconn:
        assert bconn.tube(tube).put("x", key="a").id == first[0]
        stats = bconn.statistics(tube)
    assert stats["keys"] == {"held": 5, "matched": 3}
    with blocking.connect("127.0.0.1", server.port, **LOGIN, put_keys=False) as plain:
        plain.tube(tube).put("no key")
        assert plain.statistics(tube)["keys"]["held"] == 5


def test_a_module_client_sees_the_module_statistics(conn: Any) -> None:
    tube = unique("plain")
    conn.call("queue.create_tube", tube, "fifo", {})
    put(conn, tube, "a")
    assert set(conn.call("queue.statistics", tube).data[0]) == {"tasks", "calls"}


def test_a_short_window_lets_a_new_task_in_and_prunes_the_key(conn: Any) -> None:
    tube = unique("window")
    conn.call("queue.create_tube", tube, "fifo", {"key_window": 0.3})
    first = put(conn, tube, "a", key="k")
    # Each put answers the first task until the window ends; then one new task.
    wait_for(lambda: put(conn, tube, "a", key="k")[0] != first[0], what="the window to end")
    assert conn.call("queue.statistics", tube).data[0]["tasks"]["total"] == 2
    # The second key expires too and the timer prunes it (at most a second late).
    wait_for(
        lambda: conn.call("queue.statistics", tube).data[0]["keys"]["held"] == 0,
        what="the expired keys pruned",
    )
    assert conn.call("queuebox.tube_options", tube, {"key_window": 60}).data[0] == {
        "key_window": 60
    }


@pytest.mark.parametrize("how", ["wal", "snapshot", "snapshot+wal"])
def test_keys_survive_a_restart(start_server: StartServer, how: str) -> None:
    """From the WAL alone, a snapshot alone, or a snapshot (the keys space as it
    was made) and the WAL after it (the keys put and done since)."""
    server = start_server()
    tube = unique("restart")
    with closing(login_tester(server.port)) as c:
        c.call("queue.create_tube", tube, "utubettl", {})
        if how == "snapshot+wal":
            c.call("queuebox.snapshot")
        done = put(c, tube, "d", key="done")
        c.call(f"queue.tube.{tube}:take", 0)
        c.call(f"queue.tube.{tube}:ack", done[0])
        live = put(c, tube, "l", key="live")
        if how == "snapshot":
            c.call("queuebox.snapshot")
    server.restart(kill=how != "snapshot")
    with closing(login_tester(server.port)) as c:
        assert put(c, tube, "l", key="live") == live
        assert put(c, tube, "d", key="done") == [done[0], "-", "d"]
        assert c.call("queue.statistics", tube).data[0]["tasks"]["total"] == 1


def test_metrics_and_cli(start_server: StartServer) -> None:
    port = free_port()
    server = start_server("--metrics-listen", f"127.0.0.1:{port}")
    tube = unique("cli")
    env = {**clean_env(), "QUEUEBOX_PORT": str(server.port), "QUEUEBOX_USER": "tester",
           "QUEUEBOX_PASSWORD": "secret"}  # fmt: skip

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "queuebox", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    def queuebox(*args: str) -> Any:
        done = run(*args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    queuebox("create-tube", tube, "fifo", "--opt", "key_window=600", "--json")
    assert queuebox("tube-options", tube, "--key-window", "3600", "--json") == {"key_window": 3600}
    refused = run("put", tube, "-", "--key", "k")
    assert refused.returncode != 0 and "--key puts one task" in refused.stderr
    first = queuebox("put", tube, '"job"', "--key", "order-7", "--json")
    assert queuebox("put", tube, '"job"', "--key", "order-7", "--json") == first
    queuebox("put", tube, '"other"', "--json")  # a fresh key of its own
    assert queuebox("stats", tube, "--json")["keys"] == {"held": 2, "matched": 1}
    found = samples(scrape(port)[2])
    assert value(found, "queuebox_put_keys", tube=tube) == 2
    assert value(found, "queuebox_puts_matched_by_key_total", tube=tube) == 1


def test_a_bad_key_is_an_error_reply(conn: Any) -> None:
    tube = unique("bad")
    conn.call("queue.create_tube", tube, "fifo", {})
    with pytest.raises(Exception, match="Invalid value of key"):
        put(conn, tube, "a", key=7)  # type: ignore[arg-type]
    assert put(conn, tube, "a", key="fine")[1] == "r"  # the server goes on


def test_a_promoted_replica_answers_the_keys_of_its_old_primary(
    start_server: StartServer,
) -> None:
    primary = start_primary(start_server)
    replica = start_replica(start_server, primary)
    tube = unique("replica")
    with closing(login_tester(primary.port)) as p:
        p.call("queue.create_tube", tube, "fifottl", {})
        first = put(p, tube, "a", key="k")
        done = put(p, tube, "d", key="gone")
        p.call(f"queue.tube.{tube}:delete", done[0])
        with closing(login_tester(replica.port)) as r:
            # A key row is in the WAL batch of its task's change: with the tasks
            # the replica has the keys.
            wait_equal(p, r, tube)
    primary.stop()
    with closing(login_tester(replica.port)) as r:
        assert r.call("queuebox.promote").data[0]["promoted"] is True
        assert put(r, tube, "a", key="k") == first
        assert put(r, tube, "d", key="gone") == [done[0], "-", "d"]
        assert r.call("queue.statistics", tube).data[0]["tasks"]["total"] == 1
        # The promoted queue follows the key's task: a delete here makes it done,
        # and the id given again to another task is not the key's answer.
        r.call(f"queue.tube.{tube}:delete", first[0])
        assert put(r, tube, "other")[0] == first[0]
        assert put(r, tube, "a", key="k") == [first[0], "-", "a"]


def test_a_first_keyed_put_changes_no_schema(start_server: StartServer) -> None:
    """The keys space comes with the first tube: a client's first keyed put leaves
    the schema version as it was (a connector that sees it move fetches the
    schema again, over and over with many puts in flight)."""
    server = start_server()
    with RawClient(server.port) as raw:
        raw.auth("tester", "secret")
        made = raw.call("queue.create_tube", "first_key", "fifo").header[5]
        keyed = raw.call("queue.tube.first_key:put", "x", {"key": "k"})
        assert keyed.body[0x30][0][0] == 0 and keyed.header[5] == made
        assert raw.call("queue.tube.first_key:put", "y", {"key": "k2"}).header[5] == made
