"""The client's connection layer against a REAL Tarantool 2.6 (no queue module installed):
auth, calls, errors, pipelining, timeouts, reconnects and the identify re-join, with a
few Lua stand-ins for the queue functions the connection itself uses."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from queuebox.clients import aio, blocking
from queuebox.clients.errors import (
    AuthError,
    CallTimeout,
    NetworkError,
    NoSuchProcedure,
    QueueError,
    ServerError,
)
from tests.e2e.client_targets import TarantoolProc, cut_seen, free_port
from tests.proxy import forward
from tests.waiting import wait_for, wait_for_async

SESSION = bytes([0xF0, 0x9F, 0x00, 0xFF]) + bytes(range(0x80, 0x8C))  # not UTF-8

LUA = """
box.cfg{listen='127.0.0.1:PORT', work_dir='WORKDIR', log='WORKDIR/tarantool.log',
        memtx_memory=32 * 1024 * 1024}
box.once('users', function()
    box.schema.user.create('tester', {password='secret'})
    box.schema.user.grant('tester', 'read,write,execute', 'universe')
end)
local fiber = require('fiber')
function echo(...) return ... end
function slow_echo(delay, ...) fiber.sleep(delay) return ... end
-- hold(tag, ...) answers only once let_go(tag) is called; is_held(tag) says it waits.
holding = {}
function hold(tag, ...)
    local cond = fiber.cond()
    holding[tag] = cond
    cond:wait()
    holding[tag] = nil
    return ...
end
function is_held(tag) return holding[tag] ~= nil end
function let_go(tag)
    local cond = holding[tag]
    if cond ~= nil then cond:signal() end
    return cond ~= nil
end
slow_takes = 0
function boom(msg) error(msg) end
function push_then(value) box.session.push('pushed') return value end
identified = {}
function identified_list() return identified end
queue = {tube = {}}
function queue.identify(uuid)
    if uuid ~= nil then table.insert(identified, uuid) return uuid end
    return string.char(SESSION_BYTES)
end
released = {}
function released_list() return released end
function slow_takes_started() return slow_takes end
queue.tube.slow = {
    take = function(self, timeout)
        slow_takes = slow_takes + 1
        hold('slow-take')  -- answers once the test lets it: after the client gave up
        return {7, 't', 'late task'}
    end,
    release = function(self, id) table.insert(released, id) return {id, 'r', 'late task'} end,
}
function queue.state() return 'RUNNING' end
-- A put that counts itself and waits for the test: Tarantool + queue ignores a put's key.
keyed_puts = 0
queue.tube.keyed = {
    put = function(self, data, opts)
        keyed_puts = keyed_puts + 1
        hold('keyed-put')
        return {keyed_puts, 'r', data}
    end,
}
function keyed_put_count() return keyed_puts end
function queue.create_tube(name, kind, opts)
    -- the real module returns the tube object, which CALL cannot serialize
    return function() end
