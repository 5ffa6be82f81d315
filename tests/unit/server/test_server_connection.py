"""The connection Protocol driven with a fake transport: batching, ordering,
back-pressure, durability barrier, errors, lifecycle hooks."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import msgpack
import pytest

from queuebox import protocol
from queuebox.server.core.app import App
from queuebox.server.core.builtins import install
from queuebox.server.core.registry import CallContext
from queuebox.server.net.connection import Connection
from queuebox.server.runtime.errors import CallError
from queuebox.server.settings.config import READ, WRITE, Config, UserSpec
from tests.unit.server.fake_transport import Durable, FakeTransport
from tests.waiting import wait_for_async


def frame(request_type: int, sync: int, body: dict[int, Any] | None = None) -> bytes:
    payload = msgpack.packb({0: request_type, 1: sync}) + (
        msgpack.packb(body) if body is not None else b""
    )
    return b"\xce" + struct.pack(">I", len(payload)) + payload


def call(sync: int, name: str, *args: Any, request_type: int = 10) -> bytes:
    return frame(request_type, sync, {0x22: name, 0x21: list(args)})


def replies(data: bytes) -> list[tuple[int, int, dict[int, Any]]]:
    """(code, sync, body) of every reply in `data`."""
    out = []
    while data:
        assert data[0] == 0xCE
        (length,) = struct.unpack(">I", data[1:5])
        unpacker = msgpack.Unpacker(strict_map_key=False)
        unpacker.feed(data[5 : 5 + length])
        header, body = unpacker.unpack(), unpacker.unpack()
        assert header[5] == 81
        out.append((header[0], header[1], body))
        data = data[5 + length :]
    return out


class Harness:
    def __init__(self, app: App) -> None:
        self.app = app
        self.conn = Connection(app)
        self.transport = FakeTransport()
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]

    def feed(self, data: bytes) -> None:
        self.transport.deliver(self.conn, data, read_already=True)

    def take_writes(self) -> list[bytes]:
        writes, self.transport.writes = self.transport.writes, []
        return writes

    def take_replies(self) -> list[tuple[int, int, dict[int, Any]]]:
        return replies(b"".join(self.take_writes()))


def make_app(**settings: Any) -> App:
    app = App(Config(**settings))
    install(app)
    return app


@pytest.fixture
def app() -> App:
    return make_app(test_hooks=True)


def open_conn(app: App) -> Harness:
    harness = Harness(app)
    greeting = harness.take_writes()
    assert len(greeting) == 1 and len(greeting[0]) == 128
    return harness


async def test_one_write_per_batch(app: App) -> None:
    h = open_conn(app)
    h.feed(frame(64, 1) + call(2, "queuebox.echo", "a") + frame(64, 3) + call(4, "nosuch"))
    writes = h.take_writes()
    assert len(writes) == 1
    got = replies(writes[0])
    assert [(code, sync) for code, sync, _ in got] == [(0, 1), (0, 2), (0, 3), (0x8000 | 33, 4)]
    assert got[1][2] == {0x30: ["a"]}


async def test_waiting_call_answers_later_and_out_of_order(app: App) -> None:
    release = asyncio.get_running_loop().create_future()

    async def wait_for_release(ctx: CallContext, args: list[Any]) -> list[Any]:
        await release
        return ["waited"]

    app.registry.register("t.wait", wait_for_release, READ)
    h = open_conn(app)
    h.feed(call(1, "t.wait") + call(2, "queuebox.echo", "fast"))
    assert [sync for _, sync, _ in h.take_replies()] == [2]
    assert h.conn.in_flight == 1
    release.set_result(None)
    for _ in range(3):
        await asyncio.sleep(0)
    assert h.take_replies() == [(0, 1, {0x30: ["waited"]})]
    assert h.conn.in_flight == 0


async def test_call_16_shapes_and_tuples_are_accepted(app: App) -> None:
    app.registry.register("t.tuple", lambda ctx, args: (1, "two", [3]), READ)
    h = open_conn(app)
    h.feed(call(1, "t.tuple") + call(2, "t.tuple", request_type=6))
    got = h.take_replies()
    assert got[0][2] == {0x30: [1, "two", [3]]}
    assert got[1][2] == {0x30: [[1], ["two"], [3]]}


async def test_in_flight_cap_pauses_reading(app: App) -> None:
    app = make_app(test_hooks=True, max_in_flight_per_conn=3)
    h = open_conn(app)
    h.feed(b"".join(call(sync, "queuebox.sleep", 0.01) for sync in range(1, 4)))
    assert h.transport.paused
    await wait_for_async(lambda: len(replies(b"".join(h.transport.writes))) == 3)
    assert len(h.take_replies()) == 3
    assert not h.transport.paused


async def test_write_pressure_pauses_reading(app: App) -> None:
    h = open_conn(app)
    assert h.transport.high_water == app.config.write_high_water
    h.conn.pause_writing()
    assert h.transport.paused
    h.conn.resume_writing()
    assert not h.transport.paused


async def test_both_pressures_must_clear(app: App) -> None:
    app = make_app(test_hooks=True, max_in_flight_per_conn=1)
    h = open_conn(app)
    h.conn.pause_writing()
    h.feed(call(1, "queuebox.sleep", 0.01))  # arrived before the pause took effect
    await wait_for_async(lambda: h.conn.in_flight == 0, "the sleep finished", timeout=5)
    assert h.transport.paused  # the sleep finished, but writes are still backed up
    h.conn.resume_writing()
    assert not h.transport.paused
    assert h.transport.pause_calls == 1


async def test_durability_barrier_delays_the_reply(app: App) -> None:
    barrier = asyncio.get_running_loop().create_future()
    app.durability = Durable(lambda: barrier)
    h = open_conn(app)
    h.feed(call(1, "queuebox.echo", "x") + frame(64, 2))
    assert [sync for _, sync, _ in h.take_replies()] == [2]  # PING needs no barrier
    barrier.set_result(None)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert h.take_replies() == [(0, 1, {0x30: ["x"]})]


async def test_failed_barrier_never_acknowledges(app: App) -> None:
    barrier = asyncio.get_running_loop().create_future()
    app.durability = Durable(lambda: barrier)
    h = open_conn(app)
    h.feed(call(1, "queuebox.echo", "x"))
    barrier.set_exception(OSError("disk full"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    ((code, sync, body),) = h.take_replies()
    assert (code, sync, body[0x31]) == (0x8000 | 40, 1, "Failed to write to disk")


async def test_commit_now_sends_held_replies_in_the_same_turn(app: App) -> None:
    """wal_mode=write: flush() has the WAL written first, then the replies go."""
    barrier = asyncio.get_running_loop().create_future()
    written: list[int] = []
    app.durability = Durable(
        lambda: None if barrier.done() else barrier,
        lambda: written.append(1) or barrier.set_result(None),
    )
    h = open_conn(app)
    h.feed(call(1, "queuebox.echo", "x") + frame(64, 2) + call(3, "queuebox.echo", "y"))
    assert written == [1]  # one write for the whole batch
    assert [(sync, body.get(0x30)) for _, sync, body in h.take_replies()] == [
        (1, ["x"]),
        (2, None),
        (3, ["y"]),
    ]


async def test_commit_now_failure_turns_held_replies_into_errors(app: App) -> None:
    barrier = asyncio.get_running_loop().create_future()
    app.durability = Durable(
        lambda: barrier, lambda: barrier.done() or barrier.set_exception(OSError("disk full"))
    )
    h = open_conn(app)
    h.feed(call(1, "queuebox.echo", "x") + frame(64, 2) + call(3, "queuebox.echo", "y"))
    replies = h.take_replies()
    assert [(code, sync) for code, sync, _ in replies] == [
        (0x8000 | 40, 1),
        (0, 2),
        (0x8000 | 40, 3),
    ]
    assert replies[0][2][0x31] == "Failed to write to disk"


async def test_a_barrier_commit_now_did_not_finish_is_still_awaited(app: App) -> None:
    barrier = asyncio.get_running_loop().create_future()
    app.durability = Durable(lambda: barrier, lambda: None)  # wrote nothing this time
    h = open_conn(app)
    h.feed(call(1, "queuebox.echo", "x") + frame(64, 2))
    assert [sync for _, sync, _ in h.take_replies()] == [2]
    barrier.set_result(None)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert h.take_replies() == [(0, 1, {0x30: ["x"]})]


async def test_awaitable_barrier_that_is_not_a_future(app: App) -> None:
    done: list[int] = []

    async def commit() -> None:
        await asyncio.sleep(0.01)  # the load: a commit that takes a while
        done.append(1)

    app.durability = Durable(commit)
    h = open_conn(app)
    h.feed(call(1, "queuebox.echo", "x"))
    assert h.take_writes() == []
    await wait_for_async(lambda: bool(h.transport.writes))
    assert done == [1] and h.take_replies() == [(0, 1, {0x30: ["x"]})]


class QueueLikeError(Exception):
    """Stands for drivers' QueueError: the server recognises it by its attributes
    and maps the code's name through protocol's ErrorCode."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def test_errors_keep_their_codes(app: App) -> None:
    def queue_error(ctx: CallContext, args: list[Any]) -> list[Any]:
        raise QueueLikeError(
            "ER_PROC_LUA", "/usr/share/tarantool/queue/abstract.lua:83: Task was not taken"
        )

    def call_error(ctx: CallContext, args: list[Any]) -> list[Any]:
        raise CallError(4242, "mine")

    def bug(ctx: CallContext, args: list[Any]) -> list[Any]:
        return {}[1]  # type: ignore[no-any-return]

    app.registry.register("t.qerr", queue_error, READ)
    app.registry.register("t.cerr", call_error, READ)
    app.registry.register("t.bug", bug, READ)
    app.registry.register("t.none", lambda ctx, args: None, READ)  # type: ignore[arg-type,return-value]
    h = open_conn(app)
    h.feed(call(1, "t.qerr") + call(2, "t.cerr") + call(3, "t.bug") + call(4, "t.none"))
    got = h.take_replies()
    assert (got[0][0], got[0][2][0x31]) == (
        0x8000 | 32,
        "/usr/share/tarantool/queue/abstract.lua:83: Task was not taken",
    )
    assert (got[1][0], got[1][2][0x31]) == (0x8000 | 4242, "mine")
    assert (got[2][0], got[2][2][0x31]) == (0x8000 | 32, "KeyError: 1")
    assert got[3][0] == 0x8000 | 32 and "not a list" in got[3][2][0x31]
    assert not h.transport.closed


