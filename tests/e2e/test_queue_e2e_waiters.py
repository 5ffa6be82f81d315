"""Waiting takes and puts over real sockets (QUEUE.md §6 "Waiting", §11 "Ordering and blocking").

Consumers are raw sockets: a take is sent and left pending, a PING on the
same socket answers once the take has registered its wait (requests of one
connection are handled in order, and a waiting take never holds up the next
request). After every producer call, `select` shows which consumer was
answered, so the order in which waiters are served is observed directly.
"""

from __future__ import annotations

import select
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
import tarantool

from tests.e2e.serverproc import (
    CALL,
    PING,
    RawClient,
    Reply,
    ServerProc,
    frame,
    login_tester,
    unique,
)
from tests.waiting import wait_for, wait_for_waiting_takes, waiting_takes

FOREVER = None


@pytest.fixture(scope="module")
def admin(server: ServerProc) -> Iterator[tarantool.Connection]:
    c = login_tester(server.port)
    try:
        yield c
    finally:
        c.close()


def make_tube(admin: tarantool.Connection, type_: str, opts: dict[str, Any] | None = None) -> str:
    name = unique(type_)
    admin.call("queue.create_tube", name, type_, opts or {})
    return name


def call(admin: tarantool.Connection, tube: str, method: str, *args: Any) -> Any:
    return admin.call(f"queue.tube.{tube}:{method}", *args).data


def start_take(client: RawClient, tube: str, timeout: float | None) -> int:
    """Send a take and return once the server has registered it as waiting."""
    args = [] if timeout is FOREVER else [timeout]
    sync = client.request(CALL, {0x22: f"queue.tube.{tube}:take", 0x21: args})
    assert client.roundtrip(PING).code == 0
    return sync


def answered(clients: list[RawClient], timeout: float = 2.0) -> list[int]:
    """Indexes of the clients with a reply ready within `timeout` (none: [])."""
    readable, _, _ = select.select([c.sock for c in clients], [], [], timeout)
    return [i for i, c in enumerate(clients) if c.sock in readable]


def all_answered(clients: list[RawClient], timeout: float = 2.0) -> list[int]:
    """Wait until every client has a reply ready; their indexes."""
    deadline = time.monotonic() + timeout
    while len(ready := answered(clients, 0.01)) < len(clients):
        assert time.monotonic() < deadline, f"only {ready} answered"
    return ready


def next_reply(clients: list[RawClient], timeout: float = 2.0) -> tuple[int, Reply]:
    """The one client answered next, and its reply."""
    ready = answered(clients, timeout)
    assert len(ready) == 1, f"expected exactly one answer, got {ready}"
    return ready[0], clients[ready[0]].recv()


def open_clients(stack: ExitStack, port: int, n: int) -> list[RawClient]:
    return [stack.enter_context(RawClient(port)) for _ in range(n)]


# --- the order of waiters (QUEUE.md §6) -------------------------------------------------