end
READY
""".replace("SESSION_BYTES", ", ".join(str(b) for b in SESSION))

pytestmark = pytest.mark.skipif(not TarantoolProc.available(), reason="tarantool not installed")


@pytest.fixture(scope="module")
def tarantool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TarantoolProc]:
    proc = TarantoolProc(tmp_path_factory.mktemp("tarantool"), LUA).start()
    try:
        yield proc
    finally:
        proc.stop()


def aconnect(port: int, **kwargs: object) -> aio._Connecting:
    kwargs.setdefault("user", "tester")
    kwargs.setdefault("password", "secret")
    return aio.connect("127.0.0.1", port, **kwargs)  # type: ignore[arg-type]


def bconnect(port: int, **kwargs: object) -> blocking.Connection:
    kwargs.setdefault("user", "tester")
    kwargs.setdefault("password", "secret")
    return blocking.connect("127.0.0.1", port, **kwargs)  # type: ignore[arg-type]


# --- calls and errors -------------------------------------------------------------------


async def test_async_ping_call_eval(tarantool: TarantoolProc) -> None:
    async with aconnect(tarantool.port) as conn:
        await conn.ping()
        assert await conn.call("echo", 1, "two", [3], {"k": None}) == [1, "two", [3], {"k": None}]
        assert await conn.eval("return 1 + ..., 'x'", 41) == [42, "x"]
        assert await conn.call("push_then", 7) == [7]
        assert conn.greeting is not None and conn.greeting.version[0] == 2


def test_blocking_ping_call_eval(tarantool: TarantoolProc) -> None:
    with bconnect(tarantool.port) as conn:
        conn.ping()
        assert conn.call("echo", "é", None, 1.5) == ["é", None, 1.5]
        assert conn.eval("return ...", "a", 2) == ["a", 2]
        assert conn.call("push_then", 7) == [7]


async def test_async_server_errors_carry_code_and_message(tarantool: TarantoolProc) -> None:
    async with aconnect(tarantool.port) as conn:
        with pytest.raises(QueueError) as info:
            await conn.call("boom", "it broke")
        assert info.value.code == 32 and info.value.message.endswith("it broke")
        assert info.value.text == "it broke"
        with pytest.raises(NoSuchProcedure) as missing:
            await conn.call("no_such_fn")
        assert missing.value.message == "Procedure 'no_such_fn' is not defined"
        await conn.ping()  # the connection survives errors


def test_blocking_server_errors(tarantool: TarantoolProc) -> None:
    with bconnect(tarantool.port) as conn:
        with pytest.raises(ServerError) as info:
            conn.call("boom", "bad")
        assert info.value.code == 32
        with pytest.raises(NoSuchProcedure):
            conn.call("nope")
        conn.ping()


@pytest.mark.parametrize(
    ("user", "password", "code"), [("tester", "wrong", 47), ("nobody", "x", 45)]
)
async def test_async_bad_credentials(
    tarantool: TarantoolProc, user: str, password: str, code: int
) -> None:
    with pytest.raises(AuthError) as info:
        await aconnect(tarantool.port, user=user, password=password)
    assert info.value.code == code


def test_blocking_bad_credentials(tarantool: TarantoolProc) -> None:
    with pytest.raises(AuthError) as info:
        bconnect(tarantool.port, password="wrong")
    assert info.value.code == 47


async def test_no_server_is_a_network_error() -> None:
    port = free_port()
    with pytest.raises(NetworkError, match=f"cannot connect to 127.0.0.1:{port}"):
        await aconnect(port)
    with pytest.raises(NetworkError, match=f"cannot connect to 127.0.0.1:{port}"):
        bconnect(port)


# --- pipelining and timeouts ----------------------------------------------------------


async def test_async_pipelines_1000_calls_on_one_socket(tarantool: TarantoolProc) -> None:
    async with aconnect(tarantool.port) as conn:
        results = await asyncio.gather(*(conn.call("echo", i, str(i)) for i in range(1000)))
        assert results == [[i, str(i)] for i in range(1000)]


async def test_async_replies_come_back_out_of_order(tarantool: TarantoolProc) -> None:
    async with aconnect(tarantool.port) as conn:
        slow = asyncio.ensure_future(conn.call("hold", "out-of-order", "slow"))
        await wait_for_async(lambda: held(conn, "out-of-order"), "the slow call running")
        assert await conn.call("echo", "fast") == ["fast"]
        assert not slow.done()
        assert await conn.call("let_go", "out-of-order") == [True]
        assert await slow == ["slow"]


async def test_async_call_timeout_keeps_the_connection(tarantool: TarantoolProc) -> None:
    async with aconnect(tarantool.port, call_timeout=0.2) as conn:
        with pytest.raises(CallTimeout):
            await conn.call("slow_echo", 0.5, "late")
        assert await conn.call("slow_echo", 0.5, "waited", timeout=0.5) == ["waited"]
        assert await conn.call("echo", "next") == ["next"]


def test_blocking_call_timeout_skips_the_late_reply(tarantool: TarantoolProc) -> None:
    with bconnect(tarantool.port, call_timeout=0.2) as conn:
        with pytest.raises(CallTimeout):
            conn.call("hold", "skipped", "late")
        # The late reply comes before or after let_go's own: skipped either way.
        assert conn.call("let_go", "skipped") == [True]
        assert conn.call("echo", "next") == ["next"]


# --- the queue bits the connection uses ---------------------------------------------------


async def test_identify_returns_raw_bytes(tarantool: TarantoolProc) -> None:
    async with aconnect(tarantool.port) as conn:
        assert await conn.identify() == SESSION
        assert conn.session == SESSION
    with bconnect(tarantool.port) as sync_conn:
        assert sync_conn.identify() == SESSION


async def test_create_tube_accepts_tarantools_unserializable_answer(
    tarantool: TarantoolProc,
) -> None:
    async with aconnect(tarantool.port) as conn:
        tube = await conn.create_tube("jobs", "fifottl", ttr=5)
        assert tube.name == "jobs"
    with bconnect(tarantool.port) as sync_conn:
        assert sync_conn.create_tube("jobs", "fifo").name == "jobs"


# --- reconnects ---------------------------------------------------------------------------


async def reconnected(conn: aio.Connection, count: int = 1) -> None:
    """Until the client has noticed a cut and reconnected."""
    await wait_for_async(lambda: conn.reconnects >= count and conn.connected, "a reconnect")


async def disconnected(conn: aio.Connection) -> None:
    """Until the client has seen its connection close."""
    await wait_for_async(lambda: not conn.connected, "the close seen")


async def held(conn: aio.Connection, tag: str) -> bool:
    """The Lua `hold(tag)` call is running on the server (on another connection
    when this one is to stay free for the call's own reply)."""
    return (await conn.call("is_held", tag)) == [True]


async def identified(conn: aio.Connection) -> list[bytes]:
    from queuebox.protocol import as_bytes

    (rows,) = await conn.call("identified_list")
    return [as_bytes(row) for row in rows]


async def test_async_reconnects_after_a_cut_and_rejoins_the_session(
    tarantool: TarantoolProc,
) -> None:
    with forward(tarantool.port) as proxy:
        async with aconnect(proxy.port, backoff_initial=0.01) as conn:
            await conn.ensure_session()
            before = len(await identified(conn))
            proxy.cut_all()
            await reconnected(conn)
            assert await conn.call("echo", "again") == ["again"]
            assert conn.reconnects == 1 and proxy.accepted == 2
            rejoined = await identified(conn)
            assert rejoined[before:] == [SESSION]


async def test_async_calls_in_flight_fail_when_the_connection_is_cut(
    tarantool: TarantoolProc,
) -> None:
    from queuebox.clients.errors import ConnectionLost

    with forward(tarantool.port) as proxy:
        async with aconnect(proxy.port, backoff_initial=0.01) as conn:
            pending = asyncio.ensure_future(conn.call("hold", "in-flight", "x"))
            await wait_for_async(lambda: held(conn, "in-flight"), "the call running")
            proxy.cut_all()
            with pytest.raises(ConnectionLost):
                await pending
            assert await conn.call("echo", 1) == [1]


async def test_a_keyed_put_cut_mid_call_is_not_sent_again_to_tarantool(
    tarantool: TarantoolProc,
) -> None:
    """Following the writable instance, a keyed put whose connection broke is sent again
    only where the server honours keys: Tarantool + queue ignores them (a second send
    could make a second task), so the put's unknown outcome is raised, sent once."""
    from queuebox.clients.errors import ConnectionLost

    with forward(tarantool.port) as proxy:
        address = f"127.0.0.1:{proxy.port}"
        async with aconnect(0, addresses=[address], backoff_initial=0.01) as conn:
            (before,) = await conn.call("keyed_put_count")
            put = asyncio.ensure_future(conn.tube("keyed").put("x"))  # keyed by default
            await wait_for_async(lambda: held(conn, "keyed-put"), "the put running")
            proxy.cut_all()
            with pytest.raises(ConnectionLost):
                await asyncio.wait_for(put, 10)  # a put sent again would be held again
            assert await conn.call("keyed_put_count") == [before + 1]
            assert await conn.call("let_go", "keyed-put") == [True]


def test_blocking_keyed_put_cut_mid_call_is_not_sent_again_to_tarantool(
    tarantool: TarantoolProc,
) -> None:
    from queuebox.clients.errors import ConnectionLost

    with forward(tarantool.port) as proxy:
        address = f"127.0.0.1:{proxy.port}"
        with (
            bconnect(0, addresses=[address], backoff_initial=0.01) as conn,
            bconnect(tarantool.port) as watcher,
        ):
            before = watcher.call("keyed_put_count")[0]
            outcome: list[BaseException] = []

            def put() -> None:
                try:
                    conn.tube("keyed").put("x")
                except BaseException as exc:  # noqa: BLE001 - handed to the test
                    outcome.append(exc)

            putter = threading.Thread(target=put)
            putter.start()
            wait_for(lambda: watcher.call("is_held", "keyed-put") == [True], "the put running")
            proxy.cut_all()
            putter.join(10)  # a put sent again would be held again
            assert not putter.is_alive() and isinstance(outcome[0], ConnectionLost)
            assert watcher.call("keyed_put_count") == [before + 1]
            assert watcher.call("let_go", "keyed-put") == [True]


async def test_async_without_reconnect_a_cut_is_final(tarantool: TarantoolProc) -> None:
    with forward(tarantool.port) as proxy:
        async with aconnect(proxy.port, reconnect=False) as conn:
            await conn.ping()
            proxy.cut_all()
            await disconnected(conn)
            with pytest.raises(NetworkError):
                await conn.ping()


def test_blocking_reconnects_after_a_cut_and_rejoins_the_session(
    tarantool: TarantoolProc,
) -> None:
    from queuebox.protocol import as_bytes

    with forward(tarantool.port) as proxy, bconnect(proxy.port, backoff_initial=0.01) as conn:
        conn.ensure_session()
        before = len(conn.call("identified_list")[0])
        proxy.cut_all()
        wait_for(lambda: cut_seen(conn), "the cut seen")
        assert conn.call("echo", "again") == ["again"]
        rows = conn.call("identified_list")[0]
        assert [as_bytes(row) for row in rows[before:]] == [SESSION]
        assert conn.reconnects == 1


async def test_async_reconnects_after_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="queuebox.client")
    proc = TarantoolProc(tmp_path / "restart", LUA).start()
    try:
        async with aconnect(proc.port, backoff_initial=0.02, backoff_max=0.2) as conn:
            await conn.ping()
            proc.stop()
            await disconnected(conn)
            waiting = asyncio.ensure_future(conn.call("echo", "after restart"))
            tries = caplog.text.count("failed: ")
            # Two more failed dials while the call waits: it waits, it is not failed.
            await wait_for_async(lambda: caplog.text.count("failed: ") >= tries + 2, "two tries")
            assert not waiting.done() and not conn.connected
            proc.start()
            assert await asyncio.wait_for(waiting, 10) == ["after restart"]
    finally:
        proc.stop()


