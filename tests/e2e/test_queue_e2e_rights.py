"""Who may call what (QUEUE.md §1 "Ungranted guest"; queuebox's read/write/admin classes),
and queue names under another configured namespace.

`reader` (read only) may peek and read statistics but not change tasks;
a user with read and write works a queue but may not create, drop, truncate
tubes or change cfg, which need admin (so does the EVAL create_tube text).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import tarantool
from tarantool.error import DatabaseError

from tests.e2e.serverproc import USERS_TOML, ServerProc, StartServer

WRITER_TOML = (
    USERS_TOML
    + """
[users.writer]
password = "writepw"
rights = ["read", "write"]
"""
)
EVAL_CREATE = "local name, type, cfg = ... ; queue.create_tube(name, type, cfg)"


def connect(port: int, user: str, password: str) -> tarantool.Connection:
    return tarantool.Connection("127.0.0.1", port, user=user, password=password, socket_timeout=10)


def denied(conn: tarantool.Connection, name: str, *args: Any) -> tuple[int, str]:
    with pytest.raises(DatabaseError) as info:
        conn.call(name, *args)
    return info.value.code, info.value.message


@pytest.fixture(scope="module")
def tube(server: ServerProc) -> Iterator[str]:
    admin = connect(server.port, "tester", "secret")
    name = f"rights_{uuid.uuid4().hex[:8]}"
    try:
        admin.call("queue.create_tube", name, "fifottl")
        admin.call(f"queue.tube.{name}:put", "x")
        yield name
    finally:
        admin.close()


def test_a_read_only_user_may_look_but_not_change(server: ServerProc, tube: str) -> None:
    reader = connect(server.port, "reader", "readpw")
    try:
        assert reader.call(f"queue.tube.{tube}:peek", 0).data == [[0, "r", "x"]]
        assert reader.call("queue.statistics", tube).data[0]["tasks"]["ready"] == 1
        assert reader.call("queue.tube", tube).data == [True]
        assert reader.call("queue.state").data == ["RUNNING"]
        assert reader.eval("return queue._VERSION").data == ["1.5.0"]
        for method, args in (("put", ["y"]), ("take", [0]), ("ack", [0]), ("delete", [0])):
            name = f"queue.tube.{tube}:{method}"
            assert denied(reader, name, *args) == (
                42,
                f"Execute access to function '{name}' is denied for user 'reader'",
            )
        assert denied(reader, "queue.create_tube", "other", "fifo") == (
            42,
            "Execute access to function 'queue.create_tube' is denied for user 'reader'",
        )
        with pytest.raises(DatabaseError) as info:
            reader.eval(EVAL_CREATE, "other", "fifo", {})
        assert info.value.code == 42
        # Nothing changed.
        assert reader.call(f"queue.tube.{tube}:peek", 0).data == [[0, "r", "x"]]
        assert reader.call("queue.tube", "other").data == [False]
    finally:
        reader.close()


def test_creating_and_dropping_tubes_needs_admin(start_server: StartServer) -> None:
    server = start_server("--queue-namespaces", "queue,jobs", toml=WRITER_TOML)
    admin = connect(server.port, "tester", "secret")
    writer = connect(server.port, "writer", "writepw")
    try:
        assert denied(writer, "queue.create_tube", "w", "fifo") == (
            42,
            "Execute access to function 'queue.create_tube' is denied for user 'writer'",
        )
        assert admin.call("queue.create_tube", "w", "fifo").data == []
        assert writer.call("queue.tube.w:put", "x").data == [[0, "r", "x"]]
        assert writer.call("queue.tube.w:take", 0).data == [[0, "t", "x"]]
        assert writer.call("queue.tube.w:ack", 0).data == [[0, "-", "x"]]
        for name, args in (
            ("queue.tube.w:drop", []),
            ("queue.tube.w:truncate", []),
            ("queue.tube.w:on_task_change", []),
            ("queue.cfg", [{"ttr": 5}]),
        ):
            assert denied(writer, name, *args) == (
                42,
                f"Execute access to function '{name}' is denied for user 'writer'",
            )
        # Another configured namespace reaches the same tubes.
        assert writer.call("jobs.tube.w:put", "y").data == [[0, "r", "y"]]
        assert admin.call("queue.tube.w:peek", 0).data == [[0, "r", "y"]]
        assert writer.call("jobs.statistics", "w").data[0]["calls"]["put"] == 2
        assert admin.call("jobs.tube.w:drop").data == [True]
        assert denied(admin, "queue.tube.w:put", "z")[0] == 33
    finally:
        admin.close()
        writer.close()
