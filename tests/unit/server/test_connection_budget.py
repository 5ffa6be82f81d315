"""A connection reading under the buffer budget (limits.py, shell.py), driven with a fake
transport: a big frame goes into one buffer of its size, a frame without room waits
unread, an evicted frame is answered and its rest dropped, replies nobody reads close
the connection once the budget needs their memory."""

from __future__ import annotations

import asyncio

from queuebox.server.core.app import App
from queuebox.server.core.builtins import install
from queuebox.server.net.reading import SCRATCH_SIZE
from queuebox.server.runtime.limits import BufferBudget
from queuebox.server.settings.config import Config
from tests.unit.server.fake_transport import record_reads
from tests.unit.server.test_server_connection import Harness, call, frame

MiB = 1 << 20


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def app_with_budget(capacity: int, clock: Clock) -> App:
    app = App(Config(test_hooks=True))
    install(app)
    app.buffer_budget = BufferBudget(capacity, clock=clock)
    return app


def open_conn(app: App) -> Harness:
    h = Harness(app)
    h.take_writes()  # the greeting
    return h


def deliver(h: Harness, data: bytes) -> None:
    """Bytes from the network: read only while the connection reads."""
    h.transport.deliver(h.conn, data)


async def test_a_big_frame_is_read_into_one_buffer_of_its_size() -> None:
    app = app_with_budget(64 * MiB, Clock())
    h = open_conn(app)
    big = call(5, "queuebox.echo", b"x" * (3 * MiB))
    sizes = record_reads(h.conn)
    deliver(h, big)
    # One small read of the shared buffer, then the rest of the frame at once.
    assert sizes[0] == SCRATCH_SIZE and sizes[1] == len(big) - SCRATCH_SIZE
    assert app.buffer_budget.total == 0  # given back once handled
    [(code, sync, body)] = h.take_replies()
    assert (code, sync, body[0x30]) == (0, 5, [b"x" * (3 * MiB)])


async def test_a_frame_without_room_waits_unread_and_goes_on_when_room_comes() -> None:
    app = app_with_budget(5 * MiB, Clock())
    hog, waiter = open_conn(app), open_conn(app)
    hog_frame = call(1, "queuebox.echo", b"h" * (4 * MiB))
    deliver(hog, hog_frame[: 2 * MiB])  # reserved: 4 MiB of 5
    deliver(waiter, call(2, "queuebox.echo", b"w" * (2 * MiB)))
    assert waiter.transport.paused and app.buffer_budget.is_waiting(waiter.conn)
    assert waiter.take_writes() == []
    deliver(hog, hog_frame[2 * MiB :])  # the hog's frame is done: its room comes back
    assert not waiter.transport.paused
    assert [r[1] for r in waiter.take_replies()] == [2]
    assert app.buffer_budget.total == 0


async def test_an_evicted_frame_is_answered_and_the_rest_of_it_dropped() -> None:
    clock = Clock()
    app = app_with_budget(5 * MiB, clock)
    stalled, other = open_conn(app), open_conn(app)
    whole = call(77, "queuebox.echo", b"s" * (4 * MiB))
    deliver(stalled, whole[:MiB])
    clock.now += 2  # stalled for a while
    deliver(other, call(3, "queuebox.echo", b"o" * (2 * MiB)))
    await asyncio.sleep(0)  # the answer goes out at the end of this loop turn
    [(code, sync, body)] = stalled.take_replies()
    assert (code, sync) == (0x8000 | 2, 77)  # ER_MEMORY_ISSUE, naming the request
    assert "Failed to allocate" in body[0x31]
    assert [r[1] for r in other.take_replies()] == [3]
    deliver(stalled, whole[MiB:] + frame(64, 8))  # the rest, then a PING
    assert [(r[0], r[1]) for r in stalled.take_replies()] == [(0, 8)]
    assert app.buffer_budget.total == 0


async def test_replies_nobody_reads_close_the_connection_when_the_budget_needs_them() -> None:
    clock = Clock()
    app = app_with_budget(3 * MiB, clock)
    reader, waiter = open_conn(app), open_conn(app)
    reader.transport.get_write_buffer_size = lambda: 2 * MiB  # type: ignore[method-assign]
    deliver(reader, frame(64, 1))  # its reply joins 2 MiB it never took
    assert app.buffer_budget.total == 2 * MiB
    deliver(waiter, call(2, "queuebox.echo", b"w" * (2 * MiB)))
    assert waiter.transport.paused  # 2 + 2 > 3: waits
    clock.now += 11  # the reader took nothing for 11 s
    app.buffer_budget.settle()
    assert reader.transport.aborted
    reader.conn.connection_lost(None)
    assert not waiter.transport.paused
    assert [r[1] for r in waiter.take_replies()] == [2]


async def test_a_closed_connection_gives_back_its_frame() -> None:
    app = app_with_budget(64 * MiB, Clock())
    h = open_conn(app)
    big = call(1, "queuebox.echo", b"x" * (2 * MiB))
    deliver(h, big[:MiB])
    assert app.buffer_budget.total == len(big)  # the whole frame, reserved
    h.conn.connection_lost(None)
    assert app.buffer_budget.total == 0
