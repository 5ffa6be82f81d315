"""Both clients given several addresses follow the writable instance (clients/failover.py):
they pick the one whose queue.state() is RUNNING, retry a change refused as read-only
there, retry a read whose connection broke but hand a broken write back to the caller,
re-join their queue session on the instance found again (with in_replicaset, on a
promoted replica too), and follow a promoted replica and an etcd failover. Real servers
(a primary, a read-only replica of it, etcd), real sockets; the CLI too."""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from queuebox.clients import NoWritableInstance, Status, aio, blocking
from queuebox.clients.calls import Call
from queuebox.clients.errors import ConnectionLost, ServerError
from tests.e2e.client_targets import free_port
from tests.e2e.cluster import connect, start_primary, start_replica, wait_equal
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.serverproc import REPO, ServerProc, StartServer, clean_env, unique
from tests.e2e.test_failover import start_pair, wait_running
from tests.proxy import FaultProxy, forward
from tests.waiting import wait_for_async

LOGIN = {"user": "tester", "password": "secret"}
FAST = {"backoff_initial": 0.02, "backoff_max": 0.2, "failover_timeout": 15.0}


@dataclass
class Pair:
    primary: ServerProc
    replica: ServerProc  # read-only, following the primary

    def at(self, proc: ServerProc) -> str:
        return f"127.0.0.1:{proc.port}"


@pytest.fixture
def pair(start_server: StartServer) -> Pair:
    primary = start_primary(start_server)
    return Pair(primary, start_replica(start_server, primary))


def replicated(pair: Pair, tube: str) -> None:
    """Wait until the replica has the primary's tasks of `tube`."""
    with connect(pair.primary) as p, connect(pair.replica) as r:
        wait_equal(p, r, tube)


def sleeper(seconds: float, repeatable: bool) -> Call[Any]:
    """A call the server holds for `seconds` (a test hook), as repeatable as told."""
    return Call("queuebox.sleep", (seconds, "slept"), lambda data: data[0], repeatable=repeatable)


# --- picking the writable instance ------------------------------------------------------


async def test_async_client_puts_to_the_writable_instance(pair: Pair) -> None:
    addresses = [pair.at(pair.replica), pair.at(pair.primary)]
    async with aio.connect(addresses=addresses, **LOGIN, **FAST) as conn:
        assert conn.port == pair.primary.port
        tube = await conn.create_tube(unique("pick"), "fifo")
        task = await tube.put("to the primary")
    with connect(pair.primary) as p:
        assert p.call(f"queue.tube.{tube.name}:peek", [task.id]).data[0][2] == "to the primary"


def test_blocking_client_puts_to_the_writable_instance(pair: Pair) -> None:
    addresses = f"{pair.at(pair.replica)},{pair.at(pair.primary)}"
    with blocking.connect(addresses=addresses, **LOGIN, **FAST) as conn:
        assert conn.port == pair.primary.port
        tube = conn.create_tube(unique("pick"), "fifo")
        task = tube.put("to the primary")
    with connect(pair.primary) as p:
        assert p.call(f"queue.tube.{tube.name}:peek", [task.id]).data[0][2] == "to the primary"


async def test_no_writable_instance_is_a_clear_error_after_the_timeout(pair: Pair) -> None:
    closed = free_port()
    addresses = [pair.at(pair.replica), f"127.0.0.1:{closed}"]
    options = {**LOGIN, **FAST, "failover_timeout": 0.5}
    with pytest.raises(NoWritableInstance) as err:
        await aio.connect(addresses=addresses, **options)
    text = str(err.value)
    assert f"{pair.at(pair.replica)}: INIT" in text
    assert f"cannot connect to 127.0.0.1:{closed}" in text
    assert text.endswith(" s)") and "gave up after" in text
    with pytest.raises(NoWritableInstance, match=r"INIT.*gave up after"):
        blocking.connect(addresses=addresses, **options)


# --- a change refused as read-only ------------------------------------------------------