def test_blocking_reconnects_after_a_restart(tmp_path: Path) -> None:
    proc = TarantoolProc(tmp_path / "restart", LUA).start()
    try:
        with bconnect(proc.port, backoff_initial=0.02, backoff_max=0.2, call_timeout=0.5) as conn:
            conn.ping()
            proc.stop()
            with pytest.raises(NetworkError, match="cannot reconnect"):
                conn.ping()
            proc.start()
            assert conn.call("echo", 5) == [5]
    finally:
        proc.stop()


async def test_async_reconnect_timeout_gives_up(tmp_path: Path) -> None:
    proc = TarantoolProc(tmp_path / "gone", LUA).start()
    try:
        async with aconnect(proc.port, backoff_initial=0.02, reconnect_timeout=0.3) as conn:
            proc.stop()
            with pytest.raises(NetworkError):
                await asyncio.wait_for(conn.ping(), 5)
    finally:
        proc.stop()


def test_async_client_runs_on_uvloop(tarantool: TarantoolProc) -> None:
    import uvloop

    async def main() -> list[list[object]]:
        async with aconnect(tarantool.port, call_timeout=5) as conn:
            return await asyncio.gather(*(conn.call("echo", i) for i in range(200)))

    assert uvloop.run(main()) == [[i] for i in range(200)]


