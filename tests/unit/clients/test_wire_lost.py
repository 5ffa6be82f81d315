"""A connection lost before its greeting: whoever dialled may have given up (a
link closed while it reconnected), so the greeting's error must not be left
for the garbage collector to report as never retrieved."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from queuebox.clients.aio.wire import Wire
from queuebox.clients.errors import ConnectionLost


async def test_a_greeting_lost_with_nobody_waiting_is_not_reported() -> None:
    async def hang_up(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()  # no greeting

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    lost: asyncio.Future[None] = loop.create_future()
    try:
        _, wire = await loop.create_connection(
            lambda: Wire(lambda _w: lost.set_result(None)), "127.0.0.1", port
        )
        await lost  # the server hung up; nobody awaited the greeting
        assert isinstance(wire.lost, ConnectionLost)
        del wire
        gc.collect()
        assert not reported, reported
    finally:
        loop.set_exception_handler(None)
        server.close()
        await server.wait_closed()