async def test_async_put_refused_as_read_only_goes_to_the_writable_one(
    pair: Pair, caplog: pytest.LogCaptureFixture
) -> None:
    # The address the client first found writable starts refusing changes while the
    # client stays connected (the proxy moves its connection to the replica).
    caplog.set_level(logging.WARNING, logger="queuebox.client")
    tube_name = unique("refused")
    with forward(pair.primary.port) as proxy:
        addresses = [f"127.0.0.1:{proxy.port}", pair.at(pair.primary)]
        async with aio.connect(addresses=addresses, **FAST) as conn:
            assert conn.port == proxy.port
            tube = await conn.create_tube(tube_name, "fifo")
            replicated(pair, tube_name)
            proxy.switch(pair.replica.port)
            task = await tube.put("refused, then put")
            assert conn.port == pair.primary.port
            assert (await tube.peek(task)).data == "refused, then put"
    assert f"127.0.0.1:{proxy.port} is read-only, reconnecting" in caplog.text


def test_blocking_put_refused_as_read_only_goes_to_the_writable_one(
    pair: Pair, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="queuebox.client")
    tube_name = unique("refused")
    with forward(pair.primary.port) as proxy:
        addresses = [f"127.0.0.1:{proxy.port}", pair.at(pair.primary)]
        with blocking.connect(addresses=addresses, **FAST) as conn:
            tube = conn.create_tube(tube_name, "fifo")
            replicated(pair, tube_name)
            proxy.switch(pair.replica.port)
            tasks = tube.put_many(["a", "b", "c"], window=2)
            assert [task.data for task in tasks] == ["a", "b", "c"]
            assert conn.port == pair.primary.port
            assert tube.put("d").id == tasks[-1].id + 1
    assert f"127.0.0.1:{proxy.port} is read-only, reconnecting" in caplog.text
    with connect(pair.primary) as p:
        assert p.call("queue.statistics", [tube_name]).data[0]["tasks"]["ready"] == 4


def test_a_single_address_keeps_the_read_only_error(pair: Pair) -> None:
    # Without a list of addresses there is nothing to follow: the error is the caller's.
    with blocking.connect("127.0.0.1", pair.replica.port, **LOGIN) as conn:
        with pytest.raises(ServerError) as err:
            conn.create_tube(unique("single"), "fifo")
        assert err.value.code == 7


# --- a connection that breaks mid-call --------------------------------------------------


@pytest.fixture
def behind_proxy(pair: Pair) -> Iterator[tuple[Pair, FaultProxy, list[str]]]:
    with forward(pair.primary.port) as proxy:
        yield pair, proxy, [pair.at(pair.replica), f"127.0.0.1:{proxy.port}"]


async def test_async_read_in_flight_is_retried_a_write_is_not(
    behind_proxy: tuple[Pair, FaultProxy, list[str]],
) -> None:
    _, proxy, addresses = behind_proxy
    async with aio.connect(addresses=addresses, **LOGIN, **FAST) as conn:
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, proxy.cut_all)
        assert await conn.run(sleeper(1.0, repeatable=True)) == "slept"
        assert conn.reconnects == 1
        loop.call_later(0.3, proxy.cut_all)
        with pytest.raises(ConnectionLost):
            await conn.run(sleeper(1.0, repeatable=False))
        assert await conn.state() == "RUNNING"  # and the connection carries on
        assert conn.reconnects == 2


def test_blocking_read_in_flight_is_retried_a_write_is_not(
    behind_proxy: tuple[Pair, FaultProxy, list[str]],
) -> None:
    _, proxy, addresses = behind_proxy
    with blocking.connect(addresses=addresses, **LOGIN, **FAST) as conn:
        cut = threading.Timer(0.3, proxy.cut_all)
        cut.start()
        assert conn.run(sleeper(1.0, repeatable=True)) == "slept"
        assert conn.reconnects == 1
        cut = threading.Timer(0.3, proxy.cut_all)
        cut.start()
        with pytest.raises(ConnectionLost):
            conn.run(sleeper(1.0, repeatable=False))
        cut.join()
        assert conn.state() == "RUNNING"
        assert conn.reconnects == 2