async def released(conn: aio.Connection, count: int) -> list[int]:
    async def rows() -> list[int] | None:
        (got,) = await conn.call("released_list")
        return list(got) if len(got) >= count else None

    return await wait_for_async(rows, f"{count} releases")  # type: ignore[no-any-return]


async def let_the_slow_take_answer(conn: aio.Connection) -> None:
    """The held take's late reply, sent once the client has given up on it."""

    async def held() -> bool:
        (waiting,) = await conn.call("is_held", "slow-take")
        return bool(waiting)

    await wait_for_async(held, "the slow take held on the server")
    await conn.call("let_go", "slow-take")


async def test_a_take_that_timed_out_releases_its_late_task(tarantool: TarantoolProc) -> None:
    async with aconnect(tarantool.port, call_timeout=0.1) as conn:
        (before,) = await conn.call("released_list")
        with pytest.raises(CallTimeout):
            await conn.tube("slow").take(0)
        await let_the_slow_take_answer(conn)
        assert await released(conn, len(before) + 1) == [*before, 7]


async def test_a_cancelled_take_releases_its_late_task(tarantool: TarantoolProc) -> None:
    async with aconnect(tarantool.port) as conn:
        (before,) = await conn.call("released_list")
        (before_takes,) = await conn.call("slow_takes_started")

        async def take_started() -> bool:
            (started,) = await conn.call("slow_takes_started")
            return bool(started > before_takes)

        taking = asyncio.ensure_future(conn.tube("slow").take(5))
        await wait_for_async(take_started, "the take started on the server")
        taking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await taking
        await let_the_slow_take_answer(conn)
        assert await released(conn, len(before) + 1) == [*before, 7]


def test_blocking_take_that_timed_out_releases_its_late_task(tarantool: TarantoolProc) -> None:
    with bconnect(tarantool.port, call_timeout=0.1) as conn:
        (before,) = conn.call("released_list")
        with pytest.raises(CallTimeout):
            conn.tube("slow").take(0)
        wait_for(lambda: conn.call("is_held", "slow-take") == [True], "the slow take held")
        conn.call("let_go", "slow-take")
        # The next calls read the late reply when it comes, then release its task.
        wait_for(lambda: conn.call("released_list") == [[*before, 7]], "the late task released")
