"""How many requests one write of the asyncio client carries (clients/aio/wire.py):
every request made in one turn of the loop in one write by default; at most
`write_every` a write when a connection asks for it (the worker runner: 16)."""

from __future__ import annotations

import asyncio

from queuebox.clients.aio.wire import Wire
from queuebox.clients.worker import WRITE_EVERY
from tests.unit.server.fake_transport import FakeTransport


async def writes_of(burst: int, write_every: int | None) -> list[int]:
    """The requests in each write of a burst of `burst` made in one turn."""
    wire = Wire(lambda _: None, write_every)
    transport = FakeTransport()
    wire.connection_made(transport)  # type: ignore[arg-type]
    for sync in range(1, burst + 1):
        wire.send(sync, b"r")
    await asyncio.sleep(0)  # the end of the turn: what is left goes out
    return [len(data) for data in transport.writes]


async def test_a_burst_leaves_in_one_write_unless_the_connection_sets_a_most() -> None:
    assert await writes_of(40, None) == [40]
    assert await writes_of(40, WRITE_EVERY) == [16, 16, 8]
    assert await writes_of(3, WRITE_EVERY) == [3]
