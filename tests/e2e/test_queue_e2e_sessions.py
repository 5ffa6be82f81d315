"""Sessions and ownership over real connections (QUEUE.md §6, §11 "Connections and sessions").

Which session owns a taken task, what happens to it when its connection
closes (at once with cfg ttr 0, after the ttr otherwise), identify from a
second connection, and the identify errors. identify answers 16 raw bytes
as MP_STR, which tarantool-python only reads with `encoding=None`, so the
connections that identify use that mode (strings then come back as bytes).
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
import tarantool
from tarantool.error import DatabaseError

from tests.e2e.serverproc import CALL, PING, RawClient, Reply, ServerProc, unique
from tests.waiting import wait_for

ALSO_BEHIND_A_ROUTER = True  # but for conftest.NOT_BEHIND_A_ROUTER

UNKNOWN = b"0123456789abcdef"


def connect(port: int, raw: bool = False) -> tarantool.Connection:
    return tarantool.Connection(
        "127.0.0.1", port, user="tester", password="secret", socket_timeout=10,
        encoding=None if raw else "utf-8",
    )  # fmt: skip


def error_of(conn: tarantool.Connection, name: str, *args: Any) -> tuple[int, str | bytes]:
    with pytest.raises(DatabaseError) as info:
        conn.call(name, *args)
    return info.value.code, info.value.message


class BytesClient(RawClient):
    """RawClient (bytes go out as MP_BIN) that reads non-UTF-8 MP_STR replies too."""

    def recv(self) -> Reply:
        (length,) = struct.unpack(">I", self.recv_exact(5)[1:])
        unpacker = msgpack.Unpacker(
            raw=False, strict_map_key=False, unicode_errors="surrogateescape"
        )
        unpacker.feed(self.recv_exact(length))
        return Reply(unpacker.unpack(), unpacker.unpack())


@pytest.fixture(scope="module")
def admin(server: ServerProc) -> Iterator[tarantool.Connection]:
    c = connect(server.port)
    try:
        yield c
    finally:
        c.close()


def make_tube(admin: tarantool.Connection, type_: str = "fifo") -> str:
    name = unique(type_)
    admin.call("queue.create_tube", name, type_)
    return name


def connections_of(port: int, session: bytes) -> int:
    """The server's connections in `session` (its _queue_session_ids rows)."""
    conn = connect(port, raw=True)
    try:
        return sum(1 for row in conn.select("_queue_session_ids") if row[1] == session)
    finally:
        conn.close()


def tasks_of(admin: tarantool.Connection, tube: str) -> dict[str, int]:
    return admin.call("queue.statistics", tube).data[0]["tasks"]  # type: ignore[no-any-return]


def calls_of(admin: tarantool.Connection, tube: str) -> dict[str, int]:
    return admin.call("queue.statistics", tube).data[0]["calls"]  # type: ignore[no-any-return]


def status(admin: tarantool.Connection, tube: str, task_id: int) -> str:
    return admin.call(f"queue.tube.{tube}:peek", task_id).data[0][1]  # type: ignore[no-any-return]


# --- disconnect with cfg ttr 0 (the default) --------------------------------------------


