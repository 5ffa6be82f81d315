"""Rate limits and buried retention over the wire (QUEUE.md §14), with tarantool-python
as the consumers: takes from many connections share one window, a waiting take returns
when the window frees, and a restart keeps the window, the buried tasks' times and the
count of those dropped; statistics, /metrics and `queuebox stats --json` show them."""

from __future__ import annotations

import threading
import time
from contextlib import closing
from typing import Any

import tarantool

from tests.e2e.cluster import start_primary, start_replica, wait_equal
from tests.e2e.serverproc import ServerProc, StartServer, login_tester, unique
from tests.e2e.test_cli_client import queuebox
from tests.e2e.test_cli_tasks import as_json, ok
from tests.e2e.test_metrics import samples, scrape, value
from tests.e2e.webclient import http_port
from tests.waiting import wait_for

MAX, INTERVAL = 4, 0.4


def stats(conn: tarantool.Connection, tube: str) -> dict[str, Any]:
    return conn.call("queue.statistics", tube).data[0]  # type: ignore[no-any-return]


def consume(port: int, tube: str, want: int, taken: list[float], lock: threading.Lock) -> None:
    """Take (and ack) until `want` tasks were taken by all consumers together."""
    with closing(login_tester(port)) as conn:
        while True:
            with lock:
                if len(taken) >= want:
                    return
            found = conn.call(f"queue.tube.{tube}:take", 0.3).data
            if found:
                with lock:
                    taken.append(time.monotonic())
                conn.call(f"queue.tube.{tube}:ack", found[0][0])