async def test_async_session_is_rejoined_on_the_instance_found_again(
    behind_proxy: tuple[Pair, FaultProxy, list[str]],
) -> None:
    _, proxy, addresses = behind_proxy
    async with aio.connect(addresses=addresses, **LOGIN, **FAST) as conn:
        await conn.cfg(ttr=60)
        session = await conn.identify()
        tube = await conn.create_tube(unique("session"), "fifottl")
        await tube.put("held")
        taken = await tube.take(0)
        assert taken is not None
        proxy.cut_all()
        # A read goes first: if it leaves before the client sees the cut, it is retried.
        assert (await tube.peek(taken)).status is Status.TAKEN
        # Only the session that took a task may ack it: the new connection is that session.
        assert (await tube.ack(taken)).status is Status.DONE
        assert conn.reconnects == 1 and conn.session == session


def test_blocking_session_is_rejoined_on_the_instance_found_again(
    behind_proxy: tuple[Pair, FaultProxy, list[str]],
) -> None:
    _, proxy, addresses = behind_proxy
    with blocking.connect(addresses=addresses, **LOGIN, **FAST) as conn:
        conn.cfg(ttr=60)
        session = conn.identify()
        tube = conn.create_tube(unique("session"), "fifottl")
        tube.put("held")
        taken = tube.take(0)
        assert taken is not None
        proxy.cut_all()
        assert tube.peek(taken).status is Status.TAKEN
        assert tube.ack(taken).status is Status.DONE
        assert conn.reconnects == 1 and conn.session == session


# --- the primary goes, the replica is promoted ------------------------------------------


async def test_async_client_follows_a_promoted_replica(
    pair: Pair, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="queuebox.client")
    addresses = [pair.at(pair.primary), pair.at(pair.replica)]
    async with aio.connect(addresses=addresses, **LOGIN, **FAST) as conn:
        tube = await conn.create_tube(unique("promote"), "fifo")
        before = await tube.put("before")
        replicated(pair, tube.name)
        pair.primary.stop()
        # A put sent before the loss is seen would be a lost write.
        await wait_for_async(lambda: not conn.connected, "the loss seen")
        tries = caplog.text.count("failed: ")
        putting = asyncio.ensure_future(tube.put("after"))
        # Two more rounds of dials found no writable instance while the put waits.
        await wait_for_async(lambda: caplog.text.count("failed: ") >= tries + 2, "two tries")
        assert not putting.done()  # no writable instance yet: the put waits
        with connect(pair.replica) as r:
            assert r.call("queuebox.promote").data[0]["promoted"] is True
        after = await asyncio.wait_for(putting, 15)
        assert conn.port == pair.replica.port
        assert (await tube.peek(before)).data == "before"
        assert (await tube.peek(after)).data == "after"


def promote(replica: ServerProc) -> None:
    with connect(replica) as r:
        assert r.call("queuebox.promote").data[0]["promoted"] is True


async def test_async_session_survives_the_switch_to_a_promoted_replica(pair: Pair) -> None:
    # With in_replicaset the session and what it holds replicate (QUEUE.md §13): the
    # client re-identifies on the new primary and acks the task it took on the old one.
    addresses = [pair.at(pair.primary), pair.at(pair.replica)]
    async with aio.connect(addresses=addresses, **LOGIN, **FAST) as conn:
        await conn.cfg(ttr=60, in_replicaset=True)
        session = await conn.identify()
        tube = await conn.create_tube(unique("switch"), "fifottl")
        await tube.put("held across the switch")
        taken = await tube.take(0)
        assert taken is not None
        replicated(pair, tube.name)
        pair.primary.stop()
        # An ack sent before the loss is seen would be a lost write.
        await wait_for_async(lambda: not conn.connected, "the loss seen", 5)
        acking = asyncio.ensure_future(tube.ack(taken))
        promote(pair.replica)
        assert (await asyncio.wait_for(acking, 15)).status is Status.DONE
        assert conn.port == pair.replica.port and conn.session == session