def test_two_consumers_and_a_disconnect_that_releases_both_of_its_tasks(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    tube = make_tube(admin, "fifottl")
    for data in ("a", "b", "c"):
        admin.call(f"queue.tube.{tube}:put", data)
    first, second = connect(server.port), connect(server.port)
    try:
        assert first.call(f"queue.tube.{tube}:take", 0).data == [[0, "t", "a"]]
        assert second.call(f"queue.tube.{tube}:take", 0).data == [[1, "t", "b"]]
        assert first.call(f"queue.tube.{tube}:take", 0).data == [[2, "t", "c"]]
        # Ownership is per session: the other consumer cannot ack or release them.
        assert error_of(second, f"queue.tube.{tube}:ack", 0) == (32, "Task was not taken")
        assert error_of(second, f"queue.tube.{tube}:release", 2) == (32, "Task was not taken")
        assert error_of(admin, f"queue.tube.{tube}:drop") == (
            32,
            "There are taken tasks in the tube",
        )
        first.close()
        wait_for(lambda: tasks_of(admin, tube)["ready"] == 2, "2 tasks ready")
        assert [status(admin, tube, i) for i in range(3)] == ["r", "t", "r"]
        assert calls_of(admin, tube)["release"] == 2
        assert second.call(f"queue.tube.{tube}:ack", 1).data == [[1, "-", "b"]]
        assert admin.call(f"queue.tube.{tube}:drop").data == [True]
    finally:
        first.close()
        second.close()


def test_a_take_pending_on_a_closed_connection_does_not_take_the_released_task(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    tube = make_tube(admin)
    admin.call(f"queue.tube.{tube}:put", "only")
    with RawClient(server.port) as leaving:
        assert leaving.call(f"queue.tube.{tube}:take", 0).data == [[0, "t", "only"]]
        leaving.request(CALL, {0x22: f"queue.tube.{tube}:take", 0x21: [10]})
        assert leaving.roundtrip(PING).code == 0  # the take now waits
    # Closing releases the task; the closing connection's own waiter must not get it.
    wait_for(lambda: tasks_of(admin, tube)["ready"] == 1, "1 task ready")
    assert admin.call(f"queue.tube.{tube}:take", 1).data == [[0, "t", "only"]]
    calls = calls_of(admin, tube)
    assert (calls["take"], calls["release"]) == (2, 1)
    admin.call(f"queue.tube.{tube}:ack", 0)


def test_a_take_waiting_on_a_closed_connection_takes_nothing_later(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    tube = make_tube(admin)
    with RawClient(server.port) as leaving:
        leaving.request(CALL, {0x22: f"queue.tube.{tube}:take", 0x21: [10]})
        assert leaving.roundtrip(PING).code == 0
    # Once the server saw the close, drop no longer counts that consumer.
    wait_for(lambda: drop_answer(admin, tube) == [True], "the tube dropped")


def drop_answer(admin: tarantool.Connection, tube: str) -> Any:
    try:
        return admin.call(f"queue.tube.{tube}:drop").data
    except DatabaseError as exc:
        assert exc.message == "There are consumers connected the tube"
        return None


# --- identify ---------------------------------------------------------------------------


def test_identify_answers_the_same_16_bytes_and_a_second_connection_acks(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    tube = make_tube(admin)
    for data in ("t1", "t2"):
        admin.call(f"queue.tube.{tube}:put", data)
    owner, helper = connect(server.port, raw=True), connect(server.port, raw=True)
    try:
        assert owner.call(f"queue.tube.{tube}:take", 0).data == [[0, b"t", b"t1"]]
        assert owner.call(f"queue.tube.{tube}:take", 0).data == [[1, b"t", b"t2"]]
        (session,) = owner.call("queue.identify").data
        assert isinstance(session, bytes) and len(session) == 16
        assert owner.call("queue.identify").data == [session]
        assert error_of(helper, f"queue.tube.{tube}:ack", 1) == (32, b"Task was not taken")
        assert helper.call("queue.identify", session).data == [session]
        assert helper.call(f"queue.tube.{tube}:ack", 1).data == [[1, b"-", b"t2"]]
        # While one connection of the session is open, its tasks stay taken.
        owner.close()
        wait_for(lambda: connections_of(server.port, session) == 1, "the server saw the close")
        assert status(admin, tube, 0) == "t"
        helper.close()
        wait_for(lambda: status(admin, tube, 0) == "r", "task 0 ready")
    finally:
        owner.close()
        helper.close()


def test_identify_accepts_the_uuid_as_bin_too(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    tube = make_tube(admin)
    admin.call(f"queue.tube.{tube}:put", "x")
    owner = connect(server.port, raw=True)
    try:
        owner.call(f"queue.tube.{tube}:take", 0)
        (session,) = owner.call("queue.identify").data
        with BytesClient(server.port) as helper:  # packs bytes as MP_BIN
            (answer,) = helper.call("queue.identify", session).data
            assert answer.encode("utf-8", "surrogateescape") == session
            assert helper.call(f"queue.tube.{tube}:ack", 0).data == [[0, "-", "x"]]
    finally:
        owner.close()


def test_identify_errors(admin: tarantool.Connection, server: ServerProc) -> None:
    for bad in ("short", "x" * 17, 5, [1]):
        assert error_of(admin, "queue.identify", bad) == (32, "Invalid UUID format.")
    # The canonical text has its first three groups in little-endian order.
    assert error_of(admin, "queue.identify", UNKNOWN.decode()) == (
        32,
        "The UUID 33323130-3534-3736-3839-616263646566 is unknown.",
    )
    with RawClient(server.port) as raw:
        reply = raw.call("queue.identify", UNKNOWN)  # as MP_BIN
        assert reply.error == (32, "The UUID 33323130-3534-3736-3839-616263646566 is unknown.")


def test_a_session_ended_by_a_disconnect_is_unknown(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    gone = connect(server.port, raw=True)
    (session,) = gone.call("queue.identify").data
    gone.close()
    text = str(uuid.UUID(bytes_le=session))
    helper = connect(server.port, raw=True)
    try:
        wait_for(lambda: error_of(helper, "queue.identify", session)[0] == 32, "the session gone")
        assert error_of(helper, "queue.identify", session) == (
            32,
            f"The UUID {text} is unknown.".encode(),
        )
    finally:
        helper.close()


# --- cfg ttr: a disconnected session lives on ------------------------------------------


def test_cfg_ttr_keeps_a_disconnected_sessions_tasks_until_it_expires(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    tube = make_tube(admin, "fifottl")
    for data in ("kept", "acked"):
        admin.call(f"queue.tube.{tube}:put", data)
    assert admin.call("queue.cfg", {"ttr": 1}).data == []
    try:
        owner = connect(server.port, raw=True)
        owner.call(f"queue.tube.{tube}:take", 0)
        owner.call(f"queue.tube.{tube}:take", 0)
        (session,) = owner.call("queue.identify").data
        owner.close()
        wait_for(lambda: connections_of(server.port, session) == 0, "the server saw the close")
        assert [status(admin, tube, 0), status(admin, tube, 1)] == ["t", "t"]
        back = connect(server.port, raw=True)
        try:
            assert back.call("queue.identify", session).data == [session]
            assert back.call(f"queue.tube.{tube}:ack", 1).data == [[1, b"-", b"acked"]]
        finally:
            back.close()  # pending again: expires 1 s from now
        left = time.monotonic()
        wait_for(lambda: connections_of(server.port, session) == 0, "the server saw the close")
        assert status(admin, tube, 0) == "t"
        # Nothing but the server's timer ends the session: a waiting take gets the task.
        with RawClient(server.port) as waiter:
            assert waiter.call(f"queue.tube.{tube}:take", 3).data == [[0, "t", "kept"]]
            assert time.monotonic() - left >= 0.9
        assert calls_of(admin, tube)["release"] == 1
        text = str(uuid.UUID(bytes_le=session))
        late = connect(server.port, raw=True)
        try:
            assert error_of(late, "queue.identify", session) == (
                32,
                f"The UUID {text} is unknown.".encode(),
            )
        finally:
            late.close()
    finally:
        admin.call("queue.cfg", {"ttr": 0})