async def test_rights_are_checked_per_access_class(app: App) -> None:
    app = make_app(test_hooks=True, guest_rights=frozenset({READ}))
    h = open_conn(app)
    h.feed(call(1, "queuebox.echo") + call(2, "queuebox.test.write"))
    got = h.take_replies()
    assert got[0][0] == 0
    assert got[1][0] == 0x8000 | 42
    assert got[1][2][0x31] == (
        "Execute access to function 'queuebox.test.write' is denied for user 'guest'"
    )
    assert not h.conn.session.grant.allows(WRITE)


async def test_a_throttled_auth_runs_later_and_what_follows_it_after_it() -> None:
    user = UserSpec("u", protocol.password_hash2("pw"), frozenset({READ}))
    app = make_app(
        test_hooks=True, users={"u": user}, guest_rights=frozenset({READ}), auth_delay_s=0.02
    )
    # The guard's clock stands still: however slow this machine (a real 20 ms
    # could pass between the two feeds), the second AUTH comes before its turn;
    # the connection then runs it once the 20 ms it was told to wait are over.
    now = [1000.0]
    app.auth_guard.clock = lambda: now[0]
    h = open_conn(app)
    salt = h.conn.session.salt
    wrong = frame(7, 1, {0x23: "u", 0x21: ["chap-sha1", b"x" * 20]})
    right = frame(7, 2, {0x23: "u", 0x21: ["chap-sha1", protocol.scramble(salt, "pw")]})
    h.feed(wrong)
    assert h.take_replies()[0][0] == 0x8000 | 47
    h.feed(right + call(3, "queuebox.test.whoami"))
    assert h.take_replies() == [] and h.transport.paused  # the AUTH waits its turn
    h.feed(call(4, "queuebox.test.whoami"))  # read before the pause: waits as well
    assert h.take_replies() == [] and h.transport.paused
    await wait_for_async(lambda: not h.transport.paused)
    got = h.take_replies()
    assert [(code, sync) for code, sync, _ in got] == [(0, 2), (0, 3), (0, 4)]
    assert got[1][2][0x30][0] == got[2][2][0x30][0] == "u"
    assert app.auth_guard.counts.delayed == 1