def test_blocking_session_survives_the_switch_to_a_promoted_replica(pair: Pair) -> None:
    addresses = [pair.at(pair.primary), pair.at(pair.replica)]
    with blocking.connect(addresses=addresses, **LOGIN, **FAST) as conn:
        conn.cfg(ttr=60, in_replicaset=True)
        session = conn.identify()
        tube = conn.create_tube(unique("switch"), "fifottl")
        tube.put("held across the switch")
        taken = tube.take(0)
        assert taken is not None
        replicated(pair, tube.name)
        pair.primary.stop()
        later = threading.Timer(0.5, promote, (pair.replica,))
        later.start()
        try:
            # The ack waits inside the call until the replica is writable.
            assert tube.ack(taken).status is Status.DONE
        finally:
            later.join()
        assert conn.port == pair.replica.port and conn.session == session


# --- failover coordinated by etcd -------------------------------------------------------


async def test_async_client_follows_etcd_failover_after_a_read_only_refusal(
    start_server: StartServer, etcd: EtcdProc, caplog: pytest.LogCaptureFixture
) -> None:
    # The primary freezes, the replica takes the lease; the primary resumes fenced and
    # refuses the client's next put as read-only: the put goes to the new primary.
    caplog.set_level(logging.WARNING, logger="queuebox.client")
    primary, replica = start_pair(start_server, etcd)
    assert primary.proc is not None
    addresses = [f"127.0.0.1:{primary.port}", f"127.0.0.1:{replica.port}"]
    try:
        async with aio.connect(addresses=addresses, **LOGIN, **FAST) as conn:
            assert conn.port == primary.port
            tube = await conn.create_tube(unique("etcd"), "fifo")
            before = await tube.put("before")
            replicated(Pair(primary, replica), tube.name)
            primary.proc.send_signal(signal.SIGSTOP)
            wait_running(replica, time.monotonic())
            primary.proc.send_signal(signal.SIGCONT)
            after = await tube.put("after")
            assert conn.port == replica.port
            assert [(await tube.peek(t)).data for t in (before, after)] == ["before", "after"]
    finally:
        primary.proc.send_signal(signal.SIGCONT)
    assert f"127.0.0.1:{primary.port} is read-only, reconnecting" in caplog.text


def test_blocking_client_follows_etcd_failover_after_a_kill(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    primary, replica = start_pair(start_server, etcd)
    assert primary.proc is not None
    addresses = [f"127.0.0.1:{primary.port}", f"127.0.0.1:{replica.port}"]
    with blocking.connect(addresses=addresses, **LOGIN, **FAST) as conn:
        tube = conn.create_tube(unique("etcd"), "fifo")
        before = tube.put("before")
        replicated(Pair(primary, replica), tube.name)
        primary.proc.kill()
        primary.proc.wait(10)
        # The put waits inside the call: no address is writable until the lease lapses.
        after = tube.put("after")
        assert conn.port == replica.port and conn.reconnects == 1
        assert [tube.peek(t).data for t in (before, after)] == ["before", "after"]


# --- the command line -------------------------------------------------------------------


def queuebox(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queuebox", *args], cwd=REPO, capture_output=True, text=True,
        timeout=60, env={**clean_env(), **(env or {})},
    )  # fmt: skip


def test_cli_runs_on_the_writable_address(pair: Pair) -> None:
    login = ["--user", "tester", "--password", "secret"]
    ro, rw = pair.at(pair.replica), pair.at(pair.primary)
    done = queuebox("ping", "--address", ro, "--address", rw, *login)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"PONG from {rw} ")
    done = queuebox("create-tube", "jobs", "fifo", *login, env={"QUEUEBOX_ADDRESSES": f"{ro},{rw}"})
    assert done.returncode == 0, done.stderr
    with connect(pair.primary) as p:
        assert p.call("queue.tube", ["jobs"]).data == [True]
    # Long enough to reach the replica and hear its state on a loaded machine (0.3 s
    # was not: the error then said "timed out", not what the replica answered).
    done = queuebox("ping", "--address", ro, "--failover-timeout", "2", *login)
    assert done.returncode == 3
    assert f"{ro}: INIT" in done.stderr