def test_consumers_on_many_connections_share_one_window(
    server: ServerProc, conn: tarantool.Connection, env: dict[str, str]
) -> None:
    tube = unique("limited")
    conn.call("queue.create_tube", tube, "fifo", {"rate_limit": {"max": MAX, "interval": INTERVAL}})
    for n in range(30):
        conn.call(f"queue.tube.{tube}:put", n)
    taken: list[float] = []
    lock = threading.Lock()
    want = 3 * MAX
    workers = [
        threading.Thread(target=consume, args=(server.port, tube, want, taken, lock))
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert len(taken) >= want
    taken.sort()
    # No window of the interval holds more than MAX takes; the client sees each take a
    # little after the server made it, so a window is checked a little shorter.
    for first, later in zip(taken, taken[MAX:], strict=False):
        assert later - first >= INTERVAL - 0.1, taken
    found = stats(conn, tube)
    assert found["rate_limit"]["max"] == MAX
    assert found["rate_limit"]["delayed"] >= 1  # the takes held back were counted
    assert as_json("stats", tube, env=env)["rate_limit"]["interval"] == INTERVAL


def test_a_waiting_take_returns_when_the_window_frees(conn: tarantool.Connection) -> None:
    tube = unique("window")
    conn.call("queue.create_tube", tube, "fifottl", {"rate_limit": {"max": 1, "interval": 0.5}})
    for n in range(3):
        conn.call(f"queue.tube.{tube}:put", n)
    assert conn.call(f"queue.tube.{tube}:take", 0).data[0][0] == 0
    assert conn.call(f"queue.tube.{tube}:take", 0).data == []  # over the limit: nil at once
    assert conn.call(f"queue.tube.{tube}:take", 0.05).data == []  # or when its time is up
    started = time.monotonic()
    (task,) = conn.call(f"queue.tube.{tube}:take", 10).data
    assert task[0] == 1
    assert time.monotonic() - started < 10  # woken by the window, not by its timeout


def test_restart_keeps_the_window_and_the_retention(start_server: StartServer) -> None:
    server = start_server("--http-listen", "127.0.0.1:0")
    with closing(login_tester(server.port)) as c:
        c.call("queue.create_tube", "held", "fifo", {"rate_limit": {"max": 1, "interval": 60}})
        c.call("queue.tube.held:put", "a")
        c.call("queue.tube.held:put", "b")
        assert c.call("queue.tube.held:take", 0).data[0][0] == 0
        c.call("queue.create_tube", "dead", "fifottl", {"buried_max": 2, "buried_ttl": 60})
        for n in range(4):
            c.call("queue.tube.dead:put", n)
            c.call("queue.tube.dead:bury", n)
        assert stats(c, "dead")["retention"]["dropped"] == 2
        c.call("queue.tube.held:take", 0)  # counted as held back
    found = samples(scrape(http_port(server))[2])
    assert value(found, "queuebox_takes_rate_limited_total", tube="held") == 1
    assert value(found, "queuebox_buried_dropped_total", tube="dead") == 2
    server.restart(kill=True)
    with closing(login_tester(server.port)) as c:
        assert c.call("queue.tube.held:take", 0).data == []  # the window is as it was
        c.call("queuebox.tube_options", "dead", {"buried_ttl": 0.2})
        # The two kept were buried before the change: dropped once 0.2 s passed.
        wait_for(lambda: stats(c, "dead")["tasks"]["buried"] == 0, "buried tasks dropped")
        assert stats(c, "dead")["retention"]["dropped"] == 4  # counted on from the restart


def test_a_tube_without_the_options_answers_as_the_module(conn: tarantool.Connection) -> None:
    tube = unique("plain")
    conn.call("queue.create_tube", tube, "fifo")
    assert set(stats(conn, tube)) == {"tasks", "calls"}


def test_the_cli_sets_shows_and_removes_the_options(env: dict[str, str]) -> None:
    tube = unique("cli")
    limit = 'rate_limit={"max": 100, "interval": 60}'
    ok("create-tube", tube, "fifo", "--opt", limit, "--opt", "buried_max=5", env=env)
    shown = as_json("tube-options", tube, env=env)
    assert shown == {"rate_limit": {"max": 100, "interval": 60.0}, "buried_max": 5}
    text = ok("tube-options", tube, "--rate-limit", "10/1", "--buried-ttl", "60", env=env)
    assert text.strip() == "rate_limit 10 per 1 s, buried_max 5, buried_ttl 60"
    off = ("--rate-limit", "off", "--buried-max", "off", "--buried-ttl", "off")
    assert as_json("tube-options", tube, *off, env=env) == {}
    assert queuebox("tube-options", tube, "--rate-limit", "10", env=env).returncode == 2


def test_per_utube_limits_each_utube_and_the_cli_sets_it(
    server: ServerProc, conn: tarantool.Connection, env: dict[str, str]
) -> None:
    tube = unique("users")
    ok("create-tube", tube, "utube", env=env)
    shown = as_json("tube-options", tube, "--rate-limit", "2/0.5/utube", env=env)
    assert shown == {"rate_limit": {"max": 2, "interval": 0.5, "per_utube": True}}
    for n in range(6):
        conn.call(f"queue.tube.{tube}:put", n, {"utube": "busy"})
    conn.call(f"queue.tube.{tube}:put", "other", {"utube": "calm"})
    seen: dict[str, list[float]] = {"busy": [], "calm": []}
    with closing(login_tester(server.port)) as worker:
        while len(seen["busy"]) < 4 or not seen["calm"]:
            (task,) = worker.call(f"queue.tube.{tube}:take", 5).data
            seen["calm" if task[2] == "other" else "busy"].append(time.monotonic())
            worker.call(f"queue.tube.{tube}:ack", task[0])
    busy = seen["busy"]
    assert busy[2] - busy[0] >= 0.5 - 0.1 and busy[3] - busy[1] >= 0.5 - 0.1
    assert seen["calm"][0] < busy[2]  # the other utube was not held up by the busy one
    fifo = unique("plain")
    ok("create-tube", fifo, "fifo", env=env)
    refused = queuebox("tube-options", fifo, "--rate-limit", "2/1/utube", env=env)
    assert refused.returncode == 1 and "per_utube" in refused.stderr


def test_a_promoted_replica_keeps_the_window_and_the_drop_count(
    start_server: StartServer,
) -> None:
    primary = start_primary(start_server)
    with closing(login_tester(primary.port)) as p:
        p.call("queue.create_tube", "held", "fifo", {"rate_limit": {"max": 1, "interval": 60}})
        p.call("queue.create_tube", "dead", "fifo", {"buried_max": 1})
        for n in range(3):
            p.call("queue.tube.held:put", n)
            p.call("queue.tube.dead:put", n)
            p.call("queue.tube.dead:bury", n)
        assert p.call("queue.tube.held:take", 0).data[0][0] == 0
        replica = start_replica(start_server, primary)
        with closing(login_tester(replica.port)) as r:
            wait_equal(p, r, "held")
            wait_equal(p, r, "dead")
    primary.stop()
    with closing(login_tester(replica.port)) as r:
        assert r.call("queuebox.promote").data[0]["promoted"] is True
        assert r.call("queue.tube.held:take", 0).data == []  # the primary's window holds
        assert stats(r, "held")["rate_limit"]["max"] == 1
        assert stats(r, "dead")["retention"]["dropped"] == 2