def test_five_waiters_are_served_by_timeout_then_start_then_connection(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    tube = make_tube(admin, "fifo")
    timeouts = {"A": 10, "B": 5, "C": FOREVER, "D": 5, "E": FOREVER}
    with ExitStack() as stack:
        clients = open_clients(stack, server.port, 5)  # opened in the order A..E
        for waiting, (client, timeout) in enumerate(zip(clients, timeouts.values(), strict=True)):
            start_take(client, tube, timeout)
            # Each wait begun before the next is sent: D waits after B.
            wait_for_waiting_takes(server.port, tube, waiting + 1)
        served = []
        for n in range(5):
            assert call(admin, tube, "put", n) == [[n, "r", n]]
            who, reply = next_reply(clients)
            assert reply.data == [[n, "t", n]]
            served.append("ABCDE"[who])
        assert served == ["B", "D", "A", "C", "E"]


def test_forever_waiters_go_in_connection_order_not_wait_order(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    tube = make_tube(admin, "fifottl")
    with RawClient(server.port) as x, RawClient(server.port) as y:
        start_take(y, tube, FOREVER)  # Y waits first ...
        wait_for_waiting_takes(server.port, tube)
        start_take(x, tube, FOREVER)  # ... but X connected first
        call(admin, tube, "put", "first")
        assert next_reply([x, y])[0] == 0
        call(admin, tube, "put", "second")
        assert next_reply([x, y])[0] == 1


def test_each_transition_to_ready_serves_one_waiter(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    tube = make_tube(admin, "fifo")
    with ExitStack() as stack:
        clients = open_clients(stack, server.port, 4)
        for _ in range(4):
            call(admin, tube, "put", "x")
            call(admin, tube, "take", 0)
        for task_id in range(4):
            call(admin, tube, "bury", task_id)
        for client in clients[:3]:
            start_take(client, tube, 5)
        # kick(3) wakes three waiters; the fourth task stays buried.
        assert call(admin, tube, "kick", 3) == [3]
        got = [clients[i].recv().data[0] for i in all_answered(clients[:3])]
        assert sorted(task[0] for task in got) == [0, 1, 2]
        stats = admin.call("queue.statistics", tube).data[0]["tasks"]
        assert (stats["taken"], stats["buried"]) == (3, 1)
        # A release serves a waiter too.
        start_take(clients[3], tube, 5)
        released = got[0][0]
        assert clients[0].call(f"queue.tube.{tube}:release", released).data == [
            [released, "r", "x"]
        ]
        who, reply = next_reply(clients)
        assert who == 3 and reply.data == [[released, "t", "x"]]


def test_five_waiting_takes_and_five_spread_puts_all_get_a_task(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    tube = make_tube(admin, "fifottl")
    with ExitStack() as stack:
        clients = open_clients(stack, server.port, 5)
        for client in clients:
            start_take(client, tube, 1)
        for n in range(5):
            call(admin, tube, "put", n)
            wait_for(lambda n=n: waiting_takes(admin, tube) == 4 - n, f"put {n} taken")
        got = sorted(client.recv().data[0][2] for client in clients)
    assert got == [0, 1, 2, 3, 4]


def test_a_take_times_out_with_nothing(server: ServerProc, admin: tarantool.Connection) -> None:
    tube = make_tube(admin, "fifo")
    with RawClient(server.port) as client:
        started = time.monotonic()
        assert client.call(f"queue.tube.{tube}:take", 0.2).data == []
        assert time.monotonic() - started >= 0.18  # it waited (timers may fire a hair early)
        # The timed-out waiter is gone: the next put is not lost to it.
        call(admin, tube, "put", "x")
        assert client.call(f"queue.tube.{tube}:take", 0).data == [[0, "t", "x"]]


# --- a waiting call does not block its connection (QUEUE.md §1 "Concurrency") -----------


def test_a_blocked_take_does_not_block_the_next_request_on_the_same_socket(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    tube = make_tube(admin, "fifo")
    with RawClient(server.port) as client:
        client.send(
            frame(CALL, 1, {0x22: f"queue.tube.{tube}:take", 0x21: [30]})
            + frame(CALL, 2, {0x22: f"queue.tube.{tube}:put", 0x21: ["x"]})
        )
        first = client.recv()
        # The put woke the take: it answers now, not when its 30 s are up.
        assert answered([client], 2.0) == [0]
        second = client.recv()
    assert (first.sync, first.data) == (2, [[0, "r", "x"]])
    assert (second.sync, second.data) == (1, [[0, "t", "x"]])


# --- utube: one taken task per utube (QUEUE.md §11) -------------------------------------

UNBLOCKERS = {
    # what the consumer does with the first task -> the task the waiter then gets
    "ack": (lambda t, i: ("ack", i), 1),
    "bury": (lambda t, i: ("bury", i), 1),
    "release": (lambda t, i: ("release", i), 0),
    "release_delay": (lambda t, i: ("release", i, {"delay": 30}), None),
}


@pytest.mark.parametrize("type_", ["utube", "utubettl"])
@pytest.mark.parametrize("how", list(UNBLOCKERS))
def test_a_utube_gives_one_task_at_a_time_and_its_end_serves_a_waiter(
    server: ServerProc, admin: tarantool.Connection, type_: str, how: str
) -> None:
    tube = make_tube(admin, type_)
    for data in ("a1", "a2"):
        call(admin, tube, "put", data, {"utube": "A"})
    call(admin, tube, "put", "b1", {"utube": "B"})
    with RawClient(server.port) as worker, RawClient(server.port) as waiter:
        assert worker.call(f"queue.tube.{tube}:take", 0).data == [[0, "t", "a1"]]
        assert waiter.call(f"queue.tube.{tube}:take", 0).data == [[2, "t", "b1"]]
        assert waiter.call(f"queue.tube.{tube}:take", 0).data == []  # a2 waits behind a1
        start_take(waiter, tube, 5)
        assert answered([waiter], 0.05) == []
        make, expected = UNBLOCKERS[how]
        method, *args = make(tube, 0)
        reply = worker.call(f"queue.tube.{tube}:{method}", *args)
        assert reply.error is None
        if expected is None:
            expected = 1  # a1 is delayed, which does not block the utube
        assert answered([waiter], 0.2) == [0]
        assert waiter.recv().data[0][:2] == [expected, "t"]


# --- limfifottl: a put waiting for room -------------------------------------------------


def test_a_full_limfifottl_put_waits_for_an_ack_or_times_out_with_nil(
    server: ServerProc, admin: tarantool.Connection
) -> None:
    tube = make_tube(admin, "limfifottl", {"capacity": 1})
    call(admin, tube, "put", "first")
    with RawClient(server.port) as producer:
        started = time.monotonic()
        assert producer.call(f"queue.tube.{tube}:put", "late", {"timeout": 0.2}).data == [None]
        assert time.monotonic() - started >= 0.18  # it waited (timers may fire a hair early)
        put = producer.request(
            CALL, {0x22: f"queue.tube.{tube}:put", 0x21: ["second", {"timeout": 5}]}
        )
        assert producer.roundtrip(PING).code == 0
        assert answered([producer], 0.05) == []
        assert call(admin, tube, "take", 0) == [[0, "t", "first"]]
        assert answered([producer], 0.05) == []  # a taken task still counts
        assert call(admin, tube, "ack", 0) == [[0, "-", "first"]]
        reply = producer.recv()
    assert (reply.sync, reply.data) == (put, [[0, "r", "second"]])
    assert admin.call("queue.statistics", tube).data[0]["calls"]["put"] == 2
