"""The queue across a server restart on the same data directory (QUEUE.md §6 "Restart", §8).

Tubes, their options and the tasks of non-temporary tubes persist; sessions,
ownership, waiters and statistics do not, so taken tasks come back ready
(counted as releases in the fresh statistics). Restarts are a clean SIGTERM
(a snapshot is written at shutdown) and a SIGKILL (only the WAL is left).
"""

from __future__ import annotations

import decimal
import uuid
from contextlib import closing
from typing import Any

import pytest
import tarantool
from tarantool.error import DatabaseError

from tests.e2e.serverproc import ServerProc, StartServer


def connect(server: ServerProc) -> tarantool.Connection:
    return tarantool.Connection(
        "127.0.0.1", server.port, user="tester", password="secret", socket_timeout=10
    )


def restart(server: ServerProc, kill: bool = False) -> ServerProc:
    """Stop the process (SIGTERM, or SIGKILL) and start it again on the same data dir."""
    return server.restart(kill)


class Client:
    def __init__(self, server: ServerProc) -> None:
        self.conn = connect(server)

    def __call__(self, tube: str, method: str, *args: Any) -> Any:
        return self.conn.call(f"queue.tube.{tube}:{method}", *args).data

    def stats(self, tube: str) -> dict[str, Any]:
        return self.conn.call("queue.statistics", tube).data[0]  # type: ignore[no-any-return]

    def close(self) -> None:
        self.conn.close()


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_taken_delayed_buried_and_ready_tasks_after_a_restart(
    start_server: StartServer, kill: bool
) -> None:
    server = start_server()
    with closing(Client(server)) as c:
        c.conn.call("queue.create_tube", "pp", "fifottl", {"ttl": 600})
        c.conn.call("queue.create_tube", "plain", "utube")
        c.conn.call("queue.create_tube", "capped", "limfifottl", {"capacity": 1})
        for data in ("buried", "delayed", "taken", "ready"):
            c("pp", "put", data)
        c("pp", "bury", 0)
        assert c("pp", "take", 0) == [[1, "t", "delayed"]]
        assert c("pp", "release", 1, {"delay": 600}) == [[1, "~", "delayed"]]
        assert c("pp", "take", 0) == [[2, "t", "taken"]]
        c("plain", "put", "u", {"utube": "a"})
        assert c("plain", "take", 0) == [[0, "t", "u"]]
        c("capped", "put", "full")
        # The consumer is still connected when the server stops.
        restart(server, kill=kill)

    with closing(Client(server)) as c:
        assert [c("pp", "peek", i)[0][1] for i in range(4)] == ["!", "~", "r", "r"]
        assert c("pp", "put", "next") == [[4, "r", "next"]]
        stats = c.stats("pp")
        assert stats["tasks"] == {
            "ready": 3, "taken": 0, "buried": 1, "delayed": 1, "done": 0, "total": 5
        }  # fmt: skip
        # Fresh statistics; the restart's release of the taken task is counted.
        calls = stats["calls"]
        assert (calls["release"], calls["put"], calls["take"], calls["bury"]) == (1, 1, 0, 0)
        # The released utube task is takeable again: its utube is not left busy.
        assert c("plain", "take", 0) == [[0, "t", "u"]]
        # Tube options persist: the capacity still holds.
        assert c("capped", "put", "more") == [None]


def test_the_timers_of_persisted_tasks_go_on_after_a_restart(start_server: StartServer) -> None:
    server = start_server()
    with closing(Client(server)) as c:
        c.conn.call("queue.create_tube", "timed", "fifottl")
        c("timed", "put", "soon", {"delay": 0.5})
    restart(server)
    with closing(Client(server)) as c:
        # A waiting take is woken by the delay's end, measured from before the restart.
        assert c("timed", "take", 5) == [[0, "t", "soon"]]
        assert c.stats("timed")["calls"]["delay"] == 1


def test_a_temporary_tube_comes_back_registered_and_empty(start_server: StartServer) -> None:
    server = start_server()
    with closing(Client(server)) as c:
        c.conn.call("queue.create_tube", "scratch", "fifo", {"temporary": True})
        c.conn.call("queue.create_tube", "kept", "fifo")
        c("scratch", "put", "lost")
        c("kept", "put", "kept")
    restart(server)
    with closing(Client(server)) as c:
        assert c.conn.call("queue.tube", "scratch").data == [True]
        assert c.stats("scratch")["tasks"]["total"] == 0
        assert c("scratch", "take", 0) == []
        assert c("scratch", "put", "new") == [[0, "r", "new"]]
        assert c("kept", "peek", 0) == [[0, "r", "kept"]]


def test_a_dropped_tube_stays_dropped(start_server: StartServer) -> None:
    server = start_server()
    with closing(Client(server)) as c:
        c.conn.call("queue.create_tube", "gone", "fifottl")
        c("gone", "put", "x")
        assert c("gone", "drop") == [True]
    restart(server)
    with closing(Client(server)) as c:
        assert c.conn.call("queue.tube", "gone").data == [False]
        try:
            c("gone", "peek", 0)
            raise AssertionError("a dropped tube answered")
        except DatabaseError as exc:
            assert exc.code == 33
        assert c.conn.call("queue.create_tube", "gone", "fifo").data == []
        assert c("gone", "put", "y") == [[0, "r", "y"]]


def test_acknowledged_tasks_survive_a_kill(start_server: StartServer) -> None:
    server = start_server("--wal-mode", "write")
    with closing(Client(server)) as c:
        c.conn.call("queue.create_tube", "durable", "utubettl")
        for n in range(20):
            assert c("durable", "put", n, {"utube": str(n % 3), "pri": n % 2}) == [[n, "r", n]]
        assert c("durable", "take", 0)[0][1] == "t"
        assert c("durable", "delete", 5) == [[5, "-", 5]]
        assert c("durable", "bury", 6) == [[6, "!", 6]]

    restart(server, kill=True)
    with closing(Client(server)) as c:
        stats = c.stats("durable")["tasks"]
        assert (stats["ready"], stats["buried"], stats["total"]) == (18, 1, 19)
        assert c("durable", "peek", 6) == [[6, "!", 6]]
        try:
            c("durable", "peek", 5)
            raise AssertionError("a deleted task came back")
        except DatabaseError as exc:
            assert exc.message == "Task 5 not found"
        assert c("durable", "put", "next", {"utube": "x"}) == [[20, "r", "next"]]


def test_task_data_comes_back_as_given_after_a_restart(start_server: StartServer) -> None:
    values = [
        b"\x00\xff raw bytes",
        uuid.UUID(int=5),
        decimal.Decimal("1.25"),
        {1: "int key", "nested": [1.5, True, None]},
        "x" * 100_000,
        -(2**63),
        2**64 - 1,
    ]
    server = start_server()
    with closing(Client(server)) as c:
        c.conn.call("queue.create_tube", "data", "utubettl")
        for n, value in enumerate(values):
            assert c("data", "put", value) == [[n, "r", value]]
        restart(server)
    with closing(Client(server)) as c:
        assert [c("data", "peek", n)[0][2] for n in range(len(values))] == values