async def test_fatal_frame_error_replies_then_closes(app: App) -> None:
    h = open_conn(app)
    h.feed(frame(64, 1) + b"\xc1junk" + frame(64, 2))
    got = h.take_replies()
    assert [(code, sync) for code, sync, _ in got] == [(0, 1), (0x8000 | 20, 0)]
    assert h.transport.closed
    h.feed(frame(64, 3))  # nothing more is read from a closing connection
    assert h.take_writes() == []


async def test_lifecycle_hooks_and_closed_future(app: App) -> None:
    events: list[tuple[str, int]] = []
    app.add_connect_listener(lambda conn_id: events.append(("connect", conn_id)))
    app.add_disconnect_listener(lambda conn_id: events.append(("disconnect", conn_id)))
    app.add_disconnect_listener(lambda conn_id: 1 / 0)  # a broken listener harms no one
    first, second = open_conn(app), open_conn(app)
    assert second.conn.conn_id == first.conn.conn_id + 1
    assert set(app.connections) == {first.conn.conn_id, second.conn.conn_id}
    first.conn.connection_lost(None)
    assert first.conn.closed.done()
    assert events == [
        ("connect", first.conn.conn_id),
        ("connect", second.conn.conn_id),
        ("disconnect", first.conn.conn_id),
    ]
    assert set(app.connections) == {second.conn.conn_id}


