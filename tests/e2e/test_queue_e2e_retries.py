"""Retries and the task listing over the wire (QUEUE.md §14), with tarantool-python as the
client a module user has: a consumer that dies counts, a kill -9 keeps the counts."""

from __future__ import annotations

from contextlib import closing
from typing import Any

import pytest
import tarantool
from tarantool.error import DatabaseError

from tests.e2e.serverproc import ServerProc, StartServer, login_tester


def tasks(conn: tarantool.Connection, tube: str, **opts: Any) -> dict[str, Any]:
    return conn.call("queuebox.tasks", tube, opts).data[0]  # type: ignore[no-any-return]


def test_a_dying_consumer_uses_up_the_attempts_and_the_task_is_buried(
    server: ServerProc, conn: tarantool.Connection
) -> None:
    conn.call("queue.create_tube", "dies", "fifo", {"max_attempts": 2, "backoff": 0.05})
    conn.call("queue.tube.dies:put", {"job": 1})
    for _ in range(2):
        with closing(login_tester(server.port)) as worker:
            assert worker.call("queue.tube.dies:take", 5).data[0][:2] == [0, "t"]
        # the connection closed with the task taken: the server counts that attempt
    page = tasks(conn, "dies", state="buried")
    for _ in range(100):  # the close reaches the server a moment after the client's
        if page["tasks"]:
            break
        conn.call("queuebox.sleep", 0.05)
        page = tasks(conn, "dies", state="buried")
    [task] = page["tasks"]
    assert task["attempts"] == 2
    assert task["reason"] == "2 attempts, the last one lost its consumer (session ended)"
    assert task["data"] == {"job": 1}
    assert page["retries"] == {"max_attempts": 2, "backoff": 0.05, "backoff_max": 60.0}


def test_the_listing_pages_through_a_tube(conn: tarantool.Connection) -> None:
    conn.call("queue.create_tube", "pages", "fifottl")
    for n in range(5):
        conn.call("queue.tube.pages:put", b"\x00bin" if n == 0 else n, {"pri": 5 - n})
    first = tasks(conn, "pages", state="ready", limit=2)
    assert [t["id"] for t in first["tasks"]] == [4, 3]
    rest = tasks(conn, "pages", state="ready", after=first["next"])
    assert [t["id"] for t in rest["tasks"]] == [2, 1, 0] and rest["next"] is None
    assert rest["tasks"][-1]["data"] == b"\x00bin"  # the client's bytes, as sent
    with pytest.raises(DatabaseError) as info:
        conn.call("queuebox.tasks", "nosuch")
    assert info.value.args[:2] == (32, "Tube 'nosuch' not found")


def test_reader_may_list_but_not_change_options(server: ServerProc) -> None:
    with closing(login_tester(server.port)) as admin:
        admin.call("queue.create_tube", "guarded", "fifo", {"if_not_exists": True})
    with closing(login_tester(server.port, user="reader", password="readpw")) as reader:
        assert tasks(reader, "guarded")["tasks"] == []
        with pytest.raises(DatabaseError) as info:
            reader.call("queuebox.tube_options", "guarded", {"max_attempts": 3})
        assert info.value.args[0] == 42


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_counts_delays_and_options_survive_a_restart(start_server: StartServer, kill: bool) -> None:
    server = start_server()
    with closing(login_tester(server.port)) as c:
        c.call("queue.create_tube", "kept", "utube")
        c.call("queuebox.tube_options", "kept", {"max_attempts": 5, "backoff": 30})
        c.call("queue.tube.kept:put", "a", {"utube": "x"})
        assert c.call("queue.tube.kept:take", 0).data[0][1] == "t"
        assert c.call("queue.tube.kept:release", 0).data[0][1] == "~"
    server.restart(kill)
    with closing(login_tester(server.port)) as c:
        [task] = tasks(c, "kept")["tasks"]
        assert (task["state"], task["attempts"], task["utube"]) == ("delayed", 1, "x")
        assert c.call("queue.tube.kept:take", 0).data == []  # still waiting out 30 s
        assert tasks(c, "kept")["retries"]["backoff"] == 30