async def test_reply_to_a_closed_connection_is_dropped(app: App) -> None:
    h = open_conn(app)
    h.feed(call(1, "queuebox.sleep", 0.01))
    h.conn.connection_lost(None)
    h.transport.closed = True
    await wait_for_async(lambda: h.conn.in_flight == 0)
    assert h.take_writes() == []
    assert h.conn.in_flight == 0


async def test_connections_beyond_the_maximum_are_refused() -> None:
    app = make_app(max_connections=1)
    open_conn(app)
    refused = Harness(app)
    assert refused.transport.aborted and refused.transport.writes == []
    assert len(app.connections) == 1


async def test_auth_is_applied_in_order() -> None:
    user = UserSpec("u", protocol.password_hash2("pw"), frozenset({READ}))
    app = make_app(test_hooks=True, users={"u": user}, guest_rights=frozenset({READ}))
    h = open_conn(app)
    scramble = protocol.scramble(h.conn.session.salt, "pw")
    h.feed(
        call(1, "queuebox.test.whoami")
        + frame(7, 2, {0x23: "u", 0x21: ["chap-sha1", scramble]})
        + call(3, "queuebox.test.whoami")
        + frame(7, 4, {0x23: "u", 0x21: ["chap-sha1", b"x" * 20]})
        + call(5, "queuebox.test.whoami")
    )
    got = h.take_replies()
    assert got[0][2][0x30][0] == "guest"
    assert got[1][0] == 0
    assert got[2][2][0x30][0] == "u"
    assert got[3][0] == 0x8000 | 47
    assert got[4][2][0x30][0] == "u"
